"""``msh keys generate PARTY``: a key pair and a self-signed certificate for trials, and the agreement's
``Certificate`` element for it (CPP/A 2.0 §8.4.33), printed to paste into the party's PartyInfo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from msh.cli.common import Subcommands, add_command, non_empty, positive_int

__all__ = ["add_keys_command"]


def _generate(args: argparse.Namespace) -> int:
    from msh.security.keys import certificate_element, generate_key_pair, passphrase_from_env, write_key_pair

    passphrase = passphrase_from_env(args.passphrase_env) if args.passphrase_env else None
    pair = generate_key_pair(args.party, days=args.days)
    key_path, cert_path = write_key_pair(pair, Path(args.out), args.party, passphrase=passphrase)
    protection = f", encrypted with the passphrase in ${args.passphrase_env}" if passphrase else ""
    print(f"wrote {key_path} (private key, mode 0600{protection}) and {cert_path}", file=sys.stderr)
    print(
        f"valid until {pair.certificate.not_valid_after_utc.isoformat()}; self-signed, for trials: in production "
        "use a certificate your CA issues. Paste this element into the party's PartyInfo, and name its certId in "
        "SigningCertificateRef, EncryptionCertificateRef or ClientCertificateRef:",
        file=sys.stderr,
    )
    print(certificate_element(pair.certificate, args.cert_id or f"{args.party}_Cert"))
    return 0


def add_keys_command(sub: Subcommands) -> None:
    """Add ``msh keys`` and its subcommand ``generate``."""
    keys = sub.add_parser("keys", help="make keys and certificates", description="Make keys and certificates.")
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="SUBCOMMAND", required=True)
    generate = add_command(
        keys_sub,
        "generate",
        _generate,
        help="make a key pair and a self-signed certificate for a party (for trials)",
        description=(
            "Make an RSA key pair and a self-signed certificate (CN=PARTY) for trials, write them as "
            "DIR/PARTY.key.pem (mode 0600) and DIR/PARTY.cert.pem (never overwriting), and print the CPP/A 2.0 "
            "Certificate element to paste into the party's PartyInfo. The certificate can sign messages, "
            "receive encrypted payloads and serve TLS. With --passphrase-env VAR the private key is written as "
            "encrypted PEM with the passphrase in the environment variable VAR (give the MSH the same variable)."
        ),
    )
    generate.add_argument("party", type=non_empty, metavar="PARTY", help="the party's name (the certificate's CN)")
    generate.add_argument("--out", metavar="DIR", default=".", help="folder to write the files in (default: .)")
    generate.add_argument("--days", type=positive_int, default=365, metavar="N", help="validity in days (default: 365)")
    generate.add_argument("--cert-id", metavar="ID", help="the Certificate element's certId (default: PARTY_Cert)")
    generate.add_argument(
        "--passphrase-env", metavar="VAR", help="encrypt the private key with the passphrase in this variable"
    )
