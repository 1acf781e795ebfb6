"""The settings of one MSH, declared once: a frozen dataclass per section, a field per setting.

Each field's type and default are the setting's; its ``metadata=setting(...)`` holds what to write (the
hint of the messages), its check and its line in the README (:mod:`.declaration`). Values are checked at
construction, so a :class:`Settings` made in code is as sound as one loaded from a file.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar, Final

from cpa.precedence import Reading
from msh.engine.routing import Route
from msh.runtime.config import rules
from msh.runtime.config.admin import AdminSettings
from msh.runtime.config.amqp import AmqpSettings
from msh.runtime.config.api import ApiSettings
from msh.runtime.config.cross_rules import cross_problems
from msh.runtime.config.declaration import DURATION_HINT, WHOLE_HINT, Section, SettingsError, declared, setting
from msh.runtime.config.mail import MailboxSettings, SmtpdSettings
from msh.runtime.config.messaging import ReceivingSettings, SendingSettings, TimerSettings
from msh.runtime.config.retention import RetentionSettings
from msh.runtime.config.smtp import SmtpSettings
from msh.runtime.config.values import AGREEMENT_PATHS, NEW_FILE, PEM_FILE, PEM_FILES, STORE_URL

__all__ = [
    "SECTIONS",
    "SETTINGS",
    "AdminSettings",
    "MailboxSettings",
    "AgreementSettings",
    "AmqpSettings",
    "ApiSettings",
    "IdentitySettings",
    "ReceivingSettings",
    "RoutingSettings",
    "SecuritySettings",
    "SendingSettings",
    "ServerSettings",
    "Settings",
    "SmtpSettings",
    "StoreSettings",
    "RetentionSettings",
    "SmtpdSettings",
    "TimerSettings",
    "TlsSettings",
    "values_of",
]


@dataclass(frozen=True, slots=True)
class IdentitySettings(Section):
    """Who this MSH is: our PartyId (ebMS2 §3.1.1.1) and the domain of the MessageIds we make."""

    section: ClassVar[str] = "identity"

    party_id: str = field(
        metadata=setting(
            'write our PartyId as a string, e.g. "123456789"',
            check=rules.party_id_given,
            meaning="our PartyId as in the agreements",
        )
    )
    party_id_type: str | None = field(
        default=None,
        metadata=setting(
            'write the PartyId type as a string, e.g. "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"',
            check=rules.party_id_type_given,
            meaning="the type of our PartyId (without one, the PartyId must be a URI)",
        ),
    )
    message_id_domain: str = field(
        default="pymsh.local",
        metadata=setting(
            'write a domain-like name, e.g. "msh.example.com"',
            check=rules.message_id_domain,
            meaning="right-hand side of the MessageIds we make",
        ),
    )


@dataclass(frozen=True, slots=True)
class AgreementSettings(Section):
    """Where the CPAs are and how they are applied.

    ``paths`` are CPA files or folders (a folder stands for every ``*.xml`` in it, see :meth:`files`); none
    for a pure intermediary, which then needs routes (:class:`RoutingSettings`);
    ``reading`` settles CPA/header disagreements (docs/design.md §4); ``time_accuracy`` is mshTimeAccuracy, the
    clock tolerance for TimeToLive checks; ``verify_signatures`` verifies a CPA's own XML signature.
    """

    section: ClassVar[str] = "agreements"

    paths: tuple[Path, ...] = field(
        default=(),
        metadata=setting(
            'write a list of CPA files or folders, e.g. ["cpas/partner.xml"]',
            kind=AGREEMENT_PATHS,
            meaning="CPA files, or folders of `*.xml` (none: a pure intermediary, which needs `[[routing.routes]]`)",
        ),
    )
    reading: Reading = field(
        default=Reading.STRICT,
        metadata=setting(meaning="CPA/header disagreements: `strict`, `header`, `header-warn`, `cpa-warn` (design §4)"),
    )
    time_accuracy: timedelta = field(
        default=timedelta(0),
        metadata=setting(
            DURATION_HINT.format("PT5S", 5), check=rules.not_negative, meaning="clock tolerance in TimeToLive checks"
        ),
    )
    verify_signatures: bool = field(
        default=True,
        metadata=setting(meaning="verify an agreement's own XML signature"),
    )

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
class StoreSettings(Section):
    """The durable store: an SQLite file path, ``sqlite:///...``, ``postgresql+psycopg://...`` or ``memory:``."""

    section: ClassVar[str] = "store"

    url: str = field(
        metadata=setting(
            'write a file path, sqlite:///path, postgresql+psycopg://user@host/db or "memory:"',
            kind=STORE_URL,
            meaning="SQLite file path, `sqlite:///…`, `postgresql+psycopg://user:password@host/db`, or `memory:`",
        )
    )


@dataclass(frozen=True, slots=True)
class ServerSettings(Section):
    """The inbound HTTP(S) server (``port`` 0: any free port) and the limits it applies at the door.

    A request body over ``max_body_bytes`` gets HTTP 413; a request head (request line and headers) over
    ``max_header_bytes``, or with more than ``max_headers`` header fields, gets 431; a request that stops
    arriving (no byte for ``read_timeout`` while its head or body is incomplete), or has not arrived whole
    ``request_timeout`` (plus its Content-Length at ``min_rate``) after its first byte, gets 408 and its
    connection is closed; a header field that must be single sent twice (Content-Type, Host, SOAPAction,
    Content-Length) gets 400; a client address with ``max_connections_per_client`` connections open gets
    503 on the next one.
    ``pid_file``: where ``msh serve`` writes its process id (:mod:`msh.runtime.pidfile`).
    """

    section: ClassVar[str] = "server"

    host: str = field(
        default="127.0.0.1",
        metadata=setting(
            'write a host name or address, e.g. "127.0.0.1"', check=rules.host, meaning="the endpoint's address"
        ),
    )
    port: int = field(
        default=8081,
        metadata=setting(
            "write a port number 1-65535 (0: any free port)", check=rules.port, meaning="the endpoint's port"
        ),
    )
    path: str = field(
        default="/msh",
        metadata=setting('write a URL path, e.g. "/msh"', check=rules.url_path, meaning="the endpoint's URL path"),
    )
    tls: bool = field(
        default=True,
        metadata=setting(
            "write true (serve HTTPS) or false (plain HTTP)",
            meaning="HTTPS (needs `tls.certificate`, `tls.private_key`)",
        ),
    )
    max_body_bytes: int = field(
        default=2 * 1024 * 1024 * 1024,
        metadata=setting(
            "write a number of bytes, e.g. 2147483648",
            check=rules.at_least_one,
            meaning="larger requests get 413 (the default is 2 GiB: the body is streamed to a temporary file "
            "and to the store, never held whole in memory)",
        ),
    )
    max_header_bytes: int = field(
        default=64 * 1024,
        metadata=setting(
            "write a number of bytes, e.g. 65536",
            check=rules.at_least_one,
            meaning="a larger request head (request line and header fields, counted as it arrives, before "
            "anything holds it) gets 431 (the default is 64 KiB)",
        ),
    )
    max_headers: int = field(
        default=100,
        metadata=setting(WHOLE_HINT.format(100), check=rules.at_least_one, meaning="more header fields get 431"),
    )
    read_timeout: timedelta = field(
        default=timedelta(seconds=30),
        metadata=setting(
            DURATION_HINT.format("PT30S", 30),
            check=rules.positive,
            meaning="a request whose head or body stops arriving this long gets 408 and its connection is closed",
        ),
    )
    request_timeout: timedelta = field(
        default=timedelta(minutes=10),
        metadata=setting(
            DURATION_HINT.format("PT10M", 600),
            check=rules.positive,
            meaning="a request whose head and body have not all arrived this long after its first byte, however "
            "steadily they come, gets 408 and its connection is closed; a body announced by its Content-Length "
            "gets its length divided by `server.min_rate` more",
        ),
    )
    min_rate: int = field(
        default=64 * 1024,
        metadata=setting(
            "write a number of bytes per second, e.g. 65536",
            check=rules.at_least_one,
            meaning="the slowest transfer a request body is allowed: its Content-Length divided by this is added "
            "to `server.request_timeout` (the default, 64 KiB/s, gives a 2 GiB body 9 hours)",
        ),
    )
    max_connections_per_client: int = field(
        default=128,
        metadata=setting(
            WHOLE_HINT.format(128),
            check=rules.at_least_one,
            meaning="connections open at once from one client address; the next gets 503 (raise it behind a "
            "reverse proxy, where every request comes from the proxy's address)",
        ),
    )
    pid_file: Path | None = field(
        default=None,
        metadata=setting(
            'write a file path, e.g. "run/msh.pid"',
            kind=NEW_FILE,
            meaning="`msh serve` writes its process id here while it runs (and the outcome of each agreement "
            "reload beside it); `msh cpa add/remove/reload` find the running server by it (unset: no pid file)",
        ),
    )


@dataclass(frozen=True, slots=True)
class TlsSettings(Section):
    """Our TLS key pair (server certificate and TLS client certificate), extra trust anchors, mutual TLS."""

    section: ClassVar[str] = "tls"

    certificate: Path | None = field(
        default=None,
        metadata=setting(
            'write the path of a PEM certificate, e.g. "keys/me.cert.pem"',
            kind=PEM_FILE,
            meaning="our certificate (PEM), server and client side",
        ),
    )
    private_key: Path | None = field(
        default=None,
        metadata=setting(
            'write the path of a PEM private key, e.g. "keys/me.key.pem"',
            kind=PEM_FILE,
            meaning="the private key of our certificate (PEM)",
        ),
    )
    trusted: tuple[Path, ...] = field(
        default=(),
        metadata=setting(
            'write a list of PEM certificate files, e.g. ["keys/ca.pem"]',
            kind=PEM_FILES,
            meaning="extra trust anchors besides the agreements' certificates",
        ),
    )
    require_client_certificate: bool = field(
        default=True, metadata=setting("write true (mutual TLS) or false", meaning="mutual TLS on the endpoint")
    )


@dataclass(frozen=True, slots=True)
class SecuritySettings(Section):
    """Message security (ebMS2 §4.1): the key pair that signs our messages and signed acknowledgments, and
    the key that decrypts payloads encrypted for us. What is signed or encrypted is the agreement's to say.

    ``signing_key`` and ``signing_certificate`` go together (the certificate file may hold the chain above
    it, leaf first); ``decryption_key`` defaults to the signing key. Keys may be encrypted PEM: their
    passphrase is read from the environment variable named by ``key_passphrase_env`` (never from this
    file, never printed).
    """

    section: ClassVar[str] = "security"

    signing_key: Path | None = field(
        default=None,
        metadata=setting(
            'write the path of a PEM private key, e.g. "keys/me.key.pem"',
            kind=PEM_FILE,
            meaning="the private key that signs our messages and acknowledgments (PEM, may be encrypted)",
            unset="none: an agreement that has us sign is refused when loaded",
        ),
    )
    signing_certificate: Path | None = field(
        default=None,
        metadata=setting(
            'write the path of a PEM certificate, e.g. "keys/me.cert.pem"',
            kind=PEM_FILE,
            meaning="the certificate of the signing key, as the agreement names it (then its chain, leaf first)",
        ),
    )
    decryption_key: Path | None = field(
        default=None,
        metadata=setting(
            'write the path of a PEM private key, e.g. "keys/me.key.pem"',
            kind=PEM_FILE,
            meaning="the private key of our encryption certificate (PEM, may be encrypted)",
            unset="`security.signing_key`",
        ),
    )
    key_passphrase_env: str | None = field(
        default=None,
        metadata=setting(
            'write the name of an environment variable, e.g. "PYMSH_KEY_PASSPHRASE"',
            check=rules.environment_variable_name,
            meaning="the environment variable holding the passphrase of encrypted keys (its value is never shown)",
            unset="keys are unencrypted",
        ),
    )


@dataclass(frozen=True, slots=True)
class RoutingSettings:
    """The routing table (ebMS2 §10, :mod:`msh.engine.routing`): the routes in order, the first matching wins.

    Written in the file as ``[[routing.routes]]`` tables, one per route (:mod:`.routes` declares their
    keys); not one of the ``MSH_<SECTION>_<KEY>`` settings: routes come only from the file.
    """

    section: ClassVar[str] = "routing"

    routes: tuple[Route, ...] = ()

    def __post_init__(self) -> None:
        seen: dict[str, int] = {}
        problems = []
        for position, route in enumerate(self.routes, start=1):
            if route.name in seen:
                problems.append(
                    f"routing.routes[{position}].name: {route.name!r} is already the name of "
                    f"routing.routes[{seen[route.name]}]; give each route its own name"
                )
            seen.setdefault(route.name, position)
        if problems:
            raise SettingsError(type(self).__name__, problems)


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting of one MSH; ``source`` says where they came from (the configuration file).

    ``agreements`` may name no agreement (``AgreementSettings()``) when ``routing`` has routes: a pure
    intermediary.
    """

    identity: IdentitySettings
    agreements: AgreementSettings
    store: StoreSettings
    server: ServerSettings = ServerSettings()
    tls: TlsSettings = TlsSettings()
    security: SecuritySettings = SecuritySettings()
    sending: SendingSettings = SendingSettings()  # noqa: RUF009 (frozen, like the sections above)
    receiving: ReceivingSettings = ReceivingSettings()  # noqa: RUF009 (frozen, like the sections above)
    timers: TimerSettings = TimerSettings()  # noqa: RUF009 (frozen, like the sections above)
    api: ApiSettings = ApiSettings()  # noqa: RUF009 (frozen, like the sections above)
    admin: AdminSettings = AdminSettings()  # noqa: RUF009 (frozen, like the sections above)
    retention: RetentionSettings = RetentionSettings()  # noqa: RUF009 (frozen, like the sections above)
    smtp: SmtpSettings = SmtpSettings()  # noqa: RUF009 (frozen, like the sections above)
    smtpd: SmtpdSettings = SmtpdSettings()  # noqa: RUF009 (frozen, like the sections above)
    mailbox: MailboxSettings = MailboxSettings()  # noqa: RUF009 (frozen, like the sections above)
    amqp: AmqpSettings = AmqpSettings()  # noqa: RUF009 (frozen, like the sections above)
    routing: RoutingSettings = RoutingSettings()
    source: str = "<defaults>"

    def __post_init__(self) -> None:
        problems = cross_problems(values_of(self), lambda key: key, ())
        if problems:
            raise SettingsError(self.source, problems)


def _sections() -> tuple[type[Section], ...]:
    """The sections of flat settings (the routing table, an array of tables, is read apart)."""
    hints = typing.get_type_hints(Settings)
    sections = []
    for f in dataclasses.fields(Settings):
        cls = hints[f.name]
        if f.name == "source":
            continue
        if cls.section != f.name:
            raise TypeError(f"Settings.{f.name} holds {cls.__name__}, whose section is {cls.section!r}")
        if issubclass(cls, Section):
            sections.append(cls)
    return tuple(sections)


SECTIONS: Final = _sections()
"""The section classes, in the order of :class:`Settings`' fields (each field is named by its section)."""

SETTINGS: Final = tuple(d for cls in SECTIONS for d in declared(cls))
"""Every setting, in declaration order (the order of the samples, of messages and of ``--print-settings``)."""


def values_of(settings: Settings) -> dict[str, Any]:
    """``section.key`` -> the value, for every setting of ``settings``, and ``routing.routes``."""
    values = {d.name: getattr(getattr(settings, d.section), d.key) for d in SETTINGS}
    values["routing.routes"] = settings.routing.routes
    return values
