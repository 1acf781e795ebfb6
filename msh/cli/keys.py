"""``msh keys generate | show | import``: keys and certificates for TLS and signing (docs/certificates.md).

* ``generate PARTY --host NAME|IP …``: a key pair and a self-signed certificate naming those hosts in its
  subjectAltName, fit for TLS server, TLS client, signing and encryption, and the agreement's
  ``Certificate`` element for it (CPP/A 2.0 §8.4.33), printed to paste into the party's PartyInfo.
* ``show FILE [--json]``: what a certificate is and which uses it fits (:mod:`msh.security.certinfo`).
* ``import CERT [--chain FILE]``: the ``Certificate`` element for a certificate a CA issued (its chain in
  the same X509Data).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from msh.cli.common import Subcommands, add_command, non_empty, positive_int
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from cryptography import x509

__all__ = ["add_keys_command"]


def _fit_notes(certificate: x509.Certificate, now: datetime) -> list[str]:
    """One line per use the certificate does not fit, for stderr."""
    from msh.security.certinfo import inspect_certificate

    report = inspect_certificate(certificate, now)
    return [f"note: not fit for {fit.use.label}: {'; '.join(fit.reasons)}" for fit in report.fits if not fit.ok]


def _generate(args: argparse.Namespace) -> int:
    from msh.security.keys import (
        DEFAULT_HOSTS,
        certificate_element,
        generate_key_pair,
        passphrase_from_env,
        write_key_pair,
    )

    passphrase = passphrase_from_env(args.passphrase_env) if args.passphrase_env else None
    hosts = args.host or list(DEFAULT_HOSTS)
    pair = generate_key_pair(args.party, days=args.days, hosts=hosts)
    key_path, cert_path = write_key_pair(pair, Path(args.out), args.party, passphrase=passphrase)
    protection = f", encrypted with the passphrase in ${args.passphrase_env}" if passphrase else ""
    print(f"wrote {key_path} (private key, mode 0600{protection}) and {cert_path}", file=sys.stderr)
    if not args.host:
        print(
            f"note: no --host given, so the certificate names {' and '.join(DEFAULT_HOSTS)} only: partners on "
            "other machines need --host with the name or address in the URL they send to",
            file=sys.stderr,
        )
    print(
        f"names {', '.join(hosts)}; valid until {pair.certificate.not_valid_after_utc.isoformat()}; self-signed: "
        "the partner's agreement names it, and that is what the partner trusts. Paste this element into the "
        "party's PartyInfo, and name its certId in SigningCertificateRef, EncryptionCertificateRef, "
        "ClientCertificateRef and ServerCertificateRef:",
        file=sys.stderr,
    )
    print(certificate_element(pair.certificate, args.cert_id or _cert_id(args.party)))
    return 0


def _show(args: argparse.Namespace) -> int:
    from msh.security.certinfo import inspect_certificate
    from msh.security.keys import load_certificates

    certificates = load_certificates(args.file)
    now = datetime.now(UTC)
    reports = [inspect_certificate(c, now) for c in certificates]
    if args.json:
        print(json.dumps({"file": str(args.file), "certificates": [r.to_json() for r in reports]}, indent=2))
        return 0
    for position, report in enumerate(reports):
        if position:
            print()
        if len(reports) > 1:
            role = "the certificate" if position == 0 else "its chain"
            print(f"# {args.file}: certificate {position + 1} of {len(reports)} ({role})")
        print("\n".join(report.lines()))
    return 0


def _check_chain(chain: tuple[x509.Certificate, ...], source: str) -> None:
    """:class:`ConfigurationError` unless each certificate of ``chain`` is issued by the next (leaf first)."""
    for position, (child, issuer) in enumerate(itertools.pairwise(chain)):
        try:
            child.verify_directly_issued_by(issuer)
        except Exception:  # a wrong name, key or signature: the same advice
            raise ConfigurationError(
                f"{source}: certificate {position + 2} ({issuer.subject.rfc4514_string()}) did not issue certificate "
                f"{position + 1} ({child.subject.rfc4514_string()}, issued by {child.issuer.rfc4514_string()}); "
                "give the chain in order, leaf first, each certificate followed by its issuer"
            ) from None


def _import(args: argparse.Namespace) -> int:
    from msh.security.keys import certificate_element, load_certificates

    certificates = load_certificates(args.cert)
    if args.chain:
        certificates = (*certificates, *load_certificates(args.chain))
    certificates = tuple(dict.fromkeys(certificates))
    _check_chain(certificates, f"{args.cert}{' with ' + args.chain if args.chain else ''}")
    leaf, chain = certificates[0], certificates[1:]
    cert_id = args.cert_id or _default_cert_id(leaf)
    now = datetime.now(UTC)
    print(
        f"certificate {leaf.subject.rfc4514_string()} (issued by {leaf.issuer.rfc4514_string()}), valid until "
        f"{leaf.not_valid_after_utc.isoformat()}"
        + (f", with {len(chain)} chain certificate{'s' if len(chain) > 1 else ''}" if chain else ""),
        file=sys.stderr,
    )
    for note in _fit_notes(leaf, now):
        print(note, file=sys.stderr)
    print(
        "paste this element into the party's PartyInfo and name its certId in the certificate references; the "
        "agreement then trusts this certificate"
        + (", and whatever its chain's CAs issue, for this party" if chain else " for this party")
        + " (docs/certificates.md):",
        file=sys.stderr,
    )
    print(certificate_element(leaf, cert_id, chain=chain))
    return 0


def _cert_id(name: str) -> str:
    """``<name>_Cert`` made an xs:ID (the type of certId): other characters become ``_``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")
    if stem and not (stem[0].isalpha() or stem[0] == "_"):
        stem = "_" + stem
    return f"{stem}_Cert" if stem else "Cert"


def _default_cert_id(certificate: x509.Certificate) -> str:
    """``<CN>_Cert`` for ``certificate`` (``Cert`` when its subject has no CN)."""
    from cryptography.x509.oid import NameOID

    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return _cert_id(str(names[0].value) if names else "")


def add_keys_command(sub: Subcommands) -> None:
    """Add ``msh keys`` and its subcommands ``generate``, ``show`` and ``import``."""
    keys = sub.add_parser(
        "keys",
        help="make, show and import keys and certificates",
        description="Make keys and certificates, show what a certificate fits, import a CA-issued one "
        "(docs/certificates.md).",
    )
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="SUBCOMMAND", required=True)
    _add_generate(keys_sub)
    show = add_command(
        keys_sub,
        "show",
        _show,
        help="show a certificate and what it fits (TLS server, TLS client, signing, encryption)",
        description=(
            "Print what the certificate FILE (PEM, several for a chain, or DER) is: subject, issuer, subject "
            "alternative names, validity (expired, not yet valid, days left), serial, key type and size, CA flag, "
            "key usages and extended key usages, SHA-256 and SHA-1 fingerprints, and whether it fits a TLS server, "
            "a TLS client, signing and encryption (receiving encrypted payloads), with the reason when not. "
            "--json prints the same with camelCase keys. Exit status 0 when the file holds a certificate (fit or "
            "not), 2 when it holds none."
        ),
    )
    show.add_argument("file", metavar="FILE", help="certificate file (PEM or DER)")
    show.add_argument("--json", action="store_true", help="print JSON (camelCase keys)")
    imp = add_command(
        keys_sub,
        "import",
        _import,
        help="print the agreement's Certificate element for a CA-issued certificate",
        description=(
            "Print the CPP/A 2.0 Certificate element (tp:Certificate with a ds:KeyInfo holding the certificate "
            "and its chain in one ds:X509Data) for the certificate CERT, to paste into the party's PartyInfo in "
            "the agreement. The chain is the rest of CERT's certificates (a PEM file of several, or a PKCS#7 "
            "bundle, put leaf first) and those of --chain FILE, each the issuer of the one before (checked). "
            "Give a chain only if the CAs in it should be trusted for this "
            "party: the agreement then accepts any certificate they issue as the party's (a private CA of the "
            "partner's, so that it can renew its certificate without a new agreement); without one, exactly "
            "this certificate is trusted. Notes on stderr say which uses it does not fit. A file that holds no "
            "certificate is refused (exit status 2)."
        ),
    )
    imp.add_argument("cert", metavar="CERT", help="the certificate (PEM, leaf first; DER; or a PKCS#7 .p7b bundle)")
    imp.add_argument("--chain", metavar="FILE", help="the issuing CA certificates (PEM), the leaf's issuer first")
    imp.add_argument("--cert-id", metavar="ID", help="the Certificate element's certId (default: <CN>_Cert)")


def _add_generate(keys_sub: Subcommands) -> None:
    generate = add_command(
        keys_sub,
        "generate",
        _generate,
        help="make a key pair and a self-signed certificate for TLS and signing",
        description=(
            "Make an RSA key pair and a self-signed certificate (CN=PARTY), write them as DIR/PARTY.key.pem "
            "(mode 0600) and DIR/PARTY.cert.pem (never overwriting), and print the CPP/A 2.0 Certificate element "
            "to paste into the party's PartyInfo. The certificate names each --host in its subjectAltName (the "
            "host partners connect to: TLS clients check it, not the CN) and fits a TLS server, a TLS client, "
            "signing and encryption: keyUsage digitalSignature, contentCommitment, keyEncipherment; "
            "extendedKeyUsage serverAuth, clientAuth; a leaf (cA false). A partner whose agreement names it "
            "trusts it as this party, as it is: no CA is involved (docs/certificates.md). With --passphrase-env "
            "VAR the private key is written as encrypted PEM with the passphrase in the environment variable "
            "VAR (give the MSH the same variable)."
        ),
    )
    generate.add_argument("party", type=non_empty, metavar="PARTY", help="the party's name (the certificate's CN)")
    generate.add_argument(
        "--host",
        action="append",
        type=non_empty,
        metavar="NAME|IP",
        help="a host name or IP address partners reach this MSH at (repeat for each; default: localhost and 127.0.0.1)",
    )
    generate.add_argument("--out", metavar="DIR", default=".", help="folder to write the files in (default: .)")
    generate.add_argument("--days", type=positive_int, default=365, metavar="N", help="validity in days (default: 365)")
    generate.add_argument(
        "--cert-id",
        metavar="ID",
        help="the Certificate element's certId (default: PARTY_Cert, any character but letters, digits, .-_ as _)",
    )
    generate.add_argument(
        "--passphrase-env", metavar="VAR", help="encrypt the private key with the passphrase in this variable"
    )
