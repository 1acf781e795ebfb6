"""What an MSH does with a message addressed to another party: store and forward it (ebMS2 §10), sans-IO.

:func:`forward` decides for a received message whose To party is not this MSH's own party, the way
:func:`~msh.engine.receiving.receive` decides for one that is; :func:`hop_answer` reads what came back on
the connection of one of our forwards; :func:`delivery_failure` builds the DeliveryFailure an intermediary
sends the From party when it gives up (§6.5.7). A forward is a sending machine of its own
(:mod:`msh.engine.sending`) with the route's retry settings; the runtime stores the message as it came,
rewrites only the elements aimed at the next MSH (:func:`msh.ebms.hop.forward_message`) and sends it.

Decisions where the specifications leave room (ebMS2 §10.1: "the values of Retry and RetryInterval
between Intermediate MSHs remains implementation specific"):

* Which next hop: the first matching row of the routing table (:mod:`msh.engine.routing`); no row is an
  error message back to the sender (DeliveryFailure, Error, at ``//Header/MessageHeader/To/PartyId``), not
  a silent drop. An intermediary needs no agreement: it does not check the message against a CPA (it may
  not hold the parties' agreement); the To party does.
* A loop (the message comes back to an MSH it already passed, as recorded in ``mh:Via``,
  :mod:`msh.ebms.via`; or a message we sent ourselves comes back to be forwarded) is refused the same way,
  naming the path.
* A message whose TimeToLive has passed is refused with TimeToLiveExpired (§3.1.6.4), as the To party
  would.
* SyncReply together with an AckRequested aimed at the next MSH, or two AckRequested for one actor, is
  refused (Inconsistent, §10.1.1). Refusals go back on the connection (the previous hop is waiting; when it
  is an intermediary too, it relays the error to the From party, the error being addressed to it), with
  the intermediary's own party as From.
* The hop acknowledgment (Acknowledgment aimed at nextMSH, From the intermediary's party) goes back on the
  connection once the message is stored (§10.1.3: never before); a resent copy is stored and forwarded
  again and acknowledged again: an intermediary never eliminates duplicates (§10.1).
* What goes to the next hop: the received nextMSH AckRequested and SyncReply are removed (they were aimed
  at this MSH); a new AckRequested aimed at nextMSH is inserted when the message came with one and the
  route's ``hop_ack`` allows (§6.6 rows 1, 3, 5 and 7 keep their hop reliability along the path; rows 2,
  4, 6 and 8 go best effort between intermediaries: sent once, resent only after a transport failure);
  ``mh:Via`` is replaced by the path so far plus this MSH. MSH signals (acknowledgments, errors, Pong,
  StatusResponse) never get an AckRequested (§6.3.1.4) and go best effort, resent until the next hop takes
  them. Nothing else changes (§10.1.5), MessageOrder included (§10.2).
* SyncReply is handled per hop (§4.3: "the intermediary nodes can keep the connection open"; §10: an
  element aimed at the next node that must "continue to appear ... must be reapplied"): the intermediary
  reapplies it for the next hop and keeps the previous hop's connection open
  (:attr:`StoreForward.sync_relay`): the answer that comes back on the connection of the forward's first
  transmission (the To party's synchronous signals) goes back on it, as it came. When none comes in
  time, the previous hop gets an empty answer and its own resends go on; what a later transmission of the
  forward brings back is sent on along the reverse route, if there is one. SyncReply with an AckRequested
  aimed at nextMSH cannot be (§10.1.1): such a message is refused, and an agreement that asks for both is
  refused when it is loaded.
* An Acknowledgment aimed at nextMSH in a message that comes to this MSH is aimed at this MSH (ebMS2
  §10.1.3: "MUST differentiate, based upon the actor, which Acknowledgment is being returned"), whether it
  came on the connection of our forward or later, asynchronously, in a message of its own: it is routed to
  the forward it names (:class:`~msh.engine.inbound.OutboundEvent`, ``relay``: the runtime counts it only
  from the forward's next hop). A message that carries nothing else is consumed, never forwarded; one that
  carries more (an end-to-end acknowledgment for the From party) is forwarded without it (the hop rewrite
  removes the elements aimed at the next MSH, §10.1.5).
* The answer on a forward's connection: an Acknowledgment aimed at nextMSH for the forwarded message ends
  the forward (delivered to the next hop); anything else in it (an end-to-end acknowledgment, an error
  message, a Pong) is addressed to another party and is forwarded in turn. An error message about the
  forwarded message ends the forward without a DeliveryFailure of our own: its sender's error goes to the
  From party instead.
* Giving up (the route's retries, PersistDuration or the message's TimeToLive): a business message that
  asked for any acknowledgment gets a DeliveryFailure sent to its From party along the reverse route, From
  the intermediary, RefToMessageId the message, its CPAId and ConversationId kept, severity Error when the
  next hop never answered and Warning when it did (§6.5.7). For a signal, or a message that asked for no
  acknowledgment, the failure is only journaled (§6.5.7: the From party must then be informed "by other
  means", which is the operator's journal).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from msh.ebms.errorlist import error_message
from msh.ebms.model import Acknowledgment, Envelope, MessageHeader, Party, ReplyAddress
from msh.ebms.namespaces import ACTOR_NEXT_MSH, SERVICE_MSH
from msh.ebms.via import ack_requested_element, read_via, sync_reply_element, via_element
from msh.engine.inbound import (
    Discard,
    EndpointRef,
    InboundAction,
    InboundDecision,
    OutboundEvent,
    Reject,
    ReplySync,
    SendAsync,
    StoreForward,
)
from msh.engine.reliability import Reliability, effective_actor
from msh.engine.replies import ACTION_ACKNOWLEDGMENT, acknowledgment_message, signed_references
from msh.engine.routing import Route, find_route
from msh.engine.sending import AcknowledgmentReceived, ErrorReceived
from msh.errors import ErrorCode, Issue, Severity

__all__ = ["HopAnswer", "StoreForward", "delivery_failure", "forward", "hop_acknowledgment", "hop_answer"]


@dataclass(frozen=True, slots=True)
class HopAnswer:
    """What the answer on a forward's connection means: the forward's sending-machine ``event`` (None: the
    transmission's own outcome decides) and whether the answer carries something for another party, to be
    forwarded in turn (``relay``)."""

    event: AcknowledgmentReceived | ErrorReceived | None
    relay: bool


def _to_sender(header: MessageHeader, own_party: Party) -> ReplyAddress:
    # ebMS2 §4.2.4.2: reversed by error_message: From is this MSH's party, To the message's From party.
    return ReplyAddress(header.from_party, own_party, header.cpa_id, header.conversation_id, header.message_id)


def _refuse(
    header: MessageHeader,
    issue: Issue,
    *,
    own_party: Party,
    new_message_id: str,
    now: datetime,
    sync: bool,
) -> InboundDecision:
    # ebMS2 §4.2.4.2: an error message to the sender; From is this MSH's party (it found the error).
    reply = error_message(
        issue,
        in_reply_to=_to_sender(header, own_party),
        message_id=new_message_id,
        timestamp=now,
    )
    reject = Reject(header.message_id, reply, sync, None if sync else EndpointRef.of(reply))
    return InboundDecision((reject,), (issue,))


def hop_acknowledgment(
    envelope: Envelope, *, own_party: Party, message_id: str, now: datetime, references: tuple[str, ...] = ()
) -> Envelope:
    """The Acknowledgment aimed at nextMSH an intermediary returns for ``envelope`` (ebMS2 §10.1.2,
    §10.1.3): From (of the header and of the Acknowledgment element) is the intermediary's party, To the
    message's From party, CPAId and ConversationId kept, RefToMessageId the message; ``references`` the
    ds:Reference elements of a signed receipt (ebMS2 §6.3.2.5)."""
    ack = acknowledgment_message(envelope, message_id=message_id, now=now, actors=(ACTOR_NEXT_MSH,))
    assert ack.message_header is not None
    header = ack.message_header
    mine = MessageHeader(
        from_party=own_party,
        to_party=header.to_party,
        cpa_id=header.cpa_id,
        conversation_id=header.conversation_id,
        service=header.service,
        action=ACTION_ACKNOWLEDGMENT,
        message_data=header.message_data,
    )
    element = ack.acknowledgments[0]
    return Envelope(
        message_header=mine,
        acknowledgments=(
            Acknowledgment(element.timestamp, element.ref_to_message_id, own_party, references, ACTOR_NEXT_MSH),
        ),
    )


def forward(
    envelope: Envelope,
    *,
    routes: tuple[Route, ...],
    own_party: Party,
    own_id: str,
    now: datetime,
    new_message_id: str,
    own_message: bool = False,
    sync_reply_requested: bool | None = None,
    time_accuracy: timedelta = timedelta(0),
) -> InboundDecision:
    """Decide what to do with ``envelope``, addressed to another party (see the module docs).

    ``routes`` is the routing table, ``own_party`` this MSH's party (From of its replies), ``own_id`` its
    id in ``mh:Via``; ``new_message_id`` is the MessageId of a refusal or of the hop acknowledgment;
    ``own_message``: the MessageId is one this MSH sent itself (a loop);
    ``sync_reply_requested`` False when the transport cannot answer on the connection; ``time_accuracy`` the
    MSH's clock tolerance (mshTimeAccuracy) in the TimeToLive check.
    """
    header = envelope.message_header
    if header is None:
        raise ValueError("forward() decides for a message with a MessageHeader")
    # ebMS2 §10.1.3: an Acknowledgment aimed at the next MSH is this MSH's: for one of its forwards.
    hop_acks = tuple(a for a in envelope.acknowledgments if effective_actor(a.actor) == ACTOR_NEXT_MSH)
    answers: tuple[InboundAction, ...] = tuple(
        OutboundEvent(
            a.ref_to_message_id,
            AcknowledgmentReceived(a.ref_to_message_id, ACTOR_NEXT_MSH),
            header.from_party,
            header.cpa_id,
            relay=True,
        )
        for a in hop_acks
    )
    if hop_acks and _only_hop_acknowledgments(envelope, header):
        return InboundDecision((*answers, Discard("hop acknowledgment for this MSH: taken, not forwarded")))
    decision = _forward(
        envelope,
        header,
        routes=routes,
        own_party=own_party,
        own_id=own_id,
        now=now,
        new_message_id=new_message_id,
        own_message=own_message,
        sync_reply_requested=sync_reply_requested,
        time_accuracy=time_accuracy,
    )
    return replace(decision, actions=(*answers, *decision.actions)) if answers else decision


def _only_hop_acknowledgments(envelope: Envelope, header: MessageHeader) -> bool:
    """Whether the message carries nothing but Acknowledgments aimed at the next MSH (nothing to forward)."""
    return (
        header.service.value == SERVICE_MSH
        and header.action == ACTION_ACKNOWLEDGMENT
        and all(effective_actor(a.actor) == ACTOR_NEXT_MSH for a in envelope.acknowledgments)
        and envelope.error_list is None
        and envelope.status_request is None
        and envelope.status_response is None
        and envelope.manifest is None
    )


def _forward(
    envelope: Envelope,
    header: MessageHeader,
    *,
    routes: tuple[Route, ...],
    own_party: Party,
    own_id: str,
    now: datetime,
    new_message_id: str,
    own_message: bool,
    sync_reply_requested: bool | None,
    time_accuracy: timedelta,
) -> InboundDecision:
    sync = sync_reply_requested is not False

    def refuse(code: ErrorCode, description: str, location: str) -> InboundDecision:
        issue = Issue(code, Severity.ERROR, description, location)
        return _refuse(header, issue, own_party=own_party, new_message_id=new_message_id, now=now, sync=sync)

    path = read_via(envelope)
    if own_id in path or own_message:
        # ebMS2 §10: store-and-forward has an end; a message that comes back here would circle for ever.
        shown = " -> ".join((*path, own_id)) if path else own_id
        return refuse(
            ErrorCode.DELIVERY_FAILURE,
            f"routing loop: message {header.message_id} came back to intermediary {own_id} (path {shown}); "
            "fix the routing tables along the path",
            "//Header/MessageHeader/To/PartyId",
        )
    actors = [effective_actor(a.actor) for a in envelope.ack_requested]
    if envelope.sync_reply is not None and ACTOR_NEXT_MSH in actors:
        # ebMS2 §10.1.1: SyncReply and an AckRequested aimed at the next MSH MUST NOT both be present.
        return refuse(
            ErrorCode.INCONSISTENT,
            "the message has SyncReply and an AckRequested aimed at the next MSH; ebMS2 §10.1.1 forbids the two "
            "together",
            "//Header/AckRequested/@actor",
        )
    if len(actors) != len(set(actors)):
        # ebMS2 §10.1.1: there SHALL NOT be two AckRequested elements targeted at the same MSH.
        return refuse(
            ErrorCode.INCONSISTENT,
            "the message has two AckRequested elements aimed at the same actor (ebMS2 §10.1.1)",
            "//Header/AckRequested",
        )
    ttl = header.message_data.time_to_live
    if ttl is not None and now - time_accuracy > ttl:
        # ebMS2 §3.1.6.4: expired "if the time of the internal clock, adjusted for UTC, of the Receiving MSH is
        # greater than the value of TimeToLive" (less the clock's accuracy, as the To party judges it).
        return refuse(
            ErrorCode.TIME_TO_LIVE_EXPIRED,
            f"TimeToLive {ttl.isoformat()} had passed when intermediary {own_id} received it at {now.isoformat()} "
            f"(clock accuracy {time_accuracy})",
            "//Header/MessageHeader/MessageData/TimeToLive",
        )
    keys = tuple((p.value, p.type) for p in header.to_party.party_ids)
    route = find_route(routes, keys, header.cpa_id, header.service.value, header.action)
    if route is None:
        to = ", ".join(f"{v}" + (f" (type {t})" if t else "") for v, t in keys)
        # ebMS2 §6.5.7: the intermediary cannot deliver it: a DeliveryFailure, Error (never transmitted).
        return refuse(
            ErrorCode.DELIVERY_FAILURE,
            f"intermediary {own_id} has no route to the To party {to} (CPAId {header.cpa_id}, service "
            f"{header.service.value}, action {header.action}); add a route to its routing table",
            "//Header/MessageHeader/To/PartyId",
        )
    signal = header.service.value == SERVICE_MSH
    hop_asked = ACTOR_NEXT_MSH in actors
    # ebMS2 §10.1.1: the intermediary MAY insert one AckRequested aimed at the next MSH; never on a signal
    # (§6.3.1.4).
    ask_next = hop_asked and route.hop_ack and not signal
    # ebMS2 §4.3, §10: SyncReply was aimed at this node and is reapplied for the next: the connection waits.
    reapplied = (sync_reply_element(),) if envelope.sync_reply is not None else ()
    insert = ((ack_requested_element(),) if ask_next else ()) + reapplied + (via_element((*path, own_id)),)
    reliability = Reliability.from_route(route, time_to_live=ttl, ack_next_msh=ask_next)
    relay = envelope.sync_reply is not None and sync
    store = StoreForward(header.message_id, route, reliability, insert, signal, now, sync_relay=relay)
    if not hop_asked:
        return InboundDecision((store,))
    # ebMS2 §6.3.1.2: a signed acknowledgment asked of the next MSH is a signed receipt of the hop, with the
    # message's own ds:References (§6.3.2.5; derived by the signing adapter when the message is unsigned).
    signed = any(a.signed for a in envelope.ack_requested if effective_actor(a.actor) == ACTOR_NEXT_MSH)
    references = signed_references(envelope) if signed else ()
    # ebMS2 §10.1.3: acknowledge to the previous hop once stored (the runtime commits before it answers).
    ack = hop_acknowledgment(envelope, own_party=own_party, message_id=new_message_id, now=now, references=references)
    reply = ReplySync(ack) if sync else SendAsync(ack, EndpointRef.of(ack))
    signed_actors = frozenset({ACTOR_NEXT_MSH}) if signed else frozenset()
    return InboundDecision((store, reply), signed_actors=signed_actors, derive_references=signed and not references)


def _relayable(envelope: Envelope) -> bool:
    """Whether an answer carries something besides hop acknowledgments (for another party)."""
    header = envelope.message_header
    if header is None:
        return False
    if header.service.value != SERVICE_MSH or envelope.error_list is not None:
        return True
    if any(effective_actor(a.actor) != ACTOR_NEXT_MSH for a in envelope.acknowledgments):
        return True
    return envelope.status_response is not None or header.action not in (ACTION_ACKNOWLEDGMENT,)


def hop_answer(envelope: Envelope, forwarded_id: str) -> HopAnswer:
    """What the ebXML message that came back on the connection of our forward of ``forwarded_id`` means
    (see the module docs)."""
    relay = _relayable(envelope)
    for ack in envelope.acknowledgments:
        if ack.ref_to_message_id == forwarded_id and effective_actor(ack.actor) == ACTOR_NEXT_MSH:
            # ebMS2 §10.1.3: the next MSH has stored it: this hop is done.
            return HopAnswer(AcknowledgmentReceived(forwarded_id, ACTOR_NEXT_MSH), relay)
    header = envelope.message_header
    el = envelope.error_list
    about = header is not None and header.message_data.ref_to_message_id == forwarded_id
    if el is not None and about and el.highest_severity is Severity.ERROR:
        # ebMS2 §4.2.4.2: the next hop refused it; its error goes on to the From party (relay).
        return HopAnswer(ErrorReceived(el), relay)
    return HopAnswer(None, relay)


def delivery_failure(
    forwarded: Envelope, issue: Issue, *, own_party: Party, message_id: str, now: datetime
) -> Envelope | None:
    """The DeliveryFailure an intermediary sends the From party of ``forwarded`` when its forward failed
    with ``issue`` (ebMS2 §6.5.7); None when none is due (a signal, or a message without AckRequested)."""
    header = forwarded.message_header
    if header is None or header.service.value == SERVICE_MSH or not forwarded.ack_requested:
        return None
    # ebMS2 §6.5.7: Error if it could not be transmitted, Warning if it was but not acknowledged.
    failure = Issue(ErrorCode.DELIVERY_FAILURE, issue.severity, issue.description)
    return error_message(
        failure,
        in_reply_to=_to_sender(header, own_party),
        message_id=message_id,
        timestamp=now,
    )
