"""What a receiving MSH does with one inbound ebXML message (ebMS2 §6.5.2, §6.5.3, §6.5.5, §6.5.6, §7, §8).

:func:`receive` is a pure function: the runtime reads the envelope, judges it with :func:`cpa.check.check`,
looks the MessageId up in the store (in the transaction it will commit in), and passes all of it in with
the time and an id for the reply. It returns an :class:`InboundDecision` listing actions, in the order the
runtime applies them: store rows first (one transaction: message, duplicate-elimination record, inbox row
and the acknowledgment, docs/design.md §5.2, §5.3), then, after the commit, replies and routed events. An
acknowledgment is therefore never sent before the message it acknowledges is committed (ebMS2 §6.5.2 2b).

What a business message gets is one row of :data:`BUSINESS_RULES`, keyed by (DuplicateElimination in force,
acknowledgment requested, MessageId already stored): the §6.6 combinations without an intermediary.

Decisions where the specifications leave room:

* Check issues of severity Error refuse the message (no store, no delivery) with an ErrorList message
  (:func:`msh.ebms.errorlist.error_message`) carrying every issue found. Warnings do not stop it
  (ebMS2 §4.2.3.2.4): they travel in an ErrorList of highestSeverity Warning inside the Acknowledgment
  message (ebMS2 §4.2.4.3 and §5.1.4 allow a Warning ErrorList with any element), or, when no
  acknowledgment is sent, in an independent MessageError message (ebMS2 §4.2.4.1 recommends reporting).
* A duplicate under DuplicateElimination whose only Error is TimeToLiveExpired is still answered with the
  stored acknowledgment: its first copy arrived in time and was delivered (§6.5.5); refusing the copy would
  tell the sender that a delivered message failed.
* A *duplicate message* is any message with a MessageId already stored (§6.5.6: "a message containing the
  same MessageId as a previously received message"; §6.5.2 1: "there is a MessageId held in persistent
  storage containing the same value"), whatever its header bytes: a partner's retry may regenerate its
  Timestamp, re-sign it or re-frame its package. It is answered as the first copy was and never delivered
  again. The runtime passes the received message's content digest and the stored copy's
  (:func:`msh.ebms.digest.content_digest`: its addressing and payloads); when they differ the copy is
  probably another message that reused the MessageId: it is still a duplicate (not delivered, answered
  from the store), and it is recorded (:class:`ConflictingDuplicate`: journal, counter, warning) so that
  the operator sees that the sender believes something arrived that the application never got. Digests of
  another kind (stored before this definition) are not compared. Without DuplicateElimination nothing is
  compared: every copy is delivered anyway.
* A header element aimed at an actor the specification does not allow it is refused like an agreement
  error, reported in the same ErrorList as the check's issues: a SyncReply whose SOAP actor is not SOAP's
  ``next`` (§4.3.1) and an AckRequested whose actor is neither toPartyMSH nor nextMSH (§6.3.1.1) are
  Inconsistent, Error, at ``//Header/SyncReply/@actor`` / ``//Header/AckRequested/@actor``. So is a
  StatusRequest with a Manifest, a StatusResponse or an ErrorList (§7.2.3), at ``//Body/StatusRequest``,
  and a StatusResponse with a Manifest, a StatusRequest or an ErrorList of severity Error (§7.3.5), at
  ``//Body/StatusResponse`` (being an answer, that one is discarded, never answered); and a message of Action
  StatusRequest without a StatusRequest element (§7.1.1; §7.1.3: it is answered, never ignored), at
  ``//Header/MessageHeader/Action``. The codec
  reads any actor (the model holds the message as it came, and an intermediary would forward it);
  whether to take it is this module's decision. The envelope writer never writes such an element.
* Without DuplicateElimination every copy is processed as new (stored without a duplicate-elimination
  record, delivered, acknowledged afresh): ebMS2 §6.4.1 and §6.6 rows 6 and 8. The ``duplicate`` argument
  is then not looked at.
* A duplicate whose first copy was stored without an acknowledgment (it did not ask for one) but which asks
  for one now gets a new acknowledgment, stored as the first response (§6.5.5 (2)).
* Replies go on the HTTP response when SyncReply is in force (the check's settled ``syncReplyMode``, the
  header's SyncReply when there is no check answer) and the agreement's syncReplyMode returns MSH signals
  synchronously: ``responseOnly`` returns only the business response on the connection, so signals go
  asynchronously (CPP/A 2.0 §8.4.8.1). A refusal follows the header's SyncReply, not the settled value: the
  sender is waiting on the connection whatever the agreement says (under responseOnly it still goes
  asynchronously, being a signal). ``sync_reply_requested`` overrides both (the runtime sets
  it False on a transport that cannot answer synchronously).
* Asynchronous replies name where they go as an :class:`EndpointRef` (CPAId, parties, Service, Action): the
  runtime resolves the URL with :func:`cpa.resolve.resolve` (the agreement's endpoint for that signal,
  ebMS2 §4.2.4.2); where it cannot, it logs (no error is sent, §4.2.4.2).
* Each Acknowledgment carries the actor of the AckRequested it answers (§6.3.2.1, §10.1.3); one toPartyMSH
  element when the agreement asks for an acknowledgment the header did not. When the agreement's channel
  aims acknowledgments at nextMSH, the acknowledgment asked for is the next MSH's (§6.6 rows 3 and 7).
* The acknowledgment aimed at nextMSH goes back on the connection, always (§10.1.1 allows it when there
  is no SyncReply, and SyncReply with it is refused): the next MSH along the reverse path is the MSH that
  sent us the message, and the connection is the only address of it we have (the header names the From
  party, not the previous hop). When both are asked for (this MSH is the To party and the next MSH,
  §10.1.3) and the toPartyMSH one goes back asynchronously, they are two messages: the toPartyMSH one is
  the stored first response (resent for duplicates), the nextMSH one is made afresh for every copy. When
  both go back on the connection they are one message with both elements. A message with SyncReply and an
  AckRequested aimed at nextMSH, or with two AckRequested elements aimed at the same actor, is refused
  (Inconsistent, §10.1.1).
* A new message with a SequenceNumber under an agreement that guarantees order (ebMS2 §9) is placed in its
  sequence (:func:`msh.engine.ordering.place`): delivered when its turn has come (with its held successors,
  :class:`KeepOrder`), else stored, acknowledged and held; one it refuses is answered like any refusal. A
  duplicate is a duplicate first: answered from the store, never placed again.
* Signing is the signing adapter's: :attr:`InboundDecision.signed_actors` says which acknowledgments must
  be signed, each as its own AckRequested@signed asks (§6.3.1.2; for the actor the agreement's channel
  names, as the agreement settles it). A signed one aimed at the next MSH goes by itself, never bundled
  with the end-to-end one (§10.1.4). When ``can_sign`` is False (no signing key and certificate), a signed
  acknowledgment asked for is reported as Inconsistent, Warning (§6.3.1.2: "Warning if not supported") in
  the acknowledgment's ErrorList, and the acknowledgment goes unsigned; one that contradicts the agreement
  is the check's Inconsistent Error. The message's own ds:Reference elements are copied into it when
  it was signed (§6.3.2.5); when it was not, :attr:`InboundDecision.derive_references` asks the adapter to
  derive them.
* Warnings found in a Ping or StatusRequest are kept in :attr:`InboundDecision.issues` only; the Pong or
  StatusResponse goes back without them. What the StatusResponse says is
  :func:`msh.engine.replies.status_answer`'s decision (see there: Received, Processed, Forwarded,
  NotRecognized, and UnAuthorized for a requester that is no party of the message's agreement).
* A StatusResponse about one of our messages is routed to its sending state machine as
  :class:`~msh.engine.sending.StatusReported` (ebMS2 §7.3.3: Received and Processed say the To party has it),
  with the party that sent it, like an acknowledgment: the runtime counts it only from the party the
  message went to, under its agreement (:func:`msh.engine.signals.foreign_signal`).
* MSH signals are never acknowledged (§6.3.1.4, §6.3.2.8). Acknowledgment and ErrorList elements are routed
  to the sending state machine as :class:`OutboundEvent` (with the party that sent them, for the runtime to
  compare with the message's To party); a signal that fails the check is discarded, not answered
  (§4.2.4.1: no error message about an error message; no loop of errors about acknowledgments).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from cpa.check import CheckResult
from cpa.model import DeliveryChannel, SyncReplyMode
from cpa.precedence import Parameter
from msh.ebms.digest import comparable
from msh.ebms.errorlist import ACTION_MESSAGE_ERROR, error_message, soap_fault
from msh.ebms.model import Envelope, MessageHeader
from msh.ebms.namespaces import ACTOR_NEXT_MSH, ACTOR_TO_PARTY_MSH, SERVICE_MSH, SOAP_ACTOR_NEXT
from msh.engine.inbound import (
    NO_SEQUENCE,
    ConflictingDuplicate,
    Discard,
    EndpointRef,
    InboundAction,
    InboundDecision,
    KeepOrder,
    OutboundEvent,
    QueriedMessage,
    RecordAcknowledgment,
    Reject,
    ReplySync,
    ResendStoredAck,
    SendAsync,
    SequenceState,
    SignalReceived,
    StatusAnswer,
    StoredAck,
    StoredInbound,
    StoreInbound,
)
from msh.engine.ordering import Placement, agreement_gap_window, place
from msh.engine.reliability import effective_actor
from msh.engine.replies import (
    ACTION_ACKNOWLEDGMENT,
    ACTION_PING,
    ACTION_PONG,
    ACTION_STATUS_REQUEST,
    ACTION_STATUS_RESPONSE,
    acknowledgment_message,
    pong_message,
    signed_references,
    status_answer,
    status_response_message,
)
from msh.engine.sending import AcknowledgmentReceived, ErrorReceived, StatusReported
from msh.errors import ErrorCode, Issue, Severity

__all__ = [
    "ACTION_ACKNOWLEDGMENT",
    "ACTION_PING",
    "ACTION_PONG",
    "ACTION_STATUS_REQUEST",
    "ACTION_STATUS_RESPONSE",
    "BUSINESS_RULES",
    "ConflictingDuplicate",
    "Discard",
    "EndpointRef",
    "InboundAction",
    "InboundDecision",
    "InboundOutcome",
    "OutboundEvent",
    "QueriedMessage",
    "RecordAcknowledgment",
    "Reject",
    "ReplySync",
    "ResendStoredAck",
    "SendAsync",
    "SignalReceived",
    "StatusAnswer",
    "StoreInbound",
    "StoredAck",
    "StoredInbound",
    "acknowledgment_message",
    "pong_message",
    "receive",
    "status_response_message",
]

# The inputs, actions and decision (msh.engine.inbound) and the replies (msh.engine.replies) are exported
# from here too: the receiving side's names, wherever they are defined.


class InboundOutcome(StrEnum):
    """What happens to a business message that passed the check (one row of :data:`BUSINESS_RULES`)."""

    DELIVER_AND_ACK = "deliver-and-acknowledge"
    DELIVER = "deliver"
    RESEND_ACK = "resend-stored-acknowledgment"
    IGNORE = "ignore"


BUSINESS_RULES: Final[Mapping[tuple[bool, bool, bool], InboundOutcome]] = MappingProxyType(
    {
        # (DuplicateElimination, AckRequested, MessageId already stored) -> outcome.
        # ebMS2 §6.6 row 2, §6.5.2 2: store the MessageId, then acknowledge.
        (True, True, False): InboundOutcome.DELIVER_AND_ACK,
        # ebMS2 §6.5.2 1, §6.5.5, §6.5.6: a duplicate gets the first acknowledgment again, no delivery.
        (True, True, True): InboundOutcome.RESEND_ACK,
        # ebMS2 §6.6 row 4: at most once, no acknowledgment.
        (True, False, False): InboundOutcome.DELIVER,
        # ebMS2 §6.5.2 "no AckRequested" 1: a duplicate is ignored.
        (True, False, True): InboundOutcome.IGNORE,
        # ebMS2 §6.6 row 6, §6.4.1: duplicates possible; every copy is delivered and acknowledged.
        (False, True, False): InboundOutcome.DELIVER_AND_ACK,
        (False, True, True): InboundOutcome.DELIVER_AND_ACK,
        # ebMS2 §6.6 row 8: best effort; every copy is delivered.
        (False, False, False): InboundOutcome.DELIVER,
        (False, False, True): InboundOutcome.DELIVER,
    }
)


# --- deciding -----------------------------------------------------------------------------------------

# CPP/A 2.0 §8.4.8.1: the syncReplyMode values under which MSH signals come back on the connection.
_SIGNALS_SYNC: Final = frozenset(
    {SyncReplyMode.MSH_SIGNALS_ONLY, SyncReplyMode.SIGNALS_ONLY, SyncReplyMode.SIGNALS_AND_RESPONSE}
)


def _sending_channel(check_result: CheckResult) -> DeliveryChannel | None:
    cpa, channel_id = check_result.cpa, check_result.sending_channel_id
    if cpa is None or channel_id is None:
        return None
    for info in cpa.party_infos:
        for channel in (*info.delivery_channels, info.default_msh_channel):
            if channel.channel_id == channel_id:
                return channel
    return None


def _sync_reply_mode(check_result: CheckResult) -> SyncReplyMode | None:
    channel = _sending_channel(check_result)
    return channel.messaging_characteristics.sync_reply_mode if channel is not None else None


def _signals_sync(envelope: Envelope, check_result: CheckResult, override: bool | None, *, settled: bool) -> bool:
    if override is not None:
        return override
    present = envelope.sync_reply is not None
    # ebMS2 §4.3.1, §6.4.7: SyncReply asks for the response on the same connection.
    in_force = check_result.effective.get(Parameter.SYNC_REPLY_MODE.value, present) if settled else present
    if not in_force:
        return False
    # CPP/A 2.0 §8.4.8.1: under responseOnly only the business response comes back synchronously.
    return _sync_reply_mode(check_result) is not SyncReplyMode.RESPONSE_ONLY


def _reply(reply: Envelope, sync: bool) -> ReplySync | SendAsync:
    return ReplySync(reply) if sync else SendAsync(reply, EndpointRef.of(reply))


def _ack_endpoint(header: MessageHeader) -> EndpointRef:
    return EndpointRef(header.cpa_id, header.to_party, header.from_party, SERVICE_MSH, ACTION_ACKNOWLEDGMENT)


def _routed(envelope: Envelope, header: MessageHeader, relay: bool) -> list[InboundAction]:
    out: list[InboundAction] = []
    # ebMS2 §6.5.2: an Acknowledgment marks the message it names as delivered (the sending machine decides).
    for ack in envelope.acknowledgments:
        event = AcknowledgmentReceived(ack.ref_to_message_id, ack.actor)
        out.append(OutboundEvent(ack.ref_to_message_id, event, header.from_party, header.cpa_id, relay))
    if envelope.error_list is not None:
        ref = header.message_data.ref_to_message_id
        if ref is None:
            # ebMS2 §4.2.4.2: an ErrorList names the message in error by RefToMessageId.
            out.append(Discard("ErrorList without MessageData/RefToMessageId: no message to attach it to"))
        else:
            error = ErrorReceived(envelope.error_list)
            out.append(OutboundEvent(ref, error, header.from_party, header.cpa_id, relay))
    return out


def _is_answer(envelope: Envelope, header: MessageHeader) -> bool:
    """True for a message that answers one of ours (ack, error, pong, status response): never answered."""
    if envelope.error_list is not None and envelope.error_list.highest_severity is Severity.ERROR:
        return True
    return header.service.value == SERVICE_MSH and header.action in (
        ACTION_ACKNOWLEDGMENT,
        ACTION_MESSAGE_ERROR,
        ACTION_PONG,
        ACTION_STATUS_RESPONSE,
    )


def _refuse(
    envelope: Envelope,
    header: MessageHeader,
    check_result: CheckResult,
    new_message_id: str,
    now: datetime,
    override: bool | None,
) -> InboundDecision:
    # ebMS2 §4.2.4.1: report the errors to the sender in an error message (§4.2.4.3: MessageError).
    reply = error_message(check_result.issues, in_reply_to=header, message_id=new_message_id, timestamp=now)
    sync = _signals_sync(envelope, check_result, override, settled=False)
    reject = Reject(header.message_id, reply, sync, None if sync else EndpointRef.of(reply))
    return InboundDecision((reject,), check_result.issues)


# ebMS2 §6.3.1.1: AckRequested targets the Next MSH or the To Party MSH; no actor means the To Party MSH.
_ACK_REQUESTED_ACTORS: Final = frozenset({None, ACTOR_TO_PARTY_MSH, ACTOR_NEXT_MSH})


def _actor_issues(envelope: Envelope) -> tuple[Issue, ...]:
    """Header elements aimed at an actor the specification does not allow them (Inconsistent, Error)."""
    out: list[Issue] = []
    actors = [effective_actor(a.actor) for a in envelope.ack_requested]
    if envelope.sync_reply is not None and ACTOR_NEXT_MSH in actors:
        # ebMS2 §10.1.1: with SyncReply present, an AckRequested aimed at the next MSH MUST NOT be.
        out.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.ERROR,
                "the message has SyncReply and an AckRequested aimed at the next MSH; ebMS2 §10.1.1 forbids "
                "the two together",
                "//Header/AckRequested/@actor",
            )
        )
    for actor in sorted({a for a in actors if actors.count(a) > 1}):
        # ebMS2 §10.1.1, §10.1.3: at most one AckRequested per actor (one for the next MSH, one end to end).
        out.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.ERROR,
                f"the message has {actors.count(actor)} AckRequested elements aimed at {actor}; ebMS2 §10.1.1 "
                "allows one per actor",
                "//Header/AckRequested",
            )
        )
    sync_reply = envelope.sync_reply
    if sync_reply is not None and sync_reply.actor != SOAP_ACTOR_NEXT:
        # ebMS2 §4.3.1: SyncReply's SOAP actor has the REQUIRED value of SOAP's "next".
        out.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.ERROR,
                f"SyncReply has SOAP:actor {sync_reply.actor!r}; ebMS2 §4.3.1 requires {SOAP_ACTOR_NEXT}",
                "//Header/SyncReply/@actor",
            )
        )
    for requested in envelope.ack_requested:
        if requested.actor not in _ACK_REQUESTED_ACTORS:
            out.append(
                Issue(
                    ErrorCode.INCONSISTENT,
                    Severity.ERROR,
                    f"AckRequested has SOAP:actor {requested.actor!r}; ebMS2 §6.3.1.1 allows "
                    f"{ACTOR_TO_PARTY_MSH} (the default) or {ACTOR_NEXT_MSH}",
                    "//Header/AckRequested/@actor",
                )
            )
    return tuple(out)


def _status_element_issues(envelope: Envelope) -> tuple[Issue, ...]:
    """A StatusRequest or StatusResponse with an element it must not come with (Inconsistent, Error)."""
    manifest, error_list = envelope.manifest is not None, envelope.error_list
    request, response = envelope.status_request is not None, envelope.status_response is not None
    rules = (
        # ebMS2 §7.2.3: StatusRequest MUST NOT be present with a Manifest, a StatusResponse or an ErrorList.
        (
            "StatusRequest",
            request,
            "§7.2.3",
            (("a Manifest", manifest), ("a StatusResponse", response), ("an ErrorList", error_list is not None)),
        ),
        # ebMS2 §7.3.5: StatusResponse MUST NOT be present with a Manifest, a StatusRequest or an ErrorList of
        # highestSeverity Error.
        (
            "StatusResponse",
            response,
            "§7.3.5",
            (
                ("a Manifest", manifest),
                ("a StatusRequest", request),
                (
                    "an ErrorList of highestSeverity Error",
                    error_list is not None and error_list.highest_severity is Severity.ERROR,
                ),
            ),
        ),
    )
    out = []
    for element, present, clause, companions in rules:
        found = [name for name, there in companions if there]
        if present and found:
            names = [name for name, _ in companions]
            forbidden = f"{', '.join(names[:-1])} or {names[-1]}"
            text = f"{element} comes with {', '.join(found)}; ebMS2 {clause} forbids it with {forbidden}"
            out.append(Issue(ErrorCode.INCONSISTENT, Severity.ERROR, text, f"//Body/{element}"))
    header = envelope.message_header
    asks = header is not None and header.service.value == SERVICE_MSH and header.action == ACTION_STATUS_REQUEST
    if asks and not request:
        # ebMS2 §7.1.1, §7.1.3: a Message Status Request without its StatusRequest is answered, with an error.
        text = "Action StatusRequest without a StatusRequest element (ebMS2 §7.1.1)"
        out.append(Issue(ErrorCode.INCONSISTENT, Severity.ERROR, text, "//Header/MessageHeader/Action"))
    return tuple(out)


def _conflict(duplicate: StoredInbound | None, digest: str | None) -> tuple[ConflictingDuplicate, ...]:
    """The record of a duplicate whose business content differs from the first copy's (see the module docs)."""
    if duplicate is None or digest is None or duplicate.digest is None or not comparable(duplicate.digest, digest):
        return ()
    if duplicate.digest == digest:
        return ()
    return (ConflictingDuplicate(duplicate.message_id, duplicate.digest, digest),)


def receive(
    envelope: Envelope,
    *,
    check_result: CheckResult,
    duplicate: StoredInbound | None,
    now: datetime,
    new_message_id: str,
    sync_reply_requested: bool | None = None,
    queried: QueriedMessage | None = None,
    digest: str | None = None,
    next_id: Callable[[], str] | None = None,
    relayed: bool = False,
    ordered: SequenceState = NO_SEQUENCE,
    can_sign: bool = True,
) -> InboundDecision:
    """Decide what to do with the received ``envelope`` (see the module docs).

    ``check_result`` is :func:`cpa.check.check` of the envelope; ``duplicate`` what the store holds for its
    MessageId (None: never seen); ``new_message_id`` the MessageId of the reply, if one is built;
    ``sync_reply_requested`` overrides the synchronous/asynchronous choice; ``queried`` is what the store
    holds of the message a StatusRequest asks about (None: nothing, NotRecognized); ``digest`` is the
    message's content digest (:func:`msh.ebms.digest.content_digest`), stored with it and compared with the
    stored copy's;
    ``next_id`` makes the MessageId of a second reply when one is due (a hop acknowledgment apart from the
    end-to-end one); ``relayed``: the message comes from a trusted intermediary on the path of the messages
    it reports on (its acknowledgments and errors are routed as :attr:`OutboundEvent.relay`); ``ordered``:
    what the store holds for the sequence of a message with a SequenceNumber (ebMS2 §9,
    :mod:`msh.engine.ordering`); ``can_sign``: this MSH has a signing key and certificate, so it can
    produce a signed Acknowledgment Message (ebMS2 §6.3.1.2).
    """
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware (UTC), got {now!r}")
    issues = check_result.issues
    header = envelope.message_header
    if header is None:
        # ebMS2 §4.2.4.2: no MessageHeader, no one to address an ErrorList to: a SOAP Fault (docs/design.md §6).
        fault_issues = issues or (Issue(ErrorCode.OTHER_XML, Severity.ERROR, "the message has no MessageHeader"),)
        return InboundDecision((Reject(None, soap_fault(fault_issues), True, None),), fault_issues)
    actor_issues = (*_actor_issues(envelope), *_status_element_issues(envelope))
    if actor_issues:
        # ebMS2 §4.3.1, §6.3.1.1, §7.2.3, §7.3.5: refused like an agreement error, reported with the check's issues.
        check_result = replace(check_result, issues=(*issues, *actor_issues))
        issues = check_result.issues
    answer = _is_answer(envelope, header)
    errors = check_result.errors
    if errors:
        if answer:
            # ebMS2 §4.2.4.1, §6.5.2: never an error about an error message; an odd acknowledgment is ignored.
            return InboundDecision((Discard(f"signal refused: {errors[0]}"),), issues)
        if not _duplicate_despite_ttl(envelope, header, check_result, duplicate):
            return _refuse(envelope, header, check_result, new_message_id, now, sync_reply_requested)
    actions = _routed(envelope, header, relayed)
    sync = _signals_sync(envelope, check_result, sync_reply_requested, settled=True)
    if header.service.value == SERVICE_MSH:
        return _signal(envelope, header, check_result, actions, sync, new_message_id, now, queried)
    return _business(
        envelope,
        header,
        check_result,
        duplicate,
        actions,
        sync,
        new_message_id,
        now,
        sync_reply_requested,
        digest,
        next_id,
        ordered,
        can_sign,
    )


def _effective(check_result: CheckResult, parameter: Parameter, header_value: bool) -> bool:
    return check_result.effective.get(parameter.value, header_value)


def _warnings(issues: tuple[Issue, ...]) -> tuple[Issue, ...]:
    return tuple(i for i in issues if i.severity is Severity.WARNING)


def _duplicate_despite_ttl(
    envelope: Envelope, header: MessageHeader, check_result: CheckResult, duplicate: StoredInbound | None
) -> bool:
    # ebMS2 §6.5.5: a duplicate of an accepted message is answered from the store even past its TimeToLive.
    de = _effective(check_result, Parameter.DUPLICATE_ELIMINATION, header.duplicate_elimination)
    return (
        de
        and duplicate is not None
        and header.service.value != SERVICE_MSH
        and all(e.error_code is ErrorCode.TIME_TO_LIVE_EXPIRED for e in check_result.errors)
    )


def _signal(
    envelope: Envelope,
    header: MessageHeader,
    check_result: CheckResult,
    actions: list[InboundAction],
    sync: bool,
    new_message_id: str,
    now: datetime,
    queried: QueriedMessage | None,
) -> InboundDecision:
    issues = check_result.issues
    action = header.action
    if action == ACTION_PING:
        # ebMS2 §8.2: answer a Ping with a Pong.
        actions.append(_reply(pong_message(envelope, message_id=new_message_id, now=now), sync))
    elif action == ACTION_STATUS_REQUEST and envelope.status_request is not None:
        # ebMS2 §7.1.2: answer a StatusRequest with a StatusResponse; §7.3.3: what it says.
        answer = status_answer(header.from_party, queried)
        reply = status_response_message(envelope, status=answer, message_id=new_message_id, now=now)
        actions.append(_reply(reply, sync))
    elif action in (ACTION_PONG, ACTION_STATUS_RESPONSE):
        ref = header.message_data.ref_to_message_id
        # ebMS2 §8.2, §7.1.2: the answer to a Ping or StatusRequest we sent (whoever asked is told first).
        actions.append(SignalReceived(action, ref, envelope))
        response = envelope.status_response
        if action == ACTION_STATUS_RESPONSE and response is not None:
            # ebMS2 §7.3.1, §7.3.3: the status of our message RefToMessageId, for its sending machine.
            reported = StatusReported(response.message_status)
            actions.append(
                OutboundEvent(response.ref_to_message_id, reported, header.from_party, header.cpa_id, in_reply_to=ref)
            )
    elif not actions:
        actions.append(Discard(f"MSH signal {action!r} carries nothing to act on"))
    return InboundDecision(tuple(actions), issues)


def _business(
    envelope: Envelope,
    header: MessageHeader,
    check_result: CheckResult,
    duplicate: StoredInbound | None,
    actions: list[InboundAction],
    sync: bool,
    new_message_id: str,
    now: datetime,
    override: bool | None,
    digest: str | None,
    next_id: Callable[[], str] | None,
    ordered: SequenceState,
    can_sign: bool,
) -> InboundDecision:
    de = _effective(check_result, Parameter.DUPLICATE_ELIMINATION, header.duplicate_elimination)
    asked = _effective(check_result, Parameter.ACK_REQUESTED, bool(envelope.ack_requested))
    present = {effective_actor(a.actor) for a in envelope.ack_requested}
    channel = _sending_channel(check_result)
    if channel is not None and channel.messaging_characteristics.actor == ACTOR_NEXT_MSH:
        # ebMS2 §6.6 rows 3 and 7: the agreement asks only the next MSH (this MSH) for an acknowledgment.
        end_to_end, hop, primary = False, asked, ACTOR_NEXT_MSH
    else:
        # ebMS2 §10.1.3: the To Party MSH acknowledges end to end, and as the next MSH when asked to.
        end_to_end, hop, primary = asked, ACTOR_NEXT_MSH in present, ACTOR_TO_PARTY_MSH
    ack_wanted = end_to_end or hop
    # ebMS2 §6.3.1.2: each Acknowledgment is signed as its own AckRequested asks (the agreement's answer for
    # the actor its channel names; the header's signed attribute for the other, §10.1.3).
    asked_signed = {effective_actor(a.actor): a.signed for a in envelope.ack_requested}
    wanted_signed = {
        actor
        for actor, wanted in ((ACTOR_TO_PARTY_MSH, end_to_end), (ACTOR_NEXT_MSH, hop))
        if wanted
        and (
            _effective(check_result, Parameter.ACK_SIGNATURE_REQUESTED, asked_signed.get(actor, False))
            if actor == primary
            else asked_signed.get(actor, False)
        )
    }
    issues = check_result.issues
    if wanted_signed and not can_sign:
        # ebMS2 §6.3.1.2: a signed Acknowledgment this MSH cannot produce is reported to the Sending MSH as
        # Inconsistent, severity Warning ("not supported"); the acknowledgment goes unsigned.
        unsupported = Issue(
            ErrorCode.INCONSISTENT,
            Severity.WARNING,
            "a signed Acknowledgment Message is requested and this MSH has no signing key and certificate to "
            "sign it with; the Acknowledgment is sent unsigned (ebMS2 §6.3.1.2)",
            "//Header/AckRequested/@signed",
        )
        issues = (*issues, unsupported)
        wanted_signed = set()
    signed_actors = frozenset(wanted_signed)
    hop_signed = ACTOR_NEXT_MSH in signed_actors and end_to_end
    seen = de and duplicate is not None
    # ebMS2 §6.5.6: the same MessageId is a duplicate; other content under it is recorded as a conflict.
    conflict = _conflict(duplicate, digest) if seen else ()
    outcome = BUSINESS_RULES[(de, ack_wanted, seen)]
    warnings = _warnings(issues)
    references = signed_references(envelope) if signed_actors else ()
    derive = bool(signed_actors) and not references

    # ebMS2 §10.1.1: the next MSH's acknowledgment goes back on the connection (see the module docs).
    hop_sync = override is not False
    # ebMS2 §10.1.4: a signed acknowledgment aimed at the next MSH is sent by itself, never bundled.
    apart = hop and end_to_end and (not (sync and hop_sync) or hop_signed)

    def ack_message(actors: tuple[str, ...], message_id: str) -> Envelope:
        # ebMS2 §6.3.2.1, §10.1.3: each Acknowledgment carries the actor of the AckRequested it answers.
        return acknowledgment_message(
            envelope,
            message_id=message_id,
            now=now,
            actors=actors,
            references=references,
            warnings=warnings,
            referenced=signed_actors,
        )

    def first_ack() -> Envelope:
        # The first response, stored and resent for duplicates (ebMS2 §6.5.6): end to end when asked for.
        actors = (ACTOR_TO_PARTY_MSH,) if apart else (*end_to_end * (ACTOR_TO_PARTY_MSH,), *hop * (ACTOR_NEXT_MSH,))
        return ack_message(actors, new_message_id)

    def first_sync() -> bool:
        # Apart and both due on the connection (a signed hop acknowledgment goes by itself): the hop one
        # takes the connection, the end-to-end one goes asynchronously.
        return (sync and not (apart and hop_sync)) if end_to_end else hop_sync

    def hop_reply() -> tuple[InboundAction, ...]:
        if not apart:
            return ()
        if next_id is None:
            raise ValueError("two acknowledgment messages are due: receive() needs next_id for the second MessageId")
        return (_reply(ack_message((ACTOR_NEXT_MSH,), next_id()), hop_sync),)

    def decided(*more: InboundAction, signing: frozenset[str] = signed_actors) -> InboundDecision:
        return InboundDecision((*conflict, *more, *actions), issues, seen, signing, bool(signing) and derive)

    hop_only = frozenset({ACTOR_NEXT_MSH}) & signed_actors if apart else frozenset()
    unsigned: frozenset[str] = frozenset()

    if outcome is InboundOutcome.IGNORE:
        # ebMS2 §6.5.2: DuplicateElimination, no AckRequested, a duplicate: do nothing.
        return decided(Discard(f"duplicate of {header.message_id} ignored (DuplicateElimination)"))
    if outcome is InboundOutcome.RESEND_ACK and duplicate is not None:
        if duplicate.acknowledgment is not None:
            # ebMS2 §6.5.6 2: the acknowledgment identical to the first response, never a second delivery.
            again = ResendStoredAck(header.message_id, duplicate.acknowledgment, first_sync(), _ack_endpoint(header))
            return decided(again, *hop_reply(), signing=hop_only)
        # ebMS2 §6.5.5 (2): no response in the store: generate one (and keep it as the first response).
        first = first_ack()
        return decided(RecordAcknowledgment(header.message_id, first), _reply(first, first_sync()), *hop_reply())
    ordering: tuple[InboundAction, ...] = ()
    deliver, hold, number, offered = True, False, None, None
    if envelope.message_order is not None and _effective(check_result, Parameter.MESSAGE_ORDER, True):
        placed = place(ordered.position, envelope.message_order, now=now, max_held=ordered.max_held)
        keep = KeepOrder(
            placed.position,
            release=placed.placement is Placement.DELIVER,
            abandon=placed.abandon,
            gap_window=agreement_gap_window(
                check_result.cpa, check_result.sending_channel_id, check_result.receiving_channel_id
            ),
        )
        if placed.placement is Placement.REFUSE:
            # ebMS2 §9.1.1: refused (never stored, delivered or acknowledged), the sequence's record kept.
            assert placed.issue is not None
            refused = _refuse(
                envelope,
                header,
                replace(check_result, issues=(*check_result.issues, placed.issue)),
                new_message_id,
                now,
                override,
            )
            return replace(refused, actions=(keep, *refused.actions))
        # ebMS2 §9.1.1: delivered now when every lower number was, else kept and held for its turn.
        number = envelope.message_order.sequence_number
        hold = placed.placement is Placement.HOLD
        deliver = not hold
        offered = placed.offered_at
        ordering = (keep,)
    ack = first_ack() if outcome is InboundOutcome.DELIVER_AND_ACK else None
    # ebMS2 §6.5.2 2a-2b, §10.1.3: persist (and deliver) before any acknowledgment leaves.
    store = StoreInbound(
        header.message_id,
        ack,
        deliver=deliver,
        duplicate_elimination=de,
        received_at=now,
        digest=digest,
        hold=hold,
        sequence_number=number,
        offered_at=offered,
    )
    if ordering:
        store_and_order: tuple[InboundAction, ...] = (store, *ordering)
        if ack is not None:
            return decided(*store_and_order, _reply(ack, first_sync()), *hop_reply())
        return decided(*store_and_order, signing=unsigned)
    if ack is not None:
        return decided(store, _reply(ack, first_sync()), *hop_reply())
    if warnings:
        # ebMS2 §4.2.4.1, §4.2.4.3: report Warnings in an independent MessageError message.
        report = error_message(warnings, in_reply_to=header, message_id=new_message_id, timestamp=now)
        return decided(store, _reply(report, sync), signing=unsigned)
    return decided(store, signing=unsigned)
