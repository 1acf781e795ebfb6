"""The MSH signals a receiving MSH builds in answer to a message: the Acknowledgment message
(ebMS2 §6.3.2, §6.5.3), the Pong (§8.2) and the StatusResponse (§7.1.2, §7.3).

Each is a pure function of the received envelope, the reply's MessageId and ``now``; its MessageHeader
turns the received one round (:func:`acknowledgment_message`, :func:`pong_message`,
:func:`status_response_message`). :func:`~msh.engine.receiving.receive` decides which one goes back.
The Actions of the MSH service these signals and their requests carry are named here too (ACTION_*).

What a StatusResponse says is :func:`status_answer`'s decision, from what the store holds of the message
asked about (:class:`~msh.engine.inbound.QueriedMessage`). Decisions where the specification leaves room:

* Processed (ebMS2 §7.3.3: "has been processed by the MSH") means the MSH has handed the message to the
  application (its inbox entry was fetched or acknowledged); stored and not yet handed over is Received.
* Only a party of the message's agreement may ask about it (the agreement its CPAId names, as loaded
  here; when it is not loaded, the message's own From and To parties). Anyone else is answered
  UnAuthorized, without a Timestamp (§7.1.3 allows answering UnAuthorized or ignoring the request: the
  answer tells a partner who asks under the wrong PartyId what is wrong, and tells anyone else nothing
  about the message). The requester always passed the agreement check of its own request (it is a party
  of an agreement with us); an unknown MessageId is NotRecognized whoever asks.
* An intermediary answers Forwarded (§7.3.3) about a message it forwarded, with the time it received it,
  to the message's From party only: the party that sent the message is the one that asks about it
  (§7.1.1), and an intermediary may hold no agreement with anyone (ebMS2 §10), so the message's own header
  (as stored with its forward) is the authority, not an agreement.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from lxml import etree

from msh.ebms.errorlist import error_list
from msh.ebms.model import (
    Acknowledgment,
    Envelope,
    MessageData,
    MessageHeader,
    MessageStatus,
    Party,
    Service,
    StatusResponse,
)
from msh.ebms.namespaces import ACTOR_TO_PARTY_MSH, SERVICE_MSH, XMLDSIG
from msh.engine.inbound import Held, QueriedMessage, StatusAnswer
from msh.engine.reliability import effective_actor
from msh.engine.signals import party_text
from msh.errors import Issue, MshError, Severity
from msh.safexml import parse_xml

__all__ = [
    "ACTION_ACKNOWLEDGMENT",
    "ACTION_PING",
    "ACTION_PONG",
    "ACTION_STATUS_REQUEST",
    "ACTION_STATUS_RESPONSE",
    "acknowledgment_message",
    "pong_message",
    "signed_references",
    "status_answer",
    "status_response_message",
]

# ebMS2 §6.3.2.7, §8.1, §8.2, §7.1.1, §7.1.2: the Actions of the MSH service.
ACTION_ACKNOWLEDGMENT: Final = "Acknowledgment"
ACTION_PING: Final = "Ping"
ACTION_PONG: Final = "Pong"
ACTION_STATUS_REQUEST: Final = "StatusRequest"
ACTION_STATUS_RESPONSE: Final = "StatusResponse"


def _reply_header(header: MessageHeader, action: str, message_id: str, now: datetime) -> MessageHeader:
    # ebMS2 §6.5.3, §7.1.2, §8.2: From/To are those of the received message reversed, CPAId and
    # ConversationId kept, Service is the MSH service, RefToMessageId names the received message.
    return MessageHeader(
        from_party=header.to_party,
        to_party=header.from_party,
        cpa_id=header.cpa_id,
        conversation_id=header.conversation_id,
        service=Service(SERVICE_MSH),
        action=action,
        message_data=MessageData(message_id=message_id, timestamp=now, ref_to_message_id=header.message_id),
    )


def signed_references(envelope: Envelope) -> tuple[str, ...]:
    """The ds:Reference elements of the message's first ds:Signature, as XML text (ebMS2 §6.3.2.5)."""
    if not envelope.signatures:
        return ()
    try:
        root = parse_xml(envelope.signatures[0].xml.encode("utf-8"), what="ds:Signature")
    except MshError:
        return ()
    refs = root.findall(f"{{{XMLDSIG}}}SignedInfo/{{{XMLDSIG}}}Reference")
    return tuple(etree.tostring(r, encoding="unicode", with_tail=False) for r in refs)


def acknowledgment_message(
    envelope: Envelope,
    *,
    message_id: str,
    now: datetime,
    actors: tuple[str | None, ...] = (ACTOR_TO_PARTY_MSH,),
    references: tuple[str, ...] = (),
    warnings: tuple[Issue, ...] = (),
    referenced: frozenset[str] | None = None,
) -> Envelope:
    """The Acknowledgment message for the received ``envelope`` (ebMS2 §6.3.2, §6.5.3).

    Service is the MSH service and Action ``Acknowledgment`` (§6.3.2.7); From is the received To and To the
    received From, with all their children (§6.5.3); one Acknowledgment element per actor, each with
    Timestamp ``now`` (when the message was received, §6.3.2.2), RefToMessageId, From (our party,
    §6.3.2.4) and ``references`` (only the elements whose actor is in ``referenced``, when it is given:
    the signed ones, §6.3.2.5). ``warnings`` travel in an ErrorList of highestSeverity Warning.
    """
    header = envelope.message_header
    if header is None:
        raise ValueError("an acknowledgment answers a message with a MessageHeader")
    if any(w.severity is not Severity.WARNING for w in warnings):
        raise ValueError("only Warnings may travel with an acknowledgment (ebMS2 §5.1.4)")
    acks = tuple(
        Acknowledgment(
            timestamp=now,
            ref_to_message_id=header.message_id,
            from_party=header.to_party,
            # ebMS2 §6.3.2.5: the Reference list is REQUIRED where the AckRequested asked for a signed one.
            references=references if referenced is None or effective_actor(actor) in referenced else (),
            actor=actor,
        )
        for actor in actors
    )
    return Envelope(
        message_header=_reply_header(header, ACTION_ACKNOWLEDGMENT, message_id, now),
        acknowledgments=acks,
        error_list=error_list(warnings) if warnings else None,
    )


def pong_message(envelope: Envelope, *, message_id: str, now: datetime) -> Envelope:
    """The Pong answering the Ping ``envelope`` (ebMS2 §8.2): RefToMessageId names the Ping."""
    if envelope.message_header is None:
        raise ValueError("a Pong answers a Ping with a MessageHeader")
    return Envelope(message_header=_reply_header(envelope.message_header, ACTION_PONG, message_id, now))


def _party_texts(party: Party) -> frozenset[str]:
    return frozenset(party_text(p.value, p.type) for p in party.party_ids)


def status_answer(requester: Party, queried: QueriedMessage | None) -> StatusAnswer:
    """What the StatusResponse to ``requester`` (the StatusRequest's From party) says about ``queried``
    (None: no such MessageId in the store), see the module docs."""
    if queried is None:
        # ebMS2 §7.3.3 NotRecognized: "the message identified by the RefToMessageId element ... is not recognized".
        return StatusAnswer(MessageStatus.NOT_RECOGNIZED)
    asking = _party_texts(requester)
    if queried.held is Held.FORWARDED:
        allowed = frozenset({queried.from_party} - {None})
    elif queried.agreement_parties is not None:
        allowed = queried.agreement_parties
    else:
        allowed = frozenset({queried.from_party, queried.to_party} - {None})
    if not asking & allowed:
        # ebMS2 §7.1.3, §7.3.3 UnAuthorized: "the Message Status Request is not authorized or accepted".
        return StatusAnswer(MessageStatus.UN_AUTHORIZED)
    if queried.held is Held.FORWARDED:
        # ebMS2 §7.3.3 Forwarded: "has been forwarded by the MSH to another MSH".
        return StatusAnswer(MessageStatus.FORWARDED, queried.received_at)
    if queried.delivered_to_app:
        # ebMS2 §7.3.3 Processed: "has been processed by the MSH" (handed to the application).
        return StatusAnswer(MessageStatus.PROCESSED, queried.received_at)
    # ebMS2 §7.3.3 Received: "has been received by the MSH"; §7.3.2: with the time it was received.
    return StatusAnswer(MessageStatus.RECEIVED, queried.received_at)


def status_response_message(
    envelope: Envelope, *, status: StatusAnswer | None, message_id: str, now: datetime
) -> Envelope:
    """The StatusResponse answering the StatusRequest ``envelope`` (ebMS2 §7.1.2, §7.3).

    ``status`` is :func:`status_answer`'s decision (None: NotRecognized). The Timestamp (time received)
    is omitted for NotRecognized and UnAuthorized (§7.3.2: "This MUST be omitted if the message ... is
    NotRecognized or the request was UnAuthorized").
    """
    header, request = envelope.message_header, envelope.status_request
    if header is None or request is None:
        raise ValueError("a StatusResponse answers a message with a MessageHeader and a StatusRequest")
    answer = status or StatusAnswer(MessageStatus.NOT_RECOGNIZED)
    silent = answer.message_status in (MessageStatus.NOT_RECOGNIZED, MessageStatus.UN_AUTHORIZED)
    return Envelope(
        message_header=_reply_header(header, ACTION_STATUS_RESPONSE, message_id, now),
        status_response=StatusResponse(
            ref_to_message_id=request.ref_to_message_id,
            message_status=answer.message_status,
            timestamp=None if silent else answer.received_at,
        ),
    )
