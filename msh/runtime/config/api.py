"""The ``[api]`` settings: the application interfaces served beside the endpoint (:mod:`msh.api`).

The values that are lists of small records are written as strings and read here:

``applications``
    ``"NAME=env:VARIABLE"`` or ``"NAME=file:PATH"``: the application NAME authenticates with the bearer
    token held by that environment variable or file (read when the MSH starts; never printed). With
    ``client_ca`` set, an application may instead present a client certificate whose subject CN is NAME.
``priorities``
    ``"CPAID;SERVICE;ACTION=N"`` (``*`` for any): received messages that match are offered first, higher
    N first (the first rule that matches counts; others have 0).
``webhooks``
    ``"NAME=URL"``: POSTed to (at least once, HMAC-SHA256 signed with NAME's token, retried with
    backoff) when a message arrives or a message NAME sent reaches a final state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import ClassVar, Final

from msh.runtime.config import rules
from msh.runtime.config.declaration import DURATION_HINT, Section, setting
from msh.runtime.config.values import PEM_FILES, TEXTS

__all__ = [
    "CREDENTIALS_HINT",
    "ApiSettings",
    "Credential",
    "Priority",
    "Webhook",
    "check_credentials",
    "credentials",
    "priorities",
    "webhooks",
]

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class Credential:
    """Where application ``name``'s bearer token is: environment variable or file (``source`` ``env``/``file``)."""

    name: str
    source: str
    where: str


@dataclass(frozen=True, slots=True)
class Priority:
    """A priority rule (None: any value)."""

    cpaid: str | None
    service: str | None
    action: str | None
    priority: int


@dataclass(frozen=True, slots=True)
class Webhook:
    """Application ``name``'s webhook URL."""

    name: str
    url: str


def _credential(text: str) -> Credential | str:
    name, sep, rest = text.partition("=")
    source, colon, where = rest.partition(":")
    if not sep or not _NAME.fullmatch(name.strip()) or source.strip() not in ("env", "file") or not colon:
        return (
            f'{text!r} is not NAME=env:VARIABLE or NAME=file:PATH; write e.g. "billing=env:BILLING_TOKEN" '
            "(NAME: letters, digits, '.', '_', '-')"
        )
    if not where.strip():
        return f"{text!r} names no variable or file after {source.strip()}:"
    return Credential(name.strip(), source.strip(), where.strip())


def credentials(values: tuple[str, ...]) -> tuple[Credential, ...]:
    """The ``applications`` setting read (ValueError naming the first bad item)."""
    out = []
    for value in values:
        parsed = _credential(value)
        if isinstance(parsed, str):
            raise ValueError(parsed)
        out.append(parsed)
    return tuple(out)


def _priority(text: str) -> Priority | str:
    match, sep, number = text.rpartition("=")
    parts = match.split(";")
    if not sep or len(parts) != 3 or not re.fullmatch(r"[+-]?[0-9]{1,9}", number.strip()):
        return f'{text!r} is not CPAID;SERVICE;ACTION=N; write e.g. "cpa-1;urn:services:Orders;*=10" (* for any)'
    cpaid, service, action = (None if p.strip() in ("", "*") else p.strip() for p in parts)
    return Priority(cpaid, service, action, int(number))


def priorities(values: tuple[str, ...]) -> tuple[Priority, ...]:
    """The ``priorities`` setting read (ValueError naming the first bad item)."""
    out = []
    for value in values:
        parsed = _priority(value)
        if isinstance(parsed, str):
            raise ValueError(parsed)
        out.append(parsed)
    return tuple(out)


def _webhook(text: str) -> Webhook | str:
    name, sep, url = text.partition("=")
    if not sep or not _NAME.fullmatch(name.strip()) or rules.http_url(url.strip()) is not None:
        return f'{text!r} is not NAME=URL; write e.g. "billing=https://billing.example.com/msh-events"'
    return Webhook(name.strip(), url.strip())


def webhooks(values: tuple[str, ...]) -> tuple[Webhook, ...]:
    """The ``webhooks`` setting read (ValueError naming the first bad item)."""
    out = []
    for value in values:
        parsed = _webhook(value)
        if isinstance(parsed, str):
            raise ValueError(parsed)
        out.append(parsed)
    return tuple(out)


def _each(check: object) -> object:
    def run(values: tuple[str, ...]) -> str | None:
        for value in values:
            problem = check(value)  # type: ignore[operator]
            if isinstance(problem, str):
                return problem
        return None

    return run


check_credentials = _each(_credential)
"""The check of a list of ``NAME=env:VARIABLE`` / ``NAME=file:PATH`` credentials (``api.applications``,
``admin.operators``)."""

CREDENTIALS_HINT: Final = 'write a list like ["{0}=env:{1}_TOKEN", "{2}=file:secrets/{2}.token"]'
"""The hint of a credentials setting: ``.format(name, VARIABLE STEM, other name)``."""


@dataclass(frozen=True, slots=True)
class ApiSettings(Section):
    """The application interfaces (REST, pull batches, SOAP, webhooks), served by ``msh serve`` on their own
    port when ``enabled``; see :mod:`msh.api` and the README's "Application interfaces"."""

    section: ClassVar[str] = "api"

    enabled: bool = field(default=False, metadata=setting(meaning="serve the application interfaces"))
    host: str = field(
        default="127.0.0.1",
        metadata=setting('write a host name or address, e.g. "127.0.0.1"', check=rules.host, meaning="their address"),
    )
    port: int = field(
        default=8090,
        metadata=setting("write a port number 1-65535 (0: any free port)", check=rules.port, meaning="their port"),
    )
    path: str = field(
        default="/api",
        metadata=setting('write a URL path, e.g. "/api"', check=rules.url_path, meaning="the URL path they start with"),
    )
    applications: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            CREDENTIALS_HINT.format("billing", "BILLING", "orders"),
            kind=TEXTS,
            check=check_credentials,  # type: ignore[arg-type]
            meaning="the applications and where each one's bearer token is (`NAME=env:VARIABLE`, `NAME=file:PATH`)",
        ),
    )
    tls: bool = field(
        default=False,
        metadata=setting(meaning="HTTPS with `tls.certificate` and `tls.private_key`"),
    )
    client_ca: tuple[Path, ...] = field(
        default=(),
        metadata=setting(
            'write a list of PEM certificate files, e.g. ["keys/apps-ca.pem"]',
            kind=PEM_FILES,
            meaning="with `api.tls`: ask for client certificates issued by these; a certificate whose subject CN "
            "names an application authenticates it",
        ),
    )
    window: timedelta = field(
        default=timedelta(days=30),
        metadata=setting(
            DURATION_HINT.format("P30D", 2592000),
            check=rules.positive,
            meaning="exactly-once requests are remembered this long; an older MsgCreate is refused",
        ),
    )
    clock_skew: timedelta = field(
        default=timedelta(minutes=5),
        metadata=setting(
            DURATION_HINT.format("PT5M", 300),
            check=rules.not_negative,
            meaning="a MsgCreate this far in the future is still accepted",
        ),
    )
    lease: timedelta = field(
        default=timedelta(minutes=5),
        metadata=setting(
            DURATION_HINT.format("PT5M", 300),
            check=rules.positive,
            meaning="a message taken and not settled within this returns to the inbox",
        ),
    )
    inbox_ttl: timedelta | None = field(
        default=None,
        metadata=setting(
            DURATION_HINT.format("P1D", 86400),
            check=rules.positive,
            meaning="a message not taken within this is reported (`GET /inbox/overdue`, logged once)",
            unset="never reported",
        ),
    )
    max_wait: timedelta = field(
        default=timedelta(seconds=60),
        metadata=setting(
            DURATION_HINT.format("PT60S", 60), check=rules.positive, meaning="the longest long-poll (`wait=`)"
        ),
    )
    max_batch: int = field(
        default=100,
        metadata=setting(
            "write a whole number of at least 1, e.g. 100",
            check=rules.at_least_one,
            meaning="messages in one fetched batch at most",
        ),
    )
    priorities: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            'write a list like ["cpa-1;urn:services:Orders;*=10"]',
            kind=TEXTS,
            check=_each(_priority),  # type: ignore[arg-type]
            meaning="received messages offered first: `CPAID;SERVICE;ACTION=N` (`*`: any), higher N first",
        ),
    )
    webhooks: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            'write a list like ["billing=https://billing.example.com/msh-events"]',
            kind=TEXTS,
            check=_each(_webhook),  # type: ignore[arg-type]
            meaning="`NAME=URL`: called (HMAC-signed with NAME's token, retried) when a message arrives or "
            "one NAME sent is final",
        ),
    )
