"""The MSH's settings: one TOML file, every setting overridable by an environment variable.

File
    Sections and keys are named exactly like the fields of :class:`Settings` and of its parts::

        [identity]   party_id, party_id_type, message_id_domain
        [agreements] paths, reading, time_accuracy, verify_signatures
        [store]      url
        [server]     host, port, path, tls, max_body_bytes, max_header_bytes, max_headers, read_timeout,
                     max_connections_per_client
        [tls]        certificate, private_key, trusted, require_client_certificate
        [sending]    first_resend_timeout, http_timeout, connect_timeout, max_in_flight,
                     ack_requested, duplicate_elimination
        [receiving]  parse_mode, accept_unterminated_packages
        [timers]     poll_interval, lease

    An unknown section or key, or a value of the wrong type, is an error naming it (typos do not pass
    silently). ``identity.party_id``, ``agreements.paths`` and ``store.url`` are required; everything else
    has a default. Samples: ``samples/config/party-a.toml`` and ``party-b.toml``.

Environment
    ``MSH_<SECTION>_<KEY>`` (upper case) overrides ``<section>.<key>``, e.g. ``MSH_SERVER_PORT=8082``,
    ``MSH_SENDING_FIRST_RESEND_TIMEOUT=PT2S``; the environment wins over the file. Booleans are
    true/false/1/0/yes/no (any case); lists (``agreements.paths``, ``tls.trusted``) are ``os.pathsep``
    separated; an empty value unsets an optional setting (``MSH_TLS_CERTIFICATE=``). Any other variable
    starting ``MSH_`` is an error naming it (a misspelt override would otherwise be ignored), except:
    ``MSH_CONFIG`` names the configuration file (read by :func:`load_settings` when it is given no path),
    ``MSH_VENV`` is the virtualenv folder of ``scripts/demo`` and ``scripts/test``, and ``MSH_TEST_*`` is
    left to the test suites (e.g. ``MSH_TEST_POSTGRES_URL``).

Values
    Durations are xs:duration strings (``"PT2S"``, ``"PT0.5S"``, ``"P1D"``; read by
    :func:`cpa.duration.parse_duration`, the agreements' own xs:duration reader) or a number of seconds (a
    TOML number, or a decimal number in the environment); negative ones are refused. Every setting's
    duration has a fixed length: one counting months or years (``"P1M"``) is refused with a message saying
    so. They are timeouts, leases, poll intervals and clock tolerances, waits measured in seconds; and
    ``sending.first_resend_timeout`` must be compared with ``sending.http_timeout``, which only a fixed
    length can be. (An agreement's RetryInterval and PersistDuration may count months: :mod:`cpa.duration`.)
    Relative paths (``agreements.paths``, ``tls.*``, and ``store.url`` when it is a plain path or ``sqlite:///relative``)
    are read from the folder of the configuration file, whether they come from the file or from the
    environment; without a file, from the current folder. Agreement paths and TLS files must exist (and
    the TLS files hold what they should) when the settings are loaded.

Errors
    Every problem found is reported, each on its own line, in one :class:`SettingsError` (a
    :class:`~msh.errors.ConfigurationError`); each line names the setting, where its value came from (the
    file or the environment variable) and what to write instead.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import tomllib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from cpa.duration import parse_duration
from cpa.precedence import Reading
from msh.ebms.message import ParseMode
from msh.errors import ConfigurationError

__all__ = [
    "CONFIG_ENV",
    "AgreementSettings",
    "IdentitySettings",
    "ReceivingSettings",
    "SendingSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "StoreSettings",
    "TimerSettings",
    "TlsSettings",
    "describe",
    "load_settings",
    "settings_from_mapping",
]

CONFIG_ENV: Final = "MSH_CONFIG"
"""The environment variable naming the configuration file (not a setting)."""

_ENV_PREFIX: Final = "MSH_"
_TEST_ENV_PREFIX: Final = "MSH_TEST_"  # left to the test suites (MSH_TEST_POSTGRES_URL)
_NOT_SETTINGS: Final = frozenset({CONFIG_ENV, "MSH_VENV"})  # MSH_VENV: scripts/_env.sh's virtualenv folder
_ENV_SOURCE: Final = "<environment>"


class SettingsError(ConfigurationError):
    """The settings cannot be used; ``problems`` holds one line per problem (never empty).

    Each line names the setting, where its value came from and what to write instead.
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems: tuple[str, ...] = tuple(problems)
        count = len(self.problems)
        head = f"the MSH settings from {source} have {count} problem{'' if count == 1 else 's'}:"
        super().__init__("\n".join([head, *(f"  - {p}" for p in self.problems)]))


# ------------------------------------------------------------------------------------------ field checks
# Each check takes a value of the field's type and returns None, or what is wrong and what to write.

_DOT_ATOM: Final = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return _format_duration(value)
    if isinstance(value, (str, Path)):
        return repr(str(value))
    return repr(value)


def _check_party_id(value: str) -> str | None:
    if not value.strip():
        return f'{_show(value)} is empty; give our PartyId as the agreements name it, e.g. "123456789"'
    return None


def _check_party_id_type(value: str | None) -> str | None:
    if value is not None and not value.strip():
        return (
            f"{_show(value)} is empty; give the PartyId type, e.g. "
            '"urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088", or leave the key out'
        )
    return None


def _check_domain(value: str) -> str | None:
    # RFC 2822 §3.6.4: the right-hand side of a msg-id (ebMS2 §3.1.6.1 MessageId) is a dot-atom.
    if not _DOT_ATOM.fullmatch(value):
        return (
            f"{_show(value)} cannot follow the '@' of a MessageId (RFC 2822 §3.6.4): write a domain-like name "
            "of letters, digits, '-' and dots, without '<', '>', '@' or spaces, e.g. \"msh.example.com\""
        )
    return None


def _check_agreement_paths(value: tuple[Path, ...]) -> str | None:
    if not value:
        return "names no agreement; give at least one CPA file or folder of CPA files"
    return None


def _check_not_negative(value: timedelta) -> str | None:
    if value < timedelta(0):
        return f"{_show(value)} is negative; give zero or a positive duration"
    return None


def _check_positive(value: timedelta) -> str | None:
    if value <= timedelta(0):
        return f'{_show(value)} is not positive; give a duration greater than zero, e.g. "PT1S"'
    return None


def _check_optional_positive(value: timedelta | None) -> str | None:
    return None if value is None else _check_positive(value)


def _check_host(value: str) -> str | None:
    if not value.strip() or any(c.isspace() for c in value):
        return f'{_show(value)} is not a host name or address; write e.g. "127.0.0.1" or "0.0.0.0"'
    return None


def _check_port(value: int) -> str | None:
    if not 0 <= value <= 65535:
        return f"{value} is not a port number; write a port number 1-65535 (0: any free port)"
    return None


def _check_url_path(value: str) -> str | None:
    if not value.startswith("/") or any(c.isspace() or c in "?#" for c in value):
        shown = _show(value)
        return f"{shown} is not a URL path; write one starting with '/', without spaces, '?' or '#', e.g. \"/msh\""
    return None


def _check_at_least_one(value: int) -> str | None:
    if value < 1:
        return f"{value} is less than 1; give a whole number of at least 1"
    return None


# --------------------------------------------------------------------------------------- the field table


@dataclass(frozen=True, slots=True)
class _Spec:
    """How one setting is read: its kind, what to write (for messages), and its check."""

    kind: str  # str | int | bool | duration | path | paths | enum | url
    hint: str
    optional: bool = False
    enum: type[StrEnum] | None = None
    check: Callable[[Any], str | None] | None = None


_SPECS: Final[dict[str, dict[str, _Spec]]] = {
    "identity": {
        "party_id": _Spec("str", 'write our PartyId as a string, e.g. "123456789"', check=_check_party_id),
        "party_id_type": _Spec(
            "str",
            'write the PartyId type as a string, e.g. "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"',
            optional=True,
            check=_check_party_id_type,
        ),
        "message_id_domain": _Spec("str", 'write a domain-like name, e.g. "msh.example.com"', check=_check_domain),
    },
    "agreements": {
        "paths": _Spec(
            "paths", 'write a list of CPA files or folders, e.g. ["cpas/partner.xml"]', check=_check_agreement_paths
        ),
        "reading": _Spec("enum", "", enum=Reading),
        "time_accuracy": _Spec("duration", 'write a duration, e.g. "PT5S" or 5', check=_check_not_negative),
        "verify_signatures": _Spec("bool", "write true or false"),
    },
    "store": {
        "url": _Spec("url", 'write a file path, sqlite:///path, postgresql+psycopg://user@host/db or "memory:"'),
    },
    "server": {
        "host": _Spec("str", 'write a host name or address, e.g. "127.0.0.1"', check=_check_host),
        "port": _Spec("int", "write a port number 1-65535 (0: any free port)", check=_check_port),
        "path": _Spec("str", 'write a URL path, e.g. "/msh"', check=_check_url_path),
        "tls": _Spec("bool", "write true (serve HTTPS) or false (plain HTTP)"),
        "max_body_bytes": _Spec("int", "write a number of bytes, e.g. 67108864", check=_check_at_least_one),
        "max_header_bytes": _Spec("int", "write a number of bytes, e.g. 65536", check=_check_at_least_one),
        "max_headers": _Spec("int", "write a whole number of at least 1, e.g. 100", check=_check_at_least_one),
        "read_timeout": _Spec("duration", 'write a duration, e.g. "PT30S" or 30', check=_check_positive),
        "max_connections_per_client": _Spec(
            "int", "write a whole number of at least 1, e.g. 128", check=_check_at_least_one
        ),
    },
    "tls": {
        "certificate": _Spec("path", 'write the path of a PEM certificate, e.g. "keys/me.cert.pem"', optional=True),
        "private_key": _Spec("path", 'write the path of a PEM private key, e.g. "keys/me.key.pem"', optional=True),
        "trusted": _Spec("paths", 'write a list of PEM certificate files, e.g. ["keys/ca.pem"]'),
        "require_client_certificate": _Spec("bool", "write true (mutual TLS) or false"),
    },
    "sending": {
        "first_resend_timeout": _Spec(
            "duration", 'write a duration, e.g. "PT3S" or 3', optional=True, check=_check_optional_positive
        ),
        "http_timeout": _Spec("duration", 'write a duration, e.g. "PT30S" or 30', check=_check_positive),
        "connect_timeout": _Spec("duration", 'write a duration, e.g. "PT10S" or 10', check=_check_positive),
        "max_in_flight": _Spec("int", "write a whole number of at least 1, e.g. 32", check=_check_at_least_one),
        "ack_requested": _Spec("bool", "write true or false"),
        "duplicate_elimination": _Spec("bool", "write true or false"),
    },
    "receiving": {
        "parse_mode": _Spec("enum", "", enum=ParseMode),
        "accept_unterminated_packages": _Spec("bool", "write true or false"),
    },
    "timers": {
        "poll_interval": _Spec("duration", 'write a duration, e.g. "PT1S" or 1', check=_check_positive),
        "lease": _Spec("duration", 'write a duration, e.g. "PT60S" or 60', check=_check_positive),
    },
}

_ALL_SETTINGS: Final = tuple(f"{section}.{key}" for section, specs in _SPECS.items() for key in specs)


def _field_problems(section: str, instance: object) -> list[str]:
    problems = []
    for key, spec in _SPECS[section].items():
        problem = spec.check(getattr(instance, key)) if spec.check else None
        if problem:
            problems.append(f"{section}.{key}: {problem}")
    return problems


def _raise_if(problems: list[str], source: str) -> None:
    if problems:
        raise SettingsError(source, problems)


# ---------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True, slots=True)
class IdentitySettings:
    """Who this MSH is: our PartyId (ebMS2 §3.1.1.1) and the domain of the MessageIds we make."""

    party_id: str
    party_id_type: str | None = None
    message_id_domain: str = "pymsh.local"

    def __post_init__(self) -> None:
        _raise_if(_field_problems("identity", self), "IdentitySettings")


@dataclass(frozen=True, slots=True)
class AgreementSettings:
    """Where the CPAs are and how they are applied.

    ``paths`` are CPA files or folders (a folder stands for every ``*.xml`` in it, see :meth:`files`);
    ``reading`` settles CPA/header disagreements (DESIGN.md §4); ``time_accuracy`` is mshTimeAccuracy, the
    clock tolerance for TimeToLive checks; ``verify_signatures`` verifies a CPA's own XML signature.
    """

    paths: tuple[Path, ...]
    reading: Reading = Reading.STRICT
    time_accuracy: timedelta = timedelta(0)
    verify_signatures: bool = True

    def __post_init__(self) -> None:
        _raise_if(_field_problems("agreements", self), "AgreementSettings")

    def files(self) -> tuple[Path, ...]:
        """The CPA files: each file of ``paths``, and every ``*.xml`` file of each folder, sorted by name."""
        found: list[Path] = []
        for path in self.paths:
            if path.is_dir():
                found.extend(sorted(p for p in path.glob("*.xml") if p.is_file()))
            else:
                found.append(path)
        return tuple(found)


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The durable store: an SQLite file path, ``sqlite:///...``, ``postgresql+psycopg://...`` or ``memory:``."""

    url: str


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The inbound HTTP(S) server (``port`` 0: any free port) and the limits it applies at the door.

    A request body over ``max_body_bytes`` gets HTTP 413; a request head (request line and headers) over
    ``max_header_bytes``, or with more than ``max_headers`` header fields, gets 431; a request that stops
    arriving (no byte for ``read_timeout`` while its head or body is incomplete) gets 408 and its
    connection is closed; a client address with ``max_connections_per_client`` connections open gets 503
    on the next one.
    """

    host: str = "127.0.0.1"
    port: int = 8081
    path: str = "/msh"
    tls: bool = True
    max_body_bytes: int = 64 * 1024 * 1024
    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    read_timeout: timedelta = timedelta(seconds=30)
    max_connections_per_client: int = 128

    def __post_init__(self) -> None:
        _raise_if(_field_problems("server", self), "ServerSettings")


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Our TLS key pair (server certificate and TLS client certificate), extra trust anchors, mutual TLS."""

    certificate: Path | None = None
    private_key: Path | None = None
    trusted: tuple[Path, ...] = ()
    require_client_certificate: bool = True


@dataclass(frozen=True, slots=True)
class SendingSettings:
    """Outbound transmissions.

    ``first_resend_timeout`` is the wait before the first resend (None: the CPA's RetryInterval) and must
    exceed ``http_timeout`` (the whole HTTP exchange); ``ack_requested`` and ``duplicate_elimination`` are
    the defaults for agreements that leave them ``perMessage``.
    """

    first_resend_timeout: timedelta | None = None
    http_timeout: timedelta = timedelta(seconds=30)
    connect_timeout: timedelta = timedelta(seconds=10)
    max_in_flight: int = 32
    ack_requested: bool = True
    duplicate_elimination: bool = True

    def __post_init__(self) -> None:
        _raise_if(_field_problems("sending", self), "SendingSettings")


@dataclass(frozen=True, slots=True)
class ReceivingSettings:
    """Inbound messages: how forgiving the parser is (``lenient`` accepts and reports real-world quirks).

    ``accept_unterminated_packages`` (lenient mode only) accepts a MIME package that ends without its
    closing delimiter, whose last payload may be cut short: off by default, for a partner known to send
    such packages."""

    parse_mode: ParseMode = ParseMode.LENIENT
    accept_unterminated_packages: bool = False


@dataclass(frozen=True, slots=True)
class TimerSettings:
    """The timer loop: how often it looks for due work written by other processes, and its claim lease."""

    poll_interval: timedelta = timedelta(seconds=1)
    lease: timedelta = timedelta(seconds=60)

    def __post_init__(self) -> None:
        _raise_if(_field_problems("timers", self), "TimerSettings")


_SECTIONS: Final[dict[str, type]] = {
    "identity": IdentitySettings,
    "agreements": AgreementSettings,
    "store": StoreSettings,
    "server": ServerSettings,
    "tls": TlsSettings,
    "sending": SendingSettings,
    "receiving": ReceivingSettings,
    "timers": TimerSettings,
}


def _cross_problems(values: Mapping[str, Any], label: Callable[[str], str], bad: Collection[str]) -> list[str]:
    """The rules that tie settings together; ``values`` maps ``section.key`` to the effective value.

    A rule is skipped when one of its settings already has a problem of its own (in ``bad``).
    """

    def usable(*keys: str) -> bool:
        return all(k in values and k not in bad for k in keys)

    problems: list[str] = []
    if (
        usable("server.tls", "tls.certificate", "tls.private_key")
        and values["server.tls"]
        and (values["tls.certificate"] is None or values["tls.private_key"] is None)
    ):
        unset = [k for k in ("tls.certificate", "tls.private_key") if values[k] is None]
        problems.append(
            f"{label('server.tls')} is true (serve HTTPS) but {' and '.join(label(k) for k in unset)} "
            f"{'is' if len(unset) == 1 else 'are'} not set; give our certificate and private key (PEM files), "
            "or set server.tls = false to serve plain HTTP"
        )
    elif usable("tls.certificate", "tls.private_key") and (values["tls.certificate"] is None) != (
        values["tls.private_key"] is None
    ):
        given, other = (
            ("tls.certificate", "tls.private_key")
            if values["tls.certificate"] is not None
            else ("tls.private_key", "tls.certificate")
        )
        problems.append(f"{label(given)} is set but {other} is not; a TLS client certificate needs both halves")
    first: Any = values.get("sending.first_resend_timeout")
    http: Any = values.get("sending.http_timeout")
    if usable("sending.first_resend_timeout", "sending.http_timeout") and first is not None and first <= http:
        problems.append(
            f"{label('sending.first_resend_timeout')} = {_format_duration(first)} is not greater than "
            f"{label('sending.http_timeout')} = {_format_duration(http)}: an HTTP exchange must end before the "
            "first resend is due, otherwise a slow answer counts as lost and the message is resent while still "
            "in flight; make sending.http_timeout shorter or sending.first_resend_timeout longer"
        )
    lease: Any = values.get("timers.lease")
    if usable("timers.lease", "sending.http_timeout") and lease <= http:
        problems.append(
            f"{label('timers.lease')} = {_format_duration(lease)} is not greater than "
            f"{label('sending.http_timeout')} = {_format_duration(http)}: a claimed timer's transmission must "
            "end within its lease, otherwise another process claims it and sends the message again; make "
            "timers.lease longer or sending.http_timeout shorter"
        )
    party_id: Any = values.get("identity.party_id")
    party_type: Any = values.get("identity.party_id_type")
    if (
        usable("identity.party_id", "identity.party_id_type")
        and party_type is None
        and party_id.strip()
        and not _URI.fullmatch(party_id)
    ):
        # ebMS2 §3.1.1.1: without a type attribute the PartyId MUST be a URI (else Inconsistent).
        problems.append(
            f"{label('identity.party_id')} = {_show(party_id)} has no identity.party_id_type and is not a URI; "
            "ebMS2 §3.1.1.1 requires an untyped PartyId to be a URI (partners reject it as Inconsistent): set "
            'identity.party_id_type (e.g. "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088") or write the '
            'PartyId as a URI (e.g. "urn:duns:123456789")'
        )
    return problems


def _flatten(settings: Settings) -> dict[str, Any]:
    return {
        f"{section}.{f.name}": getattr(getattr(settings, section), f.name)
        for section in _SECTIONS
        for f in fields(getattr(settings, section))
    }


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting of one MSH; ``source`` says where they came from (the configuration file)."""

    identity: IdentitySettings
    agreements: AgreementSettings
    store: StoreSettings
    server: ServerSettings = ServerSettings()
    tls: TlsSettings = TlsSettings()
    sending: SendingSettings = SendingSettings()
    receiving: ReceivingSettings = ReceivingSettings()
    timers: TimerSettings = TimerSettings()
    source: str = "<defaults>"

    def __post_init__(self) -> None:
        _raise_if(_cross_problems(_flatten(self), lambda key: key, ()), self.source)


# --------------------------------------------------------------------------------------- reading values


class _Invalid(Exception):
    """A value cannot be read; the message says what is wrong and what to write."""


_TYPE_NAMES: Final = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
_TRUE: Final = frozenset({"true", "1", "yes"})
_FALSE: Final = frozenset({"false", "0", "no"})
_DECIMAL: Final = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")


def _type_name(value: object) -> str:
    return _TYPE_NAMES.get(type(value), "a table" if isinstance(value, Mapping) else f"a {type(value).__name__}")


def _wrong_type(value: object, expected: str, hint: str) -> _Invalid:
    return _Invalid(f"{_show(value)} is {_type_name(value)}, not {expected}; {hint}")


def _xs_duration(text: str) -> timedelta:
    """A fixed-length xs:duration, read by :func:`cpa.duration.parse_duration` (the project's xs:duration reader)."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        message = str(exc)
        if "is not an xs:duration" in message:
            message += ", or give a number of seconds"
        raise _Invalid(message) from None


def _seconds(value: float, shown: str) -> timedelta:
    if not math.isfinite(value):
        raise _Invalid(f'{shown} is not a duration; give a number of seconds or an xs:duration like "PT30S"')
    if value < 0:
        raise _Invalid(f"{shown} is negative; give a positive duration")
    try:
        return timedelta(seconds=value)
    except OverflowError:
        raise _Invalid(f"{shown} is too long to be used; give a shorter duration") from None


def _parse(spec: _Spec, value: object, from_env: bool) -> Any:
    """``value`` (a TOML value, or the text of an environment variable) as the setting's Python value."""
    if from_env:
        assert isinstance(value, str)
        text = value.strip()
        if spec.optional and not text:
            return None
        return _parse_text(spec, text)
    if spec.optional and value == "":
        raise _Invalid("'' is empty; leave the key out to leave the setting unset")
    return _parse_toml(spec, value)


def _parse_text(spec: _Spec, text: str) -> Any:
    kind = spec.kind
    if kind in ("str", "url"):
        if kind == "url" and not text:
            raise _Invalid(f"the value is empty; {spec.hint}")
        return text
    if kind == "int":
        if not _INTEGER.fullmatch(text):
            raise _Invalid(f"{text!r} is not an integer; {spec.hint}")
        return int(text)
    if kind == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise _Invalid(f"{text!r} is not a boolean; write true or false (or 1/0, yes/no)")
    if kind == "duration":
        if _DECIMAL.fullmatch(text):
            return _seconds(float(text), repr(text))
        return _xs_duration(text)
    if kind == "path":
        return _path(text, spec)
    if kind == "paths":
        return tuple(_path(part, spec) for part in text.split(os.pathsep) if part.strip())
    return _enum(spec, text)


def _parse_toml(spec: _Spec, value: object) -> Any:
    kind = spec.kind
    if kind in ("str", "url", "path", "enum"):
        if not isinstance(value, str):
            raise _wrong_type(value, "a string", spec.hint or _enum_hint(spec))
        if kind == "url":
            return _parse_text(spec, value.strip())
        return _parse_text(spec, value) if kind != "str" else value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong_type(value, "an integer", spec.hint)
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise _wrong_type(value, "a boolean", spec.hint)
        return value
    if kind == "duration":
        if isinstance(value, str):
            return _xs_duration(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _seconds(float(value), _show(value))
        raise _wrong_type(value, 'a duration ("PT30S") or a number of seconds', spec.hint)
    # paths
    if not isinstance(value, list):
        raise _wrong_type(value, "a list of paths", spec.hint)
    paths = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _Invalid(f"item {index + 1} {_show(item)} is {_type_name(item)}, not a path string; {spec.hint}")
        paths.append(_path(item, spec))
    return tuple(paths)


def _path(text: str, spec: _Spec) -> Path:
    if not text.strip():
        raise _Invalid(f"a path is empty; {spec.hint}")
    return Path(text).expanduser()


def _enum_hint(spec: _Spec) -> str:
    assert spec.enum is not None
    return "write one of " + ", ".join(f'"{member.value}"' for member in spec.enum)


def _enum(spec: _Spec, text: str) -> StrEnum:
    assert spec.enum is not None
    try:
        return spec.enum(text.strip().lower())
    except ValueError:
        raise _Invalid(f"{text!r} is not a known value; {_enum_hint(spec)}") from None


# ------------------------------------------------------------------------------------------ paths, files

_SQLITE_URL: Final = re.compile(r"(sqlite(?:\+\w+)?:///)(.*)", re.IGNORECASE | re.DOTALL)


def _resolve(path: Path, base_dir: Path) -> Path:
    return (path if path.is_absolute() else base_dir / path).resolve()


def _resolve_store_url(text: str, base_dir: Path) -> str:
    """A plain relative path or ``sqlite:///relative`` made absolute against ``base_dir``; others unchanged."""
    if text.lower() in ("memory:", "memory://"):
        return "memory:"
    match = _SQLITE_URL.fullmatch(text)
    if match:
        database, mark, query = match.group(2).partition("?")
        if database and database != ":memory:" and not database.startswith("file:"):
            path = Path(database).expanduser()
            if not path.is_absolute():
                return f"{match.group(1)}{_resolve(path, base_dir)}{mark}{query}"
        return text
    if "://" in text or text.lower().startswith("sqlite:"):
        return text
    return str(_resolve(Path(text).expanduser(), base_dir))


def _store_url_problem(url: str) -> str | None:
    if url == "memory:":
        return None
    from msh.store.sql import resolve_url  # the store's own reading of its URL (loads SQLAlchemy)

    try:
        resolve_url(url)
    except ConfigurationError as exc:
        return str(exc)
    return None


def _file_problem(path: Path, base_dir: Path, what: str) -> str | None:
    if not path.exists():
        return f"{str(path)!r} does not exist; give the path of {what} (a relative path is read from {str(base_dir)!r})"
    if not path.is_file():
        return f"{str(path)!r} is not a file; give the path of {what}"
    return None


def _agreement_path_problem(path: Path, base_dir: Path) -> str | None:
    if not path.exists():
        return (
            f"{str(path)!r} does not exist; give a CPA file or a folder of CPA files "
            f"(a relative path is read from {str(base_dir)!r})"
        )
    if path.is_dir() and not any(p.is_file() for p in path.glob("*.xml")):
        return f"the folder {str(path)!r} holds no *.xml file; put the CPAs there or name the CPA files"
    return None


def _read_pem(path: Path) -> bytes | str:
    try:
        return path.read_bytes()
    except OSError as exc:
        return f"{str(path)!r} cannot be read ({exc.strerror}); make it readable by the MSH"


def _tls_problems(values: Mapping[str, Any], label: Callable[[str], str], bad: Collection[str]) -> list[str]:
    """The TLS files hold what they should: a certificate, its unencrypted private key, trust anchors."""
    problems: list[str] = []
    certificate: x509.Certificate | None = None
    cert_path = values["tls.certificate"]
    if cert_path is not None and "tls.certificate" not in bad:
        data = _read_pem(cert_path)
        if isinstance(data, str):
            problems.append(f"{label('tls.certificate')}: {data}")
        else:
            try:
                certificate = x509.load_pem_x509_certificate(data)
            except ValueError:
                problems.append(
                    f"{label('tls.certificate')}: {str(cert_path)!r} holds no PEM certificate "
                    "(-----BEGIN CERTIFICATE-----); give our certificate in PEM form"
                )
    key_path = values["tls.private_key"]
    if key_path is not None and "tls.private_key" not in bad:
        data = _read_pem(key_path)
        if isinstance(data, str):
            problems.append(f"{label('tls.private_key')}: {data}")
        else:
            try:
                key = serialization.load_pem_private_key(data, password=None)
            except TypeError:
                problems.append(
                    f"{label('tls.private_key')}: {str(key_path)!r} is encrypted; give the key unencrypted "
                    "(e.g. openssl pkey -in KEY -out KEY.pem) and protect the file with its permissions"
                )
            except Exception:  # cryptography raises ValueError or UnsupportedAlgorithm
                problems.append(
                    f"{label('tls.private_key')}: {str(key_path)!r} holds no PEM private key "
                    "(-----BEGIN PRIVATE KEY-----); give our certificate's private key in PEM form"
                )
            else:
                spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
                if certificate is not None and certificate.public_key().public_bytes(*spki) != (
                    key.public_key().public_bytes(*spki)
                ):
                    problems.append(
                        f"{label('tls.private_key')}: {str(key_path)!r} is not the private key of tls.certificate "
                        f"{str(cert_path)!r} (their public keys differ); give the two halves of one key pair"
                    )
    if "tls.trusted" not in bad:
        for path in values["tls.trusted"]:
            data = _read_pem(path)
            if isinstance(data, str):
                problems.append(f"{label('tls.trusted')}: {data}")
                continue
            try:
                x509.load_pem_x509_certificates(data)
            except ValueError:
                problems.append(
                    f"{label('tls.trusted')}: {str(path)!r} holds no PEM certificate (-----BEGIN CERTIFICATE-----); "
                    "give trust anchors in PEM form"
                )
    return problems


# -------------------------------------------------------------------------------------------- loading


@dataclass(frozen=True, slots=True)
class _Raw:
    value: object
    origin: str  # the configuration file or the environment variable
    from_env: bool


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _read_file_values(data: Mapping[str, Any], source: str, raw: dict[str, _Raw], problems: list[str]) -> None:
    sections = list(_SPECS)
    for section, table in data.items():
        if section not in _SPECS:
            problems.append(
                f"[{section}] (in {source}) is not a settings section{_did_you_mean(section, sections)}; "
                f"the sections are {', '.join(f'[{s}]' for s in sections)}"
            )
            continue
        keys = list(_SPECS[section])
        if not isinstance(table, Mapping):
            problems.append(
                f"{section} (in {source}) is {_type_name(table)}, not a section; write it as [{section}] "
                f"followed by its keys ({', '.join(keys)})"
            )
            continue
        for key, value in table.items():
            if key not in _SPECS[section]:
                problems.append(
                    f"{section}.{key} (in {source}) is not a setting{_did_you_mean(key, keys)}; "
                    f"the keys of [{section}] are {', '.join(keys)}"
                )
                continue
            raw[f"{section}.{key}"] = _Raw(value, source, False)


def _env_name(setting: str) -> str:
    return _ENV_PREFIX + setting.replace(".", "_").upper()


def _read_env_values(env: Mapping[str, str], raw: dict[str, _Raw], problems: list[str]) -> None:
    sections = [s.upper() for s in _SPECS]
    for name in sorted(env):
        if not name.startswith(_ENV_PREFIX) or name in _NOT_SETTINGS or name.startswith(_TEST_ENV_PREFIX):
            continue
        section, _, key = name[len(_ENV_PREFIX) :].partition("_")
        section, key = section.lower(), key.lower()
        if section not in _SPECS:
            problems.append(
                f"{name} (environment) names no setting: {section.upper()!r} is not a settings section"
                f"{_did_you_mean(section.upper(), sections)}; write MSH_<SECTION>_<KEY> with SECTION one of "
                f"{', '.join(sections)} ({CONFIG_ENV} names the configuration file), or unset {name}"
            )
            continue
        if key not in _SPECS[section]:
            names = [_env_name(f"{section}.{k}") for k in _SPECS[section]]
            problems.append(
                f"{name} (environment) names no setting{_did_you_mean(name, names)}; the settings of "
                f"[{section}] are {', '.join(names)}"
            )
            continue
        raw[f"{section}.{key}"] = _Raw(env[name], name, True)


def settings_from_mapping(
    data: Mapping[str, Any], *, base_dir: Path, source: str, env: Mapping[str, str] | None = None
) -> Settings:
    """The settings from an already parsed TOML mapping, with the environment's overrides applied.

    ``base_dir`` is the folder relative paths are read from, ``source`` names where ``data`` came from (for
    messages and :attr:`Settings.source`), ``env`` is the environment (None: ``os.environ``; pass ``{}``
    for none). Raises :class:`SettingsError` listing every problem.
    """
    env = os.environ if env is None else env
    base_dir = Path(base_dir).absolute()
    problems: list[str] = []
    raw: dict[str, _Raw] = {}
    _read_file_values(data, source, raw, problems)
    _read_env_values(env, raw, problems)

    values: dict[str, Any] = {}
    bad: set[str] = set()
    for section, cls in _SECTIONS.items():
        for f in fields(cls):
            setting = f"{section}.{f.name}"
            if f.default is not MISSING:
                values[setting] = f.default
            elif setting not in raw:
                bad.add(setting)
                problems.append(
                    f"{setting} is required; set {f.name} in [{section}] of the configuration file "
                    f"or the environment variable {_env_name(setting)}"
                )

    def label(setting: str) -> str:
        found = raw.get(setting)
        return f"{setting} (from {found.origin})" if found else f"{setting} (default)"

    for setting in [s for s in _ALL_SETTINGS if s in raw]:  # in table order, for a readable report
        found = raw[setting]
        section, key = setting.split(".")
        spec = _SPECS[section][key]
        try:
            value = _parse(spec, found.value, found.from_env)
        except _Invalid as exc:
            problems.append(f"{label(setting)}: {exc}")
            bad.add(setting)
            continue
        if spec.kind == "path" and value is not None:
            value = _resolve(value, base_dir)
        elif spec.kind == "paths":
            value = tuple(_resolve(p, base_dir) for p in value)
        elif spec.kind == "url":
            value = _resolve_store_url(value, base_dir)
        problem = spec.check(value) if spec.check else None
        if problem is None and spec.kind == "path" and value is not None:
            problem = _file_problem(value, base_dir, "a PEM file")
        elif problem is None and setting == "agreements.paths":
            problem = "; ".join(p for p in (_agreement_path_problem(v, base_dir) for v in value) if p) or None
        elif problem is None and setting == "tls.trusted":
            problem = "; ".join(p for p in (_file_problem(v, base_dir, "a PEM file") for v in value) if p) or None
        elif problem is None and spec.kind == "url":
            problem = _store_url_problem(value)
        if problem:
            problems.append(f"{label(setting)}: {problem}")
            bad.add(setting)
            continue
        values[setting] = value

    problems.extend(_tls_problems(values, label, bad))
    problems.extend(_cross_problems(values, label, bad))
    _raise_if(problems, source)

    parts = {
        section: cls(**{f.name: values[f"{section}.{f.name}"] for f in fields(cls)})
        for section, cls in _SECTIONS.items()
    }
    return Settings(**parts, source=source)


def load_settings(path: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None) -> Settings:
    """Read the TOML file at ``path`` (None: the file named by the environment variable ``MSH_CONFIG``; no
    file at all: only environment variables), then apply the environment's overrides, then validate.

    ``env`` is the environment (None: ``os.environ``). Relative paths are read from the file's folder (the
    current folder without a file). Raises :class:`SettingsError` listing every problem found.
    """
    env = os.environ if env is None else env
    named_by = ""
    if path is None and env.get(CONFIG_ENV, "").strip():
        path, named_by = env[CONFIG_ENV].strip(), f" (named by {CONFIG_ENV})"
    if path is None:
        return settings_from_mapping({}, base_dir=Path.cwd(), source=_ENV_SOURCE, env=env)
    file = Path(path).expanduser().absolute()
    source = str(file)
    try:
        with file.open("rb") as stream:
            data = tomllib.load(stream)
    except FileNotFoundError:
        raise SettingsError(
            source, [f"the configuration file {source!r}{named_by} does not exist; give the path of a TOML file"]
        ) from None
    except OSError as exc:
        raise SettingsError(
            source, [f"the configuration file {source!r}{named_by} cannot be read ({exc.strerror}); fix its path"]
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(
            source, [f"the configuration file {source!r}{named_by} is not valid TOML: {exc}; correct it there"]
        ) from None
    return settings_from_mapping(data, base_dir=file.parent, source=source, env=env)


# ------------------------------------------------------------------------------------------- describing


def _format_duration(value: timedelta) -> str:
    """``value`` as an xs:duration (``PT2S``, ``PT0.5S``, ``P1DT2H``); negative ones with a leading '-'."""
    sign = "-" if value < timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    time = ""
    if hours:
        time += f"{hours}H"
    if minutes:
        time += f"{minutes}M"
    if seconds or value.microseconds or not (value.days or time):
        fraction = f".{value.microseconds:06d}".rstrip("0") if value.microseconds else ""
        time += f"{seconds}{fraction}S"
    return f"{sign}P{f'{value.days}D' if value.days else ''}{'T' + time if time else ''}"


_PASSWORD: Final = re.compile(r"(://[^/?#@:]*:)[^/?#@]*@")


def _describe_value(setting: str, value: object) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, timedelta):
        return json.dumps(_format_duration(value))
    if isinstance(value, tuple):
        return "[" + ", ".join(_describe_value(setting, item) for item in value) + "]"
    text = str(value)
    if setting == "store.url":
        text = _PASSWORD.sub(r"\1***@", text)
    return json.dumps(text)


def describe(settings: Settings) -> str:
    """The effective settings, one ``section.key = value`` line each (TOML-like values).

    Files are shown by path only (never their contents, so no key material), and a password in the store
    URL is shown as ``***``.
    """
    return "\n".join(f"{setting} = {_describe_value(setting, value)}" for setting, value in _flatten(settings).items())
