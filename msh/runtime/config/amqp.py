"""The ``[amqp]`` settings: the queuing transport on an AMQP 1.0 broker (docs/transports/amqp.md).

Sending to an ``amqp:``/``amqps:`` endpoint works whenever an agreement names one, with these credentials;
``enabled`` turns on receiving from ``url``, our queue. One broker per MSH: ``username`` and ``password`` log
in to every broker this MSH connects to (ours and, where partners' queues are elsewhere, theirs), so a
deployment whose partners' queues live on other brokers bridges them there (a shovel or federation), or gives
this MSH an account of the same name on each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import ClassVar

from msh.runtime.config import rules
from msh.runtime.config.declaration import DURATION_HINT, WHOLE_HINT, Section, setting
from msh.runtime.config.secrets import SECRET_HINT, check_secret_ref
from msh.runtime.config.values import PEM_FILE, show
from msh.transport.amqp_address import parse_endpoint, shown_url

__all__ = ["AmqpSettings"]

_URL_HINT = 'write an amqp URL without credentials, e.g. "amqp://127.0.0.1:5672/queue/ebms-b" ("": none)'


def _amqp_url(value: str) -> str | None:
    """An ``amqp:``/``amqps:`` URL that names a broker and an address (or "")."""
    if not value:
        return None
    try:
        parse_endpoint(value)
    except ValueError as exc:
        return f"{show(shown_url(value))}: {exc}"  # never the password a URL may carry
    return None


def _mechanisms(value: str) -> str | None:
    """SASL mechanism names separated by spaces (or "")."""
    if value and not all(word.replace("-", "").replace("_", "").isalnum() for word in value.split()):
        return f'{show(value)} is not a list of SASL mechanisms; write names separated by spaces, e.g. "PLAIN"'
    return None


@dataclass(frozen=True, slots=True)
class AmqpSettings(Section):
    """The queuing transport on an AMQP 1.0 broker (see the module docs and docs/transports/amqp.md)."""

    section: ClassVar[str] = "amqp"

    enabled: bool = field(
        default=False,
        metadata=setting(
            meaning="receive ebXML messages from `amqp.url` with `msh serve` (false: no receiving; sending to "
            "`amqp:` endpoints works whenever an agreement names one)"
        ),
    )
    url: str = field(
        default="",
        metadata=setting(
            _URL_HINT,
            check=_amqp_url,
            meaning="our broker and the address we receive from (`amqp://HOST[:PORT]/ADDRESS`, `amqps://` over TLS; "
            "RabbitMQ's `/queue/NAME` forms keep their slash, other paths are plain queue names)",
        ),
    )
    reply_to: str = field(
        default="",
        metadata=setting(
            _URL_HINT,
            check=_amqp_url,
            meaning="the address our partners' answers come back to, sent as each message's reply-to (empty: "
            "`amqp.url`)",
        ),
    )
    username: str = field(
        default="",
        metadata=setting(
            'write the broker user name, e.g. "msh-b" ("": SASL ANONYMOUS)',
            meaning="the user name we log in to the broker with (SASL PLAIN; empty: ANONYMOUS)",
        ),
    )
    password: str = field(
        default="",
        metadata=setting(
            SECRET_HINT.format("AMQP_PASSWORD", "amqp.password"),
            check=check_secret_ref,
            meaning="where the broker password is: `env:VARIABLE` or `file:PATH`, read at start, never shown",
        ),
    )
    sasl_mechanisms: str = field(
        default="",
        metadata=setting(
            'write SASL mechanism names separated by spaces, e.g. "PLAIN" or "EXTERNAL"',
            check=_mechanisms,
            meaning="the SASL mechanisms offered to the broker (empty: PLAIN with a user name, else ANONYMOUS)",
        ),
    )
    trusted: Path | None = field(
        default=None,
        metadata=setting(
            'write the path of a PEM file of CA certificates, e.g. "keys/broker-ca.pem"',
            kind=PEM_FILE,
            meaning="for `amqps:` brokers: the CA certificates their certificate is checked against (unset: the "
            "system's)",
            unset="the system's CAs",
        ),
    )
    credit: int = field(
        default=32,
        metadata=setting(
            WHOLE_HINT.format(32),
            check=rules.at_least_one,
            meaning="how many messages the broker may hand us before we settle one (the prefetch)",
        ),
    )
    timeout: timedelta = field(
        default=timedelta(seconds=30),
        metadata=setting(
            DURATION_HINT.format("PT30S", 30),
            check=rules.positive,
            meaning="how long a message sent may wait for its connection and for the broker to settle it; "
            "longer is a failed transmission that may have arrived",
        ),
    )
    max_message_bytes: int = field(
        default=64 * 1024 * 1024,
        metadata=setting(
            WHOLE_HINT.format(67108864),
            check=rules.at_least_one,
            meaning="the largest ebXML package sent or received as one AMQP message (held whole in memory; keep "
            "it within the broker's own limit, RabbitMQ's `max_message_size`)",
        ),
    )
