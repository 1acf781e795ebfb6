"""The settings of reliable messaging: how this MSH sends (``[sending]``), receives (``[receiving]``) and
runs its timers (``[timers]``); declared like every section (:mod:`.model`, :mod:`.declaration`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

from cpa.reliable_messaging_method import ReliableMessagingMethod
from msh.ebms.message import ParseMode
from msh.runtime.config import rules
from msh.runtime.config.declaration import DURATION_HINT, WHOLE_HINT, Section, setting
from msh.runtime.config.values import TEXTS

__all__ = ["ReceivingSettings", "SendingSettings", "TimerSettings", "reliable_messaging_methods"]


def _method_entry(text: str) -> tuple[str, ReliableMessagingMethod] | str:
    """One ``CHANNEL_ID=METHOD`` entry of ``sending.reliable_messaging_method``, or what is wrong with it."""
    channel, sep, value = text.partition("=")
    methods = {m.value: m for m in ReliableMessagingMethod}
    if not sep or not channel.strip() or value.strip() not in methods:
        return (
            f"{text!r} is not CHANNEL_ID=METHOD with METHOD one of {', '.join(methods)}; write e.g. "
            '"channel-to-broker=Transport" (CHANNEL_ID: the channelId of a DeliveryChannel of yours in an agreement)'
        )
    return channel.strip(), methods[value.strip()]


def _check_methods(values: tuple[str, ...]) -> str | None:
    seen: set[str] = set()
    for value in values:
        parsed = _method_entry(value)
        if isinstance(parsed, str):
            return parsed
        if parsed[0] in seen:
            return f"channel {parsed[0]!r} is named twice; give each channel one method"
        seen.add(parsed[0])
    return None


def reliable_messaging_methods(values: tuple[str, ...]) -> dict[str, ReliableMessagingMethod]:
    """The ``sending.reliable_messaging_method`` setting read: sending channel id -> method (ValueError naming
    the first bad entry)."""
    problem = _check_methods(values)
    if problem is not None:
        raise ValueError(problem)
    return dict(p for p in map(_method_entry, values) if not isinstance(p, str))


@dataclass(frozen=True, slots=True)
class SendingSettings(Section):
    """Outbound transmissions.

    ``first_resend_timeout`` is the wait before the first resend (None: the CPA's RetryInterval) and must
    exceed ``http_timeout``; ``ack_requested`` and ``duplicate_elimination`` are
    the defaults for agreements that leave them ``perMessage``. ``status_before_resend`` (None: off) asks
    the partner for a message's status (ebMS2 §7) before resending it once the partner has been
    unreachable at least that long (:mod:`msh.runtime.services`); off by default, since ebMS2 §7 says an
    MSH "SHOULD NOT use the Message Status Request Service to implement Reliable Messaging".
    ``reliable_messaging_method`` names the sending channels whose reliability a queuing transport provides
    (``CHANNEL_ID=Transport``; the *Reliable Messaging* draft's ReliableMessagingMethod, which neither the CPA
    nor the header carries); every other channel uses ``ebXML``. :mod:`msh.runtime.agreements` checks the
    channels against the agreements loaded.

    Timeouts follow the transfer: a connection opens within ``connect_timeout``; a body over 1 MiB is
    streamed from the store and must keep moving (some of it every ``progress_timeout``, and at least
    ``min_rate`` bytes/s on average once ``progress_timeout`` has passed); once it is out, the answer must
    come within ``http_timeout``. A smaller body keeps ``http_timeout`` for the whole exchange.
    """

    section: ClassVar[str] = "sending"

    first_resend_timeout: timedelta | None = field(
        default=None,
        metadata=setting(
            DURATION_HINT.format("PT3S", 3),
            check=rules.positive,
            meaning="wait before the first resend",
            unset="the agreement's RetryInterval",
        ),
    )
    http_timeout: timedelta = field(
        default=timedelta(seconds=30),
        metadata=setting(
            DURATION_HINT.format("PT30S", 30),
            check=rules.positive,
            meaning="the wait for the answer once a body over 1 MiB is sent; for a smaller body, the whole HTTP "
            "exchange (must be shorter than the first-resend timeout)",
        ),
    )
    progress_timeout: timedelta = field(
        default=timedelta(seconds=30),
        metadata=setting(
            DURATION_HINT.format("PT30S", 30),
            check=rules.positive,
            meaning="a body over 1 MiB being sent is given up when none of it moved for this long",
        ),
    )
    min_rate: int = field(
        default=64 * 1024,
        metadata=setting(
            "write a number of bytes per second, e.g. 65536",
            check=rules.at_least_one,
            meaning="a body over 1 MiB being sent is given up when, after the first progress_timeout, it moved "
            "slower than this many bytes/s on average (the default is 64 KiB/s)",
        ),
    )
    connect_timeout: timedelta = field(
        default=timedelta(seconds=10),
        metadata=setting(DURATION_HINT.format("PT10S", 10), check=rules.positive, meaning="opening a connection"),
    )
    max_in_flight: int = field(
        default=32, metadata=setting(WHOLE_HINT.format(32), check=rules.at_least_one, meaning="transmissions at once")
    )
    ack_requested: bool = field(
        default=True,
        metadata=setting(meaning="AckRequested where the agreement says perMessage"),
    )
    duplicate_elimination: bool = field(
        default=True,
        metadata=setting(meaning="DuplicateElimination where the agreement says perMessage"),
    )
    status_before_resend: timedelta | None = field(
        default=None,
        metadata=setting(
            DURATION_HINT.format("PT5M", 300),
            check=rules.positive,
            meaning=(
                "after the partner was unreachable this long, ask it for a message's status (a StatusRequest, "
                "ebMS2 §7) before resending the message, and resend only if it does not have it: a body "
                'is not sent twice after an outage. Off by default: ebMS2 §7 says an MSH "SHOULD NOT use the '
                'Message Status Request Service to implement Reliable Messaging"; the acknowledgment still '
                "delivers, and the question stands in for one resend (same retry budget)"
            ),
            unset="off",
        ),
    )

    reliable_messaging_method: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            'write a list like ["channel-to-broker=Transport"]',
            kind=TEXTS,
            check=_check_methods,
            meaning=(
                "`CHANNEL_ID=Transport`: messages sent on that DeliveryChannel of yours (its channelId in the "
                "agreement) are made reliable by the queuing transport its partner's endpoint names (amqp: or "
                "amqps:): nothing the broker accepted is resent, a hand-off it refused is retried every "
                "RetryInterval until the message's deadline. A channel not named uses ebXML (acknowledgments and "
                "resends, ebMS2 §6)"
            ),
        ),
    )


@dataclass(frozen=True, slots=True)
class ReceivingSettings(Section):
    """Inbound messages: how forgiving the parser is (``lenient`` accepts and reports real-world quirks).

    ``accept_unterminated_packages`` (lenient mode only) accepts a MIME package that ends without its
    closing delimiter, whose last payload may be cut short: off by default, for a partner known to send
    such packages. ``max_held_messages`` bounds the messages of one conversation held for their turn
    (MessageOrder, ebMS2 §9.1.1: "the implementation defined limit for saved out-of-sequence messages"), and
    ``order_gap_grace`` how long past the sender's retries a missing one is still waited for (a sender under
    load retries late; abandoning held messages too early is worse than telling the sender late)."""

    section: ClassVar[str] = "receiving"

    parse_mode: ParseMode = field(
        default=ParseMode.LENIENT,
        metadata=setting(meaning="`strict` refuses anything not by the book; `lenient` accepts and reports quirks"),
    )
    accept_unterminated_packages: bool = field(
        default=False,
        metadata=setting(
            meaning="lenient mode only: accept a MIME package without its closing delimiter (its last payload may "
            "be cut short; refused with MimeProblem otherwise)",
        ),
    )
    max_held_messages: int = field(
        default=1000,
        metadata=setting(
            "write a number of messages, e.g. 1000",
            check=rules.at_least_one,
            meaning="MessageOrder: the most messages kept waiting for a lower SequenceNumber in one conversation; "
            "the next is refused with DeliveryFailure and the sequence broken (ebMS2 §9.1.1)",
        ),
    )
    order_gap_grace: timedelta = field(
        default=timedelta(minutes=1),
        metadata=setting(
            DURATION_HINT.format("PT1M", 60),
            check=rules.not_negative,
            meaning="MessageOrder: how much longer than the sender's retries take ((Retries + 1) x RetryInterval) "
            "held messages wait for a missing one before they are abandoned with a DeliveryFailure",
        ),
    )


@dataclass(frozen=True, slots=True)
class TimerSettings(Section):
    """The timer loop: how often it looks for due work written by other processes, and its claims.

    A timer is claimed with a ``lease`` (so two processes on one database never fire it both); while this
    process works on it, a heartbeat renews the lease every ``renew_interval`` (which must be shorter), so a
    short lease costs nothing to a live process and a dead one's timers are taken over within a lease. A
    round claims at most ``claim_limit`` timers, fewer when the free transmission slots
    (``sending.max_in_flight``) are fewer, so a busy process leaves due work to the others (docs/cluster.md).
    """

    section: ClassVar[str] = "timers"

    poll_interval: timedelta = field(
        default=timedelta(seconds=1),
        metadata=setting(
            DURATION_HINT.format("PT1S", 1),
            check=rules.positive,
            meaning="how often to look for work other processes queued",
        ),
    )
    lease: timedelta = field(
        default=timedelta(seconds=10),
        metadata=setting(
            DURATION_HINT.format("PT10S", 10),
            check=rules.positive,
            meaning="after this without a renewal, the timers a dead process had claimed are taken over (longer "
            "than renew_interval)",
        ),
    )
    renew_interval: timedelta = field(
        default=timedelta(seconds=3),
        metadata=setting(
            DURATION_HINT.format("PT3S", 3),
            check=rules.positive,
            meaning="how often a process renews the leases of the timers it is still working on (shorter than lease)",
        ),
    )
    claim_limit: int = field(
        default=8,
        metadata=setting(
            WHOLE_HINT.format(8),
            check=rules.at_least_one,
            meaning="the most due timers claimed at once (fewer when fewer transmission slots are free)",
        ),
    )
