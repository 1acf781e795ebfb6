"""What makes a setting's value usable: the checks of single values, the rules that tie settings together,
and what the TLS files must hold.

A check takes a value of the setting's type and returns None, or what is wrong and what to write instead
(the caller puts the setting's name in front).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from cpa.duration import XsDuration
from msh.runtime.config.values import format_duration, show

__all__ = [
    "CROSS_RULES",
    "CrossRule",
    "Given",
    "Label",
    "at_least_one",
    "certificate_file_problem",
    "cross_problems",
    "host",
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
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")


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


# ----------------------------------------------------------------------------------- settings together


@dataclass(frozen=True, slots=True)
class Given:
    """The effective settings as a cross-setting rule sees them: each value, its label, whether it is usable."""

    values: Mapping[str, Any]
    """``section.key`` -> the effective value (``routing.routes`` too)."""
    label: Label
    bad: Collection[str]
    """The settings that already have a problem of their own."""

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def usable(self, *keys: str) -> bool:
        """True when each of ``keys`` has a value and no problem of its own."""
        return all(k in self.values and k not in self.bad for k in keys)


@dataclass(frozen=True, slots=True)
class CrossRule:
    """One rule that ties settings together: it is checked only when all its ``keys`` are usable."""

    keys: tuple[str, ...]
    check: Callable[[Given], str | None]
    """None, or what is wrong, naming the settings (with :attr:`Given.label`) and what to write instead."""
    protects: str
    """What goes wrong without the rule."""


def _one_half(given: Given, first: str, second: str, needs: str) -> str | None:
    """Of two settings that go together, one is set and the other is not."""
    if (given[first] is None) == (given[second] is None):
        return None
    set_, unset = (first, second) if given[first] is not None else (second, first)
    return f"{given.label(set_)} is set but {unset} is not; {needs}"


def _api_names_an_application(given: Given) -> str | None:
    if not given["api.enabled"] or given["api.applications"] or given["api.client_ca"]:
        return None
    label = given.label
    return (
        f"{label('api.enabled')} is true but {label('api.applications')} names no application (and "
        f'{label("api.client_ca")} is empty): add one, e.g. ["billing=env:BILLING_TOKEN"]'
    )


def _api_tls_has_a_key_pair(given: Given) -> str | None:
    if not (given["api.tls"] or given["api.client_ca"]):
        return None
    if given["tls.certificate"] is not None and given["tls.private_key"] is not None and given["api.tls"]:
        return None
    label = given.label
    return (
        f"{label('api.tls')} (or {label('api.client_ca')}) needs HTTPS: set {label('api.tls')} true, "
        f"{label('tls.certificate')} and {label('tls.private_key')}"
    )


def _https_has_a_key_pair(given: Given) -> str | None:
    unset = [k for k in ("tls.certificate", "tls.private_key") if given[k] is None]
    if not given["server.tls"] or not unset:
        return None
    return (
        f"{given.label('server.tls')} is true (serve HTTPS) but {' and '.join(given.label(k) for k in unset)} "
        f"{'is' if len(unset) == 1 else 'are'} not set; give our certificate and private key (PEM files), "
        "or set server.tls = false to serve plain HTTP"
    )


def _tls_key_pair_is_whole(given: Given) -> str | None:
    if given.usable("server.tls") and given["server.tls"]:
        return None  # _https_has_a_key_pair names the missing half
    return _one_half(given, "tls.certificate", "tls.private_key", "a TLS client certificate needs both halves")


def _signing_key_pair_is_whole(given: Given) -> str | None:
    return _one_half(
        given, "security.signing_key", "security.signing_certificate", "signing needs the key and its certificate"
    )


def _first_resend_after_http_timeout(given: Given) -> str | None:
    first, http = given["sending.first_resend_timeout"], given["sending.http_timeout"]
    if first is None or first > http:
        return None
    label = given.label
    return (
        f"{label('sending.first_resend_timeout')} = {format_duration(first)} is not greater than "
        f"{label('sending.http_timeout')} = {format_duration(http)}: an HTTP exchange must end before the "
        "first resend is due, otherwise a slow answer counts as lost and the message is resent while still "
        "in flight; make sending.http_timeout shorter or sending.first_resend_timeout longer"
    )


def _lease_outlasts_http_timeout(given: Given) -> str | None:
    lease, http = given["timers.lease"], given["sending.http_timeout"]
    if lease > http:
        return None
    label = given.label
    return (
        f"{label('timers.lease')} = {format_duration(lease)} is not greater than "
        f"{label('sending.http_timeout')} = {format_duration(http)}: a claimed timer's transmission must "
        "end within its lease, otherwise another process claims it and sends the message again; make "
        "timers.lease longer or sending.http_timeout shorter"
    )


def _agreements_or_routes(given: Given) -> str | None:
    if given["agreements.paths"] or given["routing.routes"]:
        return None
    return (
        f"{given.label('agreements.paths')} is empty and no routing.routes are configured: this MSH would have "
        "nothing to do; name the CPA files it works under in agreements.paths (or MSH_AGREEMENTS_PATHS), or, "
        "for an intermediary, configure its routes as [[routing.routes]] tables in the configuration file"
    )


def _untyped_party_id_is_a_uri(given: Given) -> str | None:
    party_id = given["identity.party_id"]
    # ebMS2 §3.1.1.1: without a type attribute the PartyId MUST be a URI (else Inconsistent).
    if given["identity.party_id_type"] is not None or not party_id.strip() or _URI.fullmatch(party_id):
        return None
    return (
        f"{given.label('identity.party_id')} = {show(party_id)} has no identity.party_id_type and is not a URI; "
        "ebMS2 §3.1.1.1 requires an untyped PartyId to be a URI (partners reject it as Inconsistent): set "
        'identity.party_id_type (e.g. "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088") or write the '
        'PartyId as a URI (e.g. "urn:duns:123456789")'
    )


CROSS_RULES: Final[tuple[CrossRule, ...]] = (
    CrossRule(
        ("api.enabled", "api.applications", "api.client_ca"),
        _api_names_an_application,
        "interfaces that no application can authenticate to",
    ),
    CrossRule(
        ("api.tls", "api.client_ca", "tls.certificate", "tls.private_key"),
        _api_tls_has_a_key_pair,
        "client certificates asked for over plain HTTP, or HTTPS without a key pair",
    ),
    CrossRule(
        ("server.tls", "tls.certificate", "tls.private_key"),
        _https_has_a_key_pair,
        "an HTTPS endpoint without a certificate or key to serve",
    ),
    CrossRule(
        ("tls.certificate", "tls.private_key"),
        _tls_key_pair_is_whole,
        "a TLS client certificate presented without its key, or a key without its certificate",
    ),
    CrossRule(
        ("security.signing_key", "security.signing_certificate"),
        _signing_key_pair_is_whole,
        "a signing key without the certificate that goes with it, or a certificate without its key (ebMS2 §4.1)",
    ),
    CrossRule(
        ("sending.first_resend_timeout", "sending.http_timeout"),
        _first_resend_after_http_timeout,
        "a message resent while its first transmission is still in flight",
    ),
    CrossRule(
        ("timers.lease", "sending.http_timeout"),
        _lease_outlasts_http_timeout,
        "a timer taken over by another process while its transmission is still in flight",
    ),
    CrossRule(
        ("agreements.paths", "routing.routes"),
        _agreements_or_routes,
        "an MSH that has nothing to do",
    ),
    CrossRule(
        ("identity.party_id", "identity.party_id_type"),
        _untyped_party_id_is_a_uri,
        "messages partners reject as Inconsistent (ebMS2 §3.1.1.1)",
    ),
)
"""The rules that tie settings together, in the order their problems are reported."""


def cross_problems(values: Mapping[str, Any], label: Label, bad: Collection[str]) -> list[str]:
    """The problems the rules that tie settings together find (:data:`CROSS_RULES`, in order).

    ``values`` maps ``section.key`` to the effective value; ``label`` names a setting in a message; a rule
    is skipped when one of its settings already has a problem of its own (in ``bad``).
    """
    given = Given(values, label, bad)
    found = (rule.check(given) for rule in CROSS_RULES if given.usable(*rule.keys))
    return [problem for problem in found if problem]


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
