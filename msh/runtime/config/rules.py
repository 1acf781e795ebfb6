"""What makes a setting's value usable: the checks of single values and what the TLS files must hold (the
rules that tie settings together are in :mod:`msh.runtime.config.cross_rules`).

A check takes a value of the setting's type and returns None, or what is wrong and what to write instead
(the caller puts the setting's name in front).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from cpa.duration import XsDuration
from msh.runtime.config.values import show

__all__ = [
    "Label",
    "at_least_one",
    "certificate_file_problem",
    "host",
    "endpoint_url",
    "http_url",
    "message_id_domain",
    "not_blank",
    "not_negative",
    "not_negative_count",
    "not_negative_xs_duration",
    "party_id_given",
    "party_id_type_given",
    "port",
    "positive",
    "route_party_id",
    "tls_problems",
    "url_path",
]

Label = Callable[[str], str]
"""The name of a setting in a message, with where its value came from: ``server.port (from MSH_SERVER_PORT)``."""

# ------------------------------------------------------------------------------------------ single values

_DOT_ATOM: Final = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")
URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
"""An absolute URI (RFC 3986 scheme and the rest): what an untyped PartyId must be."""


def party_id_given(value: str) -> str | None:
    """Our PartyId is not blank."""
    if not value.strip():
        return f'{show(value)} is empty; give our PartyId as the agreements name it, e.g. "123456789"'
    return None


def party_id_type_given(value: str) -> str | None:
    """A PartyId type, when given, is not blank."""
    if not value.strip():
        return (
            f"{show(value)} is empty; give the PartyId type, e.g. "
            '"urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088", or leave the key out'
        )
    return None


_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def environment_variable_name(value: str) -> str | None:
    """The name of an environment variable (not its value: a secret stays out of the settings file)."""
    if not _ENV_NAME.fullmatch(value):
        return (
            f"{show(value)} is not an environment variable name: write the name of the variable that holds the "
            'passphrase (letters, digits and "_", e.g. "PYMSH_KEY_PASSPHRASE"), not the passphrase itself'
        )
    if value.upper().startswith("MSH_"):
        # MSH_<SECTION>_<KEY> variables are settings: a passphrase there would be refused as an unknown one.
        return (
            f"{show(value)} starts with MSH_, the prefix of the settings' environment variables; name the "
            'passphrase variable otherwise, e.g. "PYMSH_KEY_PASSPHRASE"'
        )
    return None


def message_id_domain(value: str) -> str | None:
    """The domain of our MessageIds can follow their '@'."""
    # RFC 2822 §3.6.4: the right-hand side of a msg-id (ebMS2 §3.1.6.1 MessageId) is a dot-atom.
    if not _DOT_ATOM.fullmatch(value):
        return (
            f"{show(value)} cannot follow the '@' of a MessageId (RFC 2822 §3.6.4): write a domain-like name "
            "of letters, digits, '-' and dots, without '<', '>', '@' or spaces, e.g. \"msh.example.com\""
        )
    return None


def not_negative(value: timedelta) -> str | None:
    """A duration of zero or more."""
    if value < timedelta(0):
        return f"{show(value)} is negative; give zero or a positive duration"
    return None


def positive(value: timedelta) -> str | None:
    """A duration greater than zero."""
    if value <= timedelta(0):
        return f'{show(value)} is not positive; give a duration greater than zero, e.g. "PT1S"'
    return None


def host(value: str) -> str | None:
    """A host name or address, without spaces."""
    if not value.strip() or any(c.isspace() for c in value):
        return f'{show(value)} is not a host name or address; write e.g. "127.0.0.1" or "0.0.0.0"'
    return None


def port(value: int) -> str | None:
    """A port number (0: any free port)."""
    if not 0 <= value <= 65535:
        return f"{value} is not a port number; write a port number 1-65535 (0: any free port)"
    return None


def url_path(value: str) -> str | None:
    """The path part of a URL."""
    if not value.startswith("/") or any(c.isspace() or c in "?#" for c in value):
        shown = show(value)
        return f"{shown} is not a URL path; write one starting with '/', without spaces, '?' or '#', e.g. \"/msh\""
    return None


def at_least_one(value: int) -> str | None:
    """A whole number of at least 1."""
    if value < 1:
        return f"{value} is less than 1; give a whole number of at least 1"
    return None


def not_negative_count(value: int) -> str | None:
    """A whole number of zero or more."""
    if value < 0:
        return f"{value} is negative; give a whole number of 0 or more"
    return None


def not_negative_xs_duration(value: XsDuration) -> str | None:
    """An xs:duration (months allowed) of zero or more."""
    if value.is_negative:
        return f'{show(value)} is negative; give zero or a positive duration, e.g. "PT30S"'
    return None


def not_blank(value: str) -> str | None:
    """A text that is not only blanks."""
    if not value.strip():
        return f"{show(value)} is blank; write a value or leave the key out"
    return None


def route_party_id(value: str) -> str | None:
    """The PartyId a route leads to is not blank."""
    if not value.strip():
        return f'{show(value)} is empty; give the PartyId of the party the route leads to, e.g. "555555555"'
    return None


def http_url(value: str) -> str | None:
    """An absolute http:// or https:// URL with a host (a route's next hop)."""
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        return (
            f"{show(value)} is not an http:// or https:// URL; write the next hop's endpoint URL, e.g. "
            '"https://127.0.0.1:8092/msh"'
        )
    return None


_MAILBOX: Final = re.compile(r"[^@\s<>]+@[^@\s<>]+")


def endpoint_url(value: str) -> str | None:
    """A next hop any binding of the MSH reaches (docs/transports): an absolute http(s):// URL, a
    ``mailto:`` address (ebMS2 Appendix B.3) or an ``amqp(s)://host/address`` of an AMQP 1.0 broker."""
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    if any(c.isspace() for c in value):
        problem = "contains white space"
    elif scheme in ("http", "https", "amqp", "amqps"):
        problem = "" if parts.hostname else "names no host"
        if not problem and scheme.startswith("amqp") and parts.path.strip("/") == "":
            problem = "names no address on the broker after the host"
    elif scheme == "mailto":
        problem = "" if _MAILBOX.fullmatch(value[len("mailto:") :]) else "is not mailto:LOCAL@DOMAIN"
    else:
        problem = "is not an http(s)://, mailto: or amqp(s):// URL"
    if problem:
        return (
            f'{show(value)} {problem}; write the next hop\'s endpoint, e.g. "https://127.0.0.1:8092/msh", '
            '"mailto:msh@partner.example" or "amqp://broker.example:5672/queue/partner"'
        )
    return None


# ------------------------------------------------------------------------------------------- TLS files


_T = TypeVar("_T")


def _load_pem(path: Path, load: Callable[[bytes], _T], refusals: Sequence[tuple[type[Exception], str]]) -> _T | str:
    """What ``load`` reads from the file ``path``, or what is wrong: the file cannot be read, or ``load``
    raised the exception of one of the ``refusals`` (checked in order; its message follows the path)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"{str(path)!r} cannot be read ({exc.strerror}); make it readable by the MSH"
    try:
        return load(data)
    except Exception as exc:
        for refused, message in refusals:
            if isinstance(exc, refused):
                return f"{str(path)!r} {message}"
        raise


_NO_CERTIFICATE: Final = "holds no PEM certificate (-----BEGIN CERTIFICATE-----); give {0} in PEM form"


def certificate_file_problem(path: Path, what: str = "trust anchors") -> str | None:
    """None when the file ``path`` holds PEM certificates; otherwise what is wrong (``what`` names what the
    file should hold, in the message)."""
    loaded = _load_pem(path, x509.load_pem_x509_certificates, [(ValueError, _NO_CERTIFICATE.format(what))])
    return loaded if isinstance(loaded, str) else None


def tls_problems(values: Mapping[str, Any], label: Label, bad: Collection[str]) -> list[str]:
    """The TLS files hold what they should: a certificate, its unencrypted private key, trust anchors."""
    problems: list[str] = []
    certificate: x509.Certificate | None = None
    cert_path = values["tls.certificate"]
    if cert_path is not None and "tls.certificate" not in bad:
        loaded = _load_pem(
            cert_path, x509.load_pem_x509_certificate, [(ValueError, _NO_CERTIFICATE.format("our certificate"))]
        )
        if isinstance(loaded, str):
            problems.append(f"{label('tls.certificate')}: {loaded}")
        else:
            certificate = loaded
    key_path = values["tls.private_key"]
    if key_path is not None and "tls.private_key" not in bad:
        key = _load_pem(
            key_path,
            lambda data: serialization.load_pem_private_key(data, password=None),
            [
                (
                    TypeError,
                    "is encrypted; give the key unencrypted (e.g. openssl pkey -in KEY -out KEY.pem) and protect "
                    "the file with its permissions",
                ),
                # cryptography raises ValueError or UnsupportedAlgorithm
                (
                    Exception,
                    "holds no PEM private key (-----BEGIN PRIVATE KEY-----); give our certificate's private key in "
                    "PEM form",
                ),
            ],
        )
        spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        if isinstance(key, str):
            problems.append(f"{label('tls.private_key')}: {key}")
        elif certificate is not None and certificate.public_key().public_bytes(*spki) != (
            key.public_key().public_bytes(*spki)
        ):
            problems.append(
                f"{label('tls.private_key')}: {str(key_path)!r} is not the private key of tls.certificate "
                f"{str(cert_path)!r} (their public keys differ); give the two halves of one key pair"
            )
    if "tls.trusted" not in bad:
        for path in values["tls.trusted"]:
            problem = certificate_file_problem(path)
            if problem:
                problems.append(f"{label('tls.trusted')}: {problem}")
    return problems
