"""The MSH's settings: one TOML file, every setting overridable by an environment variable.

Sections and keys are the fields of the dataclasses below (``[server] port = 8081``). An environment
variable ``MSH_<SECTION>_<KEY>`` (upper case) overrides the file: ``MSH_SERVER_PORT=8082``,
``MSH_STORE_URL=postgresql+psycopg://msh@db/msh``, ``MSH_SENDING_FIRST_RESEND_TIMEOUT=PT2S``. Booleans are
true/false/yes/no/1/0; lists (``agreements.paths``, ``tls.trusted``) are separated by ``os.pathsep``;
durations are xs:durations (``PT2S``, ``P1D``) or numbers of seconds. ``MSH_CONFIG`` names the file; any
other ``MSH_`` variable must name a setting (a typo stops start-up rather than being ignored).

Relative paths are read from the folder of the settings file (from the current folder for settings given
only by environment). Every problem found is reported at once, each naming the setting, where its value
came from and what to write instead: a bad setting stops start-up, never half of it.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from elementpath.datatypes import Duration

from cpa.precedence import Reading
from msh.ebms.message import ParseMode
from msh.errors import ConfigurationError

__all__ = [
    "AgreementSettings",
    "IdentitySettings",
    "ReceivingSettings",
    "SendingSettings",
    "ServerSettings",
    "Settings",
    "StoreSettings",
    "TimerSettings",
    "TlsSettings",
    "describe",
    "load_settings",
    "settings_from_mapping",
]


@dataclass(frozen=True, slots=True)
class IdentitySettings:
    """Who this MSH is: our PartyId (and its type) and the domain of the MessageIds we make."""

    party_id: str
    party_id_type: str | None = None
    message_id_domain: str = "pymsh.local"


@dataclass(frozen=True, slots=True)
class AgreementSettings:
    """The agreements to load (files, or folders of ``*.xml``) and how received headers are judged."""

    paths: tuple[Path, ...]
    reading: Reading = Reading.STRICT
    time_accuracy: timedelta = timedelta(0)
    verify_signatures: bool = True


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Where the state is: an SQLite file path, ``sqlite:///…``, ``postgresql+psycopg://…`` or ``memory:``."""

    url: str


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The inbound endpoint (``port`` 0: any free port)."""

    host: str = "127.0.0.1"
    port: int = 8081
    path: str = "/msh"
    tls: bool = True
    max_body_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Our certificate and key (server and client side), extra trust anchors, mutual TLS on the server."""

    certificate: Path | None = None
    private_key: Path | None = None
    trusted: tuple[Path, ...] = ()
    require_client_certificate: bool = True


@dataclass(frozen=True, slots=True)
class SendingSettings:
    """How messages go out: the wait before the first resend (None: the agreement's RetryInterval), HTTP
    timeouts, transmissions at once, and the defaults for perMessage agreements."""

    first_resend_timeout: timedelta | None = None
    http_timeout: timedelta = timedelta(seconds=30)
    connect_timeout: timedelta = timedelta(seconds=10)
    max_in_flight: int = 32
    ack_requested: bool = True
    duplicate_elimination: bool = True


@dataclass(frozen=True, slots=True)
class ReceivingSettings:
    """How received messages are parsed: ``lenient`` accepts (and reports) the quirks real partners send."""

    parse_mode: ParseMode = ParseMode.LENIENT


@dataclass(frozen=True, slots=True)
class TimerSettings:
    """The timer loop: how often it looks for work other processes wrote, and its claim lease."""

    poll_interval: timedelta = timedelta(seconds=1)
    lease: timedelta = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class Settings:
    """All settings of one MSH; ``source`` says where they came from (for messages)."""

    identity: IdentitySettings
    agreements: AgreementSettings
    store: StoreSettings
    server: ServerSettings = field(default_factory=ServerSettings)
    tls: TlsSettings = field(default_factory=TlsSettings)
    sending: SendingSettings = field(default_factory=SendingSettings)
    receiving: ReceivingSettings = field(default_factory=ReceivingSettings)
    timers: TimerSettings = field(default_factory=TimerSettings)
    source: str = "<defaults>"


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
_REQUIRED: Final = {("identity", "party_id"), ("agreements", "paths"), ("store", "url")}
_PATHS: Final = {("agreements", "paths"), ("tls", "certificate"), ("tls", "private_key"), ("tls", "trusted")}


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, name: str, origin: str, text: str) -> None:
        self.items.append(f"{name} (from {origin}): {text}")


def _fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _kind(section: str, key: str) -> str:
    annotation = str(_fields(_SECTIONS[section])[key].type)
    for token in ("timedelta", "tuple[Path", "Path", "bool", "int", "Reading", "ParseMode"):
        if token in annotation:
            return token
    return "str"


def _duration(value: object) -> timedelta:
    if isinstance(value, bool):
        raise ValueError("a duration like PT2S or a number of seconds")
    if isinstance(value, (int, float)):
        seconds = Decimal(str(value))
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = Decimal(text)
        except ArithmeticError:
            try:
                parsed = Duration.fromstring(text)
            except ValueError:
                raise ValueError(f"{value!r} is not a duration; write it like PT2S, PT0.5S or P1D") from None
            if parsed.months:
                raise ValueError(f"{value!r} counts months or years, which have no fixed length; use days") from None
            seconds = parsed.seconds
    else:
        raise ValueError("a duration like PT2S or a number of seconds")
    if seconds < 0:
        raise ValueError(f"{value!r} is negative; give a positive duration")
    return timedelta(seconds=float(seconds))


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"{value!r} is not a boolean; write true or false")


def _integer(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise ValueError(f"{value!r} is not an integer")


def _path(value: object, base: Path) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a file path (text)")
    path = Path(os.path.expanduser(value.strip()))
    return path if path.is_absolute() else base / path


def _convert(section: str, key: str, value: object, base: Path, from_env: bool) -> object:
    kind = _kind(section, key)
    if kind == "timedelta":
        if from_env and isinstance(value, str) and value.strip().lower() in ("", "none"):
            return None
        return _duration(value)
    if kind == "bool":
        return _boolean(value)
    if kind == "int":
        return _integer(value)
    if kind == "tuple[Path":
        items = [v for v in value.split(os.pathsep) if v] if from_env and isinstance(value, str) else value
        if isinstance(items, str) or not isinstance(items, list):
            raise ValueError('a list of file paths, e.g. ["a.xml", "agreements/"]')
        return tuple(_path(v, base) for v in items)
    if kind == "Path":
        return _path(value, base)
    if kind == "Reading":
        try:
            return Reading(str(value))
        except ValueError:
            raise ValueError(f"{value!r} is not one of {', '.join(r.value for r in Reading)}") from None
    if kind == "ParseMode":
        try:
            return ParseMode(str(value))
        except ValueError:
            raise ValueError(f"{value!r} is not one of {', '.join(m.value for m in ParseMode)}") from None
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not text")
    return value


def _store_url(url: str, base: Path) -> str:
    """A relative SQLite file path made absolute against ``base`` (other URLs unchanged)."""
    stripped = url.strip()
    if stripped.lower() in ("memory:", "memory://") or ("://" in stripped and not stripped.startswith("sqlite:///")):
        return stripped
    if stripped.startswith("sqlite:///"):
        rest = stripped[len("sqlite:///") :]
        return stripped if rest.startswith("/") else "sqlite:///" + str(base / rest)
    path = Path(os.path.expanduser(stripped))
    return str(path if path.is_absolute() else base / path)


def settings_from_mapping(
    data: Mapping[str, Any], *, base_dir: Path, source: str, env: Mapping[str, str] | None = None
) -> Settings:
    """Settings from an already parsed TOML mapping, with ``env`` overrides (see the module docs)."""
    env = os.environ if env is None else env
    problems = _Problems()
    values: dict[str, dict[str, tuple[object, str]]] = {name: {} for name in _SECTIONS}
    for section, table in data.items():
        if section not in _SECTIONS:
            problems.add(section, source, f"unknown section; the sections are {', '.join(_SECTIONS)}")
            continue
        if not isinstance(table, Mapping):
            problems.add(section, source, f"must be a table: write [{section}] and its keys under it")
            continue
        known = _fields(_SECTIONS[section])
        for key, value in table.items():
            if key not in known:
                problems.add(f"{section}.{key}", source, f"unknown setting; [{section}] has {', '.join(known)}")
                continue
            values[section][key] = (value, source)
    for name, value in env.items():
        if not name.startswith("MSH_") or name == "MSH_CONFIG":
            continue
        rest = name[4:].lower()
        section, _, key = rest.partition("_")
        if section not in _SECTIONS:
            problems.add(name, "the environment", f"no such setting; the sections are {', '.join(_SECTIONS)}")
            continue
        if key not in _fields(_SECTIONS[section]):
            keys = ", ".join(f"MSH_{section.upper()}_{k.upper()}" for k in _fields(_SECTIONS[section]))
            problems.add(name, "the environment", f"no such setting; [{section}] has {keys}")
            continue
        values[section][key] = (value, f"environment variable {name}")

    sections: dict[str, object] = {}
    for section, cls in _SECTIONS.items():
        kwargs: dict[str, object] = {}
        for key, (raw, origin) in values[section].items():
            from_env = origin.startswith("environment")
            base = Path.cwd() if from_env else base_dir
            try:
                value = _convert(section, key, raw, base, from_env)
            except ValueError as exc:
                problems.add(f"{section}.{key}", origin, str(exc))
                continue
            if section == "store" and key == "url" and isinstance(value, str):
                value = _store_url(value, base)
            kwargs[key] = value
        missing = [k for (s, k) in _REQUIRED if s == section and k not in kwargs]
        for key in missing:
            if not any(f"{section}.{key} " in p for p in problems.items):
                problems.add(
                    f"{section}.{key}",
                    source,
                    f"is required; set it in [{section}] or MSH_{section.upper()}_{key.upper()}",
                )
        if missing:
            continue
        try:
            sections[section] = cls(**kwargs)
        except (TypeError, ValueError) as exc:
            problems.add(section, source, str(exc))
    if len(sections) == len(_SECTIONS):
        settings = Settings(source=source, **sections)  # type: ignore[arg-type]
        _validate(settings, problems)
        if not problems.items:
            return settings
    raise ConfigurationError(
        f"the MSH settings ({source}) have {len(problems.items)} problem(s):\n  " + "\n  ".join(problems.items)
    )


def _validate(s: Settings, problems: _Problems) -> None:
    src = s.source
    if not s.identity.party_id.strip():
        problems.add("identity.party_id", src, "must not be empty")
    domain = s.identity.message_id_domain
    if not domain or any(c in domain for c in "<>@ \t\r\n"):
        problems.add("identity.message_id_domain", src, f"{domain!r} cannot be the right-hand side of a MessageId")
    if not s.agreements.paths:
        problems.add("agreements.paths", src, "names no agreement; list the CPA files (or folders of them)")
    for path in s.agreements.paths:
        if not path.exists():
            problems.add("agreements.paths", src, f"{path} does not exist")
    for name in ("certificate", "private_key"):
        path = getattr(s.tls, name)
        if path is not None and not path.is_file():
            problems.add(f"tls.{name}", src, f"{path} is not a readable file")
    for path in s.tls.trusted:
        if not path.is_file():
            problems.add("tls.trusted", src, f"{path} is not a readable file")
    if s.server.tls and (s.tls.certificate is None or s.tls.private_key is None):
        problems.add("server.tls", src, "HTTPS needs tls.certificate and tls.private_key (or set server.tls = false)")
    if not 0 <= s.server.port <= 65535:
        problems.add("server.port", src, f"{s.server.port} is not a port number 0-65535")
    if not s.server.path.startswith("/"):
        problems.add("server.path", src, f"{s.server.path!r} must start with /")
    if s.server.max_body_bytes < 1024:
        problems.add("server.max_body_bytes", src, "must be at least 1024")
    if s.sending.max_in_flight < 1:
        problems.add("sending.max_in_flight", src, "must be at least 1")
    if s.sending.http_timeout <= timedelta(0):
        problems.add("sending.http_timeout", src, "must be more than 0")
    first = s.sending.first_resend_timeout
    if first is not None and first <= s.sending.http_timeout:
        problems.add(
            "sending.first_resend_timeout",
            src,
            f"{first.total_seconds():g} s is not longer than sending.http_timeout "
            f"({s.sending.http_timeout.total_seconds():g} s): an answer still on its way would count as lost "
            "and the message be resent while in flight; make the HTTP timeout shorter",
        )
    for name in ("poll_interval", "lease"):
        if getattr(s.timers, name) <= timedelta(0):
            problems.add(f"timers.{name}", src, "must be more than 0")


def load_settings(path: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None) -> Settings:
    """Read the TOML file at ``path`` (None: the file named by ``MSH_CONFIG``, or settings from the
    environment only), apply ``MSH_…`` overrides from ``env`` (default ``os.environ``) and validate."""
    env = os.environ if env is None else env
    chosen = path if path is not None else env.get("MSH_CONFIG")
    if chosen is None:
        return settings_from_mapping({}, base_dir=Path.cwd(), source="the environment", env=env)
    file = Path(chosen)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"settings file {file}: cannot read it ({exc.strerror}); check --config") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"settings file {file}: not valid TOML: {exc}") from None
    return settings_from_mapping(data, base_dir=file.resolve().parent, source=str(file), env=env)


def describe(settings: Settings) -> str:
    """The effective settings, one ``section.key = value`` per line (paths only, never key material)."""
    lines = [f"# settings from {settings.source}"]
    for section in _SECTIONS:
        obj = getattr(settings, section)
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, timedelta):
                shown = f"{value.total_seconds():g}s"
            elif isinstance(value, tuple):
                shown = "[" + ", ".join(str(v) for v in value) + "]"
            elif value is None:
                shown = "(not set)"
            else:
                shown = str(value)
            lines.append(f"{section}.{f.name} = {shown}")
    return "\n".join(lines)
