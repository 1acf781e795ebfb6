"""How one outbound message is sent reliably (ebMS2 §6.4, §6.5): the agreement's parameters and the
header's TimeToLive, as the sending state machine (:mod:`msh.engine.sending`) and its retry arithmetic
(:mod:`msh.engine.timers`) both read them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from cpa.duration import XsDuration
from cpa.reliable_messaging_method import ReliableMessagingMethod
from cpa.resolve import SendingParameters
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH
from msh.engine.routing import Route

__all__ = ["DEFAULT_ACK_WAIT", "Reliability", "ReliableMessagingMethod", "effective_actor"]

DEFAULT_ACK_WAIT: Final = XsDuration.from_timedelta(timedelta(minutes=10))
"""How long to wait for an acknowledgment when the agreement asks for one but has no ReliableMessaging
(so no RetryInterval): one transmission, then this wait, then a DeliveryFailure."""


def effective_actor(actor: str | None) -> str:
    # ebMS2 §6.3.1.1: an absent actor means the To Party MSH.
    return actor or ACTOR_TO_PARTY_MSH


@dataclass(frozen=True, slots=True)
class Reliability:
    """How one outbound message is sent reliably: the agreement's parameters plus the header's TimeToLive.

    ``retries`` resends at most; the first after ``first_resend_timeout``, later ones every
    ``retry_interval``; none once ``persist_duration`` has passed since the first transmission or at
    ``time_to_live``. The durations are xs:durations, months included (:mod:`msh.engine.timers` adds them
    to the instant they start from), and never negative. ``ack_requested`` says whether the message
    carries AckRequested, aimed at ``ack_actor``; None accepts an acknowledgment of either actor (on a
    single hop the To Party MSH is also the next MSH, ebMS2 §6.3.1.1), so a state stored without it still
    behaves. ``hop_ack`` says the message also carries an AckRequested aimed at the next MSH (ebMS2
    §10.1.3: two AckRequested elements, the other aimed at the To Party MSH): the next MSH's acknowledgment
    then makes it ``forwarded`` and the To Party MSH's delivers the message. ``end_to_end`` False: the
    sending machine's promise ends at the next MSH (a message this MSH forwards as an intermediary, or a
    signal of its own sent hop by hop, ebMS2 §10.1): the next MSH's acknowledgment delivers it. The store
    keeps it as the row's kind, not as a parameter of its own. ``method``: who makes the message reliable
    (the *Reliable Messaging* draft's ReliableMessagingMethod): ``ebXML``, the protocol of ebMS2 §6 with its
    resends; ``Transport``, a queuing transport: the MSH retries only the hand-off the transport refused
    and never resends what it accepted (:mod:`msh.engine.sending`), and ``retries`` does not apply.
    """

    retries: int
    retry_interval: XsDuration
    first_resend_timeout: XsDuration
    persist_duration: XsDuration | None
    time_to_live: datetime | None
    ack_requested: bool
    ack_actor: str | None = None
    hop_ack: bool = False
    end_to_end: bool = True
    method: ReliableMessagingMethod = ReliableMessagingMethod.EBXML

    @property
    def by_transport(self) -> bool:
        """The queuing transport makes the message reliable (ReliableMessagingMethod ``Transport``)."""
        return self.method is ReliableMessagingMethod.TRANSPORT

    def __post_init__(self) -> None:
        if self.hop_ack and (not self.ack_requested or effective_actor(self.ack_actor) != ACTOR_TO_PARTY_MSH):
            raise ValueError(
                "hop_ack (an AckRequested aimed at the next MSH as well) goes with an acknowledgment requested "
                f"of the To Party MSH; got ack_requested={self.ack_requested}, ack_actor={self.ack_actor!r}"
            )
        if not isinstance(self.method, ReliableMessagingMethod):
            raise TypeError(f"method must be a ReliableMessagingMethod, got {self.method!r}")
        if self.by_transport and not self.end_to_end:
            raise ValueError(
                "ReliableMessagingMethod Transport is for the application's own messages; a forward or a signal "
                "sent hop by hop (end_to_end False) is made reliable by the ebXML protocol (ebMS2 §10.1)"
            )
        if self.retries < 0:
            raise ValueError(f"retries must be 0 or more, got {self.retries}")
        for name in ("retry_interval", "first_resend_timeout", "persist_duration"):
            value = getattr(self, name)
            if value is None and name == "persist_duration":
                continue
            if not isinstance(value, XsDuration):
                raise TypeError(f"{name} must be an XsDuration, got {value!r}")
            if value.is_negative:
                raise ValueError(f"{name} must not be negative, got {value}")
        if self.time_to_live is not None and self.time_to_live.tzinfo is None:
            raise ValueError(f"time_to_live must be timezone-aware (UTC), got {self.time_to_live!r}")

    @classmethod
    def from_route(cls, route: Route, *, time_to_live: datetime | None, ack_next_msh: bool) -> Reliability:
        """The reliability of one hop along ``route`` (ebMS2 §10.1): the route's retries, RetryInterval (the
        first resend waits one interval too) and PersistDuration, the message's TimeToLive, an acknowledgment
        asked of the next MSH only when ``ack_next_msh``; the promise ends at the next MSH (``end_to_end``
        False)."""
        return cls(
            retries=route.retries,
            retry_interval=route.retry_interval,
            first_resend_timeout=route.retry_interval,
            persist_duration=route.persist_duration,
            time_to_live=time_to_live,
            ack_requested=ack_next_msh,
            ack_actor=ACTOR_NEXT_MSH,
            end_to_end=False,
        )

    @classmethod
    def from_parameters(
        cls,
        params: SendingParameters,
        *,
        ack_requested: bool,
        time_to_live: datetime | None,
        no_retry_wait: XsDuration = DEFAULT_ACK_WAIT,
        hop_ack: bool = False,
    ) -> Reliability:
        """The reliability of a message sent with ``params`` (from :func:`cpa.resolve.resolve`).

        ``ack_requested`` and ``time_to_live`` are the header's (after :mod:`cpa.precedence`). Without
        ReliableMessaging in the agreement there is no resend: ``retries`` is 0 and an acknowledgment, if
        requested, is awaited ``no_retry_wait``. ``hop_ack``: the message also asks the next MSH for an
        acknowledgment (see the class docs). The method is the sending channel's
        (:attr:`~cpa.resolve.SendingParameters.reliable_messaging_method`).
        """
        rm, actor = params.reliable_messaging, effective_actor(params.messaging.actor)
        persist, method = params.doc_exchange.persist_duration, params.reliable_messaging_method
        if rm is None:
            return cls(
                0, no_retry_wait, no_retry_wait, persist, time_to_live, ack_requested, actor, hop_ack, method=method
            )
        # The wait before the first resend is decided once, by cpa.resolve: the RetryInterval, or the MSH's
        # sending.first_resend_timeout for the channel; never sooner than the RetryInterval (ebMS2 §6.4.4).
        return cls(
            retries=rm.retries,
            retry_interval=rm.retry_interval,
            first_resend_timeout=rm.first_resend_timeout,
            persist_duration=persist,
            time_to_live=time_to_live,
            ack_requested=ack_requested,
            ack_actor=actor,
            hop_ack=hop_ack,
            method=method,
        )
