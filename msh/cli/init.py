"""``msh init DIR``: a party set up in a folder, ready for ``msh serve``.

The folder gets a commented settings file (``msh.toml``, in the style of ``samples/config/party-a.toml``), a
key pair and self-signed certificate in ``keys/`` (as ``msh keys generate`` makes them), an agreement in
``agreements/``, written from the partner's answers (the flags of ``msh cpa new``, :mod:`msh.cli.answers`)
or copied from ``--cpa FILE``, and the endpoint on a port checked free by binding it. It then prints the
next three commands. A folder with files in it is refused unless ``--force``, which only adds the files
that are missing: nothing is ever overwritten.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from msh.cli.answers import add_agreement_arguments, build_answers, parse_party, raw_from_args, write_agreement
from msh.cli.common import Subcommands, add_command, non_empty
from msh.cli.init_settings import settings_text
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from cryptography import x509

__all__ = ["add_init_command"]

SETTINGS = "msh.toml"


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where ``msh init`` puts each file of the party's folder."""

    folder: Path
    stem: str

    @property
    def settings(self) -> Path:
        return self.folder / SETTINGS

    @property
    def key(self) -> Path:
        return self.folder / "keys" / f"{self.stem}.key.pem"

    @property
    def certificate(self) -> Path:
        return self.folder / "keys" / f"{self.stem}.cert.pem"

    @property
    def agreements(self) -> Path:
        return self.folder / "agreements"


def _port(host: str, wanted: int | None) -> int:
    """``wanted`` if it can be bound on ``host`` now, else :class:`ConfigurationError`; None: a free port
    the system picks (bound and released: free when checked)."""
    address = "0.0.0.0" if host not in ("127.0.0.1", "::1") else host
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, wanted or 0))
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
            raise ConfigurationError(
                f"port {wanted} on {address} is taken (or needs privileges); choose another with --port, or leave "
                "--port out for a free one"
            ) from None
        return int(probe.getsockname()[1])


def _listen_address(host: str) -> str:
    """Where to listen for the endpoint at ``host``: the loopback for a local name, else every address."""
    if host in ("localhost", "127.0.0.1"):
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return "0.0.0.0"


def _key_pair(layout: _Layout, party: str, host: str, days: int) -> x509.Certificate:
    """Our certificate: the one in ``keys/`` when ``--force`` kept it, else a new pair written there."""
    from msh.security.keys import generate_key_pair, load_certificates, write_key_pair

    if layout.key.exists() and layout.certificate.exists():
        return load_certificates(layout.certificate)[0]
    if layout.key.exists() or layout.certificate.exists():
        raise ConfigurationError(
            f"{layout.folder / 'keys'} holds only one of {layout.key.name} and {layout.certificate.name}; move it "
            "away so that a matching pair can be made"
        )
    # The certificate names the endpoint's host (subjectAltName), so that the partner's TLS checks it.
    pair = generate_key_pair(party, days=days, hosts=[host])
    write_key_pair(pair, layout.key.parent, layout.stem)
    return pair.certificate


def _agreement(args: argparse.Namespace, layout: _Layout, url: str, certificate: x509.Certificate) -> Path | None:
    """The agreement file in ``agreements/``: copied from ``--cpa``, written from the answers, or None when
    neither was given (then one is added later)."""
    layout.agreements.mkdir(exist_ok=True)
    if args.cpa is not None:
        _warn_other_certificates(args.cpa, args.party, certificate)
        target = layout.agreements / Path(args.cpa).name
        if not target.exists():
            shutil.copyfile(args.cpa, target)
        return target
    raw = raw_from_args(args)
    if raw.theirs is None and not any((raw.their_url, raw.service, raw.actions)):
        return None
    raw.ours, raw.our_url = args.party, url
    answers = build_answers(raw, our_certificate=certificate)
    target = layout.agreements / f"{answers.cpa_id.replace('/', '_').replace(':', '_')}.xml"
    if not target.exists():
        write_agreement(answers, target)
    return target


def _endpoint(args: argparse.Namespace, party_id: str) -> tuple[str, str, int | None, str | None]:
    """Scheme, host and port of our endpoint: ``--cpa``'s endpoint for our party, else https when the
    partner's URL is (or ``--tls``), ``--host`` and ``--port`` (None: a free one); and the agreement's URL
    for us when ``--cpa`` gives one."""
    if args.cpa is None:
        partner_tls = bool(args.their_url and args.their_url.startswith("https://"))
        return ("https" if partner_tls or args.tls else "http"), args.host, args.port, None
    from urllib.parse import urlsplit

    from cpa import CpaError, load

    try:
        agreement = load(args.cpa)
    except CpaError as exc:
        raise ConfigurationError(f"--cpa {args.cpa} does not load: {exc.problems[0]}") from None
    for info in agreement.party_infos:
        if any(p.value == party_id for p in info.party_ids):
            receiver = info.default_msh_channel.transport.receiver
            if receiver is not None and receiver.endpoints:
                parts = urlsplit(receiver.endpoints[0].uri)
                default = 443 if parts.scheme == "https" else 80
                port = args.port if args.port is not None else (parts.port or default)
                if parts.path not in ("/msh", ""):
                    raise ConfigurationError(
                        f"--cpa {args.cpa}: our endpoint's path is {parts.path!r}; msh init "
                        "sets up /msh: edit server.path in msh.toml after init"
                    )
                return parts.scheme, parts.hostname or args.host, port, receiver.endpoints[0].uri
    raise ConfigurationError(
        f"--cpa {args.cpa} has no PartyInfo with PartyId {party_id} and an endpoint: check --party"
    )


def _warn_other_certificates(path: str, party: str, certificate: x509.Certificate) -> None:
    """Say so when the agreement names certificates for our party and ours (in keys/) is not among them."""
    from cryptography.hazmat.primitives.serialization import Encoding

    from cpa import load

    party_id = parse_party(party, "--party")[0]
    ours = certificate.public_bytes(Encoding.DER)
    for info in load(path).party_infos:
        named = [c for c in info.certificates if any(p.value == party_id for p in info.party_ids)]
        if named and not any(ours in c.x509 for c in named):
            print(
                f"note: {path} names other certificates for {party_id} than keys/party.cert.pem; put the key of "
                "the one it names in keys/, or have the agreement name this one (msh keys generate prints its "
                "Certificate element)",
                file=sys.stderr,
            )


def _refuse_non_empty(folder: Path, force: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise ConfigurationError(f"{folder} is a file; give a folder to set the party up in")
    if folder.exists() and any(folder.iterdir()) and not force:
        raise ConfigurationError(
            f"{folder} is not empty; give a new or empty folder, or --force to add only the files missing there "
            "(nothing is overwritten)"
        )


def _init(args: argparse.Namespace) -> int:
    folder = Path(args.folder)
    _refuse_non_empty(folder, args.force)
    party_id, party_type = parse_party(args.party, "--party")
    if args.cpa is not None and (args.theirs or args.their_url or args.service or args.action):
        raise ConfigurationError("--cpa and the partner's answers are two ways to the agreement; give one of them")
    layout = _Layout(folder, "party")
    kept = {p for p in (layout.settings, layout.key, layout.certificate) if p.exists()}
    scheme, host, port, given_url = _endpoint(args, party_id)
    if layout.settings in kept:  # --force: the endpoint the settings already give (perhaps serving now)
        scheme, port = _existing_endpoint(layout.settings)
    else:
        port = _port(_listen_address(host), port)
    url = given_url or f"{scheme}://{host}:{port}/msh"
    folder.mkdir(parents=True, exist_ok=True)
    certificate = _key_pair(layout, party_id, host, args.days)
    agreements_before = set(layout.agreements.glob("*.xml")) if layout.agreements.is_dir() else set()
    agreement = _agreement(args, layout, url, certificate)
    kept |= agreements_before
    if not layout.settings.exists():
        text = settings_text(
            party_id, party_type, host=_listen_address(host), port=port, tls=scheme == "https", url=url
        )
        with open(layout.settings, "x", encoding="utf-8") as out:
            out.write(text)
    _report(layout, f"{url} (listening on port {port})" if given_url else url, agreement, args, kept)
    return 0


def _existing_endpoint(settings: Path) -> tuple[str, int]:
    """Scheme and port of the endpoint the settings file ``msh init`` wrote before gives."""
    import tomllib

    try:
        server = tomllib.loads(settings.read_text(encoding="utf-8")).get("server", {})
        return ("https" if server.get("tls", True) else "http"), int(server["port"])
    except (OSError, ValueError, KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(
            f"{settings} gives no readable server.port ({exc}); fix it, or move it away for a new one"
        ) from None


def _report(layout: _Layout, url: str, agreement: Path | None, args: argparse.Namespace, kept: set[Path]) -> None:
    def state(path: Path) -> str:
        return "kept" if path in kept else "new"

    print(f"set up party {args.party.split(':')[0]} in {layout.folder}: endpoint {url}")
    print(f"  settings     {layout.settings} ({state(layout.settings)})")
    print(f"  keys         {layout.key} (mode 0600), {layout.certificate} ({state(layout.key)})")
    if agreement is not None:
        print(f"  agreement    {agreement} ({state(agreement)})")
    config = layout.settings
    if agreement is None:
        print("next: write the agreement with your partner's answers, start the MSH, send:")
        print(
            f"  msh cpa new --ours {args.party} --our-url {url} --cert {layout.certificate} --theirs PARTYID:TYPE "
            f"--their-url URL --service S --action A --out {layout.agreements / 'partner.xml'}"
        )
    else:
        print("next: check the agreement, start the MSH, send a message:")
        print(f"  msh cpa validate {agreement}")
    print(f"  msh serve --config {config}")
    to = args.theirs or "PARTYID"
    service = args.service or "SERVICE"
    action = (args.action or ["ACTION"])[0].split(":")[0]
    if args.cpa is not None and agreement is not None:  # what the given agreement lets us send first
        to, service, action = _first_send(agreement, args.party.split(":")[0]) or (to, service, action)
    print(f"  msh send --config {config} --to {to.split(':')[0]} --service {service} --action {action} --payload FILE")


def _first_send(agreement: Path, party_id: str) -> tuple[str, str, str] | None:
    """The partner, service and first action our party sends under ``agreement`` (CPP/CPA 2.0 §8.4.9
    CanSend), or None when it names none we can write on a command line (a typed service)."""
    from cpa import CpaError, load

    try:
        loaded = load(agreement)
    except CpaError:
        return None
    ours = [p for p in loaded.party_infos if any(i.value == party_id for i in p.party_ids)]
    theirs = [p for p in loaded.party_infos if p not in ours]
    if not ours or not theirs:
        return None
    for role in ours[0].collaboration_roles:
        binding = role.service_binding
        if binding.can_send and not binding.service_type:
            return theirs[0].party_ids[0].value, binding.service, binding.can_send[0].action
    return None


def _port_number(text: str) -> int:
    """An argparse type: a TCP port number, 1 to 65535."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number from 1 to 65535")
    return int(text)


def add_init_command(sub: Subcommands) -> None:
    """Add ``msh init``."""
    init = add_command(
        sub,
        "init",
        _init,
        help="set up a party in a folder: settings, keys, an agreement, a free port",
        description=(
            "Set up a party in the folder DIR: a commented settings file (msh.toml), an RSA key pair and a "
            "self-signed certificate in keys/ (for trials: use your CA's in production), an agreement in "
            "agreements/ written from the partner's answers (the flags of 'msh cpa new') or copied from --cpa, "
            "and the endpoint on a port checked free by binding it (--port, or a free one). Prints the next three "
            "commands. A folder with files in it is refused unless --force, which adds only the missing files "
            "(nothing is overwritten). The endpoint is https when the partner's URL is (or with --tls)."
        ),
    )
    init.add_argument("folder", metavar="DIR", help="the folder to set the party up in (new or empty)")
    init.add_argument("--party", required=True, type=non_empty, metavar="PARTYID[:TYPE]", help="our PartyId")
    init.add_argument("--host", default="127.0.0.1", metavar="NAME", help="our endpoint's host (default 127.0.0.1)")
    init.add_argument(
        "--port", type=_port_number, default=None, metavar="N", help="our endpoint's port (default: a free one)"
    )
    init.add_argument("--tls", action="store_true", help="an https endpoint even for a partner reached over http")
    init.add_argument("--cpa", metavar="FILE", help="an agreement to use instead of the partner's answers")
    init.add_argument("--force", action="store_true", help="add the missing files to a folder that is not empty")
    add_agreement_arguments(init, partner_flags=("--partner", "--theirs"))
