"""Building an outbound business message from what the application submits and what the agreement says.

:class:`Submission` is the application's side (to whom, which service and action, payloads, optional
CPAId, ConversationId, TimeToLive, per-message choices); :func:`compose` turns it, with the
:class:`~cpa.resolve.SendingParameters` of the agreement, into the ebXML envelope and its MIME attachments.
The agreement wins wherever it binds (CPP/A 2.0 §8.4.8 ``always``/``never``); the submission decides only
``perMessage`` parameters. Under an agreement whose sending channel guarantees order (MessageOrderSemantics
Guaranteed) every message carries a MessageOrder element (ebMS2 §9.1) and, with it, an acknowledgment request
and DuplicateElimination (§9: "Reliable Messaging MUST be used"; §9.1: "DuplicateElimination MUST also be
present"): a submission that asks for either to be left out is refused. Its SequenceNumber is given by the
caller (:func:`msh.engine.ordering.assign`, in the transaction that commits the message).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cpa.model import MessageOrderSemantics, PerMessage, SyncReplyMode
from cpa.resolve import SendingParameters
from msh.ebms.mime import AttachmentSpec, PartBody
from msh.ebms.model import (
    AckRequested,
    Envelope,
    Manifest,
    MessageData,
    MessageHeader,
    MessageOrder,
    Party,
    PartyId,
    Reference,
    Service,
    SyncReply,
)
from msh.ebms.namespaces import ACTOR_NEXT_MSH
from msh.errors import ConfigurationError

__all__ = ["Composed", "Payload", "Submission", "compose", "is_ordered", "new_message_id"]


@dataclass(frozen=True, slots=True)
class Payload:
    """One payload of a submitted message: its content (bytes, or a file read in chunks when sent), its
    MIME type and optionally its Content-ID (one is made up when absent)."""

    content: bytes | Path
    content_type: str = "application/octet-stream"
    content_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.content, (bytes, Path)):
            raise ValueError("Payload.content must be bytes or a pathlib.Path")
        if isinstance(self.content, Path) and not self.content.is_file():
            raise ValueError(f"Payload.content: {self.content} is not a readable file")
        if not self.content_type or "/" not in self.content_type:
            raise ValueError(
                f"Payload.content_type must be a MIME type like application/xml, got {self.content_type!r}"
            )

    def body(self) -> PartBody:
        return PartBody.from_path(self.content) if isinstance(self.content, Path) else PartBody.from_bytes(self.content)


@dataclass(frozen=True, slots=True)
class Submission:
    """What the sending application asks for.

    ``to_party`` is a (value, type) pair. ``cpa_id`` may be left out when exactly one agreement in force
    lets us send ``service``/``action`` to ``to_party``. ``ack_requested`` and ``duplicate_elimination``
    apply only where the agreement says perMessage (None: the MSH's default, see
    :class:`~msh.runtime.config.SendingSettings`); where it says always or never, asking otherwise is
    refused.
    """

    to_party: tuple[str, str | None]
    service: str
    action: str
    payloads: tuple[Payload, ...] = ()
    cpa_id: str | None = None
    service_type: str | None = None
    conversation_id: str | None = None
    ref_to_message_id: str | None = None
    time_to_live: datetime | None = None
    ack_requested: bool | None = None
    duplicate_elimination: bool | None = None
    from_role: str | None = None
    to_role: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.to_party, tuple) or len(self.to_party) != 2 or not self.to_party[0]:
            raise ValueError("Submission.to_party must be a (PartyId value, type) pair, e.g. ('987654321', None)")
        for name in ("service", "action"):
            if not getattr(self, name):
                raise ValueError(f"Submission.{name} must not be empty")
        if self.time_to_live is not None and self.time_to_live.tzinfo is None:
            raise ValueError("Submission.time_to_live must be timezone-aware (UTC)")
        ids = [p.content_id for p in self.payloads if p.content_id is not None]
        if len(ids) != len(set(ids)):
            raise ValueError("Submission.payloads must have distinct content_id values")


@dataclass(frozen=True, slots=True)
class Composed:
    """The message to send: its envelope, attachments, whether it asks for an acknowledgment, and whether it
    asks the next MSH (an intermediary) for one too (``hop_ack``, ebMS2 §10.1.3)."""

    envelope: Envelope
    attachments: tuple[AttachmentSpec, ...]
    ack_requested: bool
    duplicate_elimination: bool
    hop_ack: bool = False


def _choose(name: str, cpa_value: PerMessage, asked: bool | None, default: bool, cpaid: str) -> bool:
    # CPP/A 2.0 §8.4.8: always/never bind the message; perMessage leaves it to the message.
    if cpa_value is PerMessage.PER_MESSAGE:
        return default if asked is None else asked
    binding = cpa_value is PerMessage.ALWAYS
    if asked is not None and asked != binding:
        raise ConfigurationError(
            f"agreement {cpaid} says {name}={cpa_value.value}; the submission asked {name}={asked}: "
            f"leave {name} unset or follow the agreement"
        )
    return binding


def _ids(ids: Sequence[object]) -> tuple[PartyId, ...]:
    return tuple(PartyId(str(getattr(p, "value")), getattr(p, "type", None)) for p in ids)  # noqa: B009


def compose(
    params: SendingParameters,
    submission: Submission,
    *,
    message_id: str,
    now: datetime,
    conversation_id: str,
    content_id_domain: str,
    ack_default: bool = True,
    duplicate_elimination_default: bool = True,
    message_order: MessageOrder | None = None,
) -> Composed:
    """The envelope and attachments of ``submission`` sent under ``params`` (see the module docs);
    ``message_order``: its place in its conversation, required when the agreement guarantees order."""
    ordered = _check_order(params, submission, message_order)
    ack = _choose(
        "ackRequested", params.messaging.ack_requested, submission.ack_requested, ack_default or ordered, params.cpaid
    )
    de = _choose(
        "duplicateElimination",
        params.messaging.duplicate_elimination,
        submission.duplicate_elimination,
        duplicate_elimination_default or ordered,
        params.cpaid,
    )
    header = MessageHeader(
        from_party=Party(_ids(params.from_party.ids), params.from_party.role),
        to_party=Party(_ids(params.to_party.ids), params.to_party.role),
        cpa_id=params.cpaid,
        conversation_id=conversation_id,
        service=Service(params.service, params.service_type),
        action=params.action,
        message_data=MessageData(
            message_id=message_id,
            timestamp=now,
            ref_to_message_id=submission.ref_to_message_id,
            time_to_live=submission.time_to_live,
        ),
        # ebMS2 §3.1.7: DuplicateElimination asks the receiver to eliminate duplicates.
        duplicate_elimination=de,
    )
    attachments, references = _payloads(submission, message_id, content_id_domain)
    requested = _ack_requests(params, ack)
    hop = len(requested) == 2  # the second asks the intermediary (ebMS2 §10.1.3)
    envelope = Envelope(
        message_header=header,
        # ebMS2 §4.3: SyncReply asks for the signals on the same connection (CPP/A 2.0 §8.4.8.1).
        sync_reply=SyncReply() if params.messaging.sync_reply_mode is not SyncReplyMode.NONE else None,
        # ebMS2 §6.3.1: AckRequested, aimed at the agreement's actor (To Party MSH by default).
        ack_requested=requested,
        manifest=Manifest(tuple(references)) if references else None,
        # ebMS2 §9.1: the message's SequenceNumber in its conversation.
        message_order=message_order,
    )
    return Composed(envelope, tuple(attachments), ack, de, hop)


def _check_order(params: SendingParameters, submission: Submission, message_order: MessageOrder | None) -> bool:
    """Whether the agreement guarantees order; refuses a submission (or a call) that does not fit it."""
    ordered = is_ordered(params)
    if ordered != (message_order is not None):
        raise ValueError(
            f"agreement {params.cpaid} {'guarantees' if ordered else 'does not guarantee'} message order: "
            f"compose() needs {'a' if ordered else 'no'} message_order"
        )
    if ordered:
        # ebMS2 §9: "Reliable Messaging MUST be used when a MessageOrder element is present"; §9.1:
        # "DuplicateElimination MUST also be present".
        for name, asked in (
            ("ackRequested", submission.ack_requested),
            ("duplicateElimination", submission.duplicate_elimination),
        ):
            if asked is False:
                raise ConfigurationError(
                    f"agreement {params.cpaid} guarantees message order (MessageOrderSemantics Guaranteed): every "
                    f"message carries MessageOrder, which needs {name} (ebMS2 §9, §9.1); leave {name} unset"
                )
    return ordered


def _payloads(
    submission: Submission, message_id: str, content_id_domain: str
) -> tuple[list[AttachmentSpec], list[Reference]]:
    """The attachments of ``submission`` and their Manifest references."""
    attachments: list[AttachmentSpec] = []
    references: list[Reference] = []
    for i, payload in enumerate(submission.payloads, start=1):
        cid = payload.content_id or f"payload-{i}-{message_id.split('@', 1)[0]}@{content_id_domain}"
        attachments.append(AttachmentSpec(cid, payload.content_type, payload.body()))
        # ebMS2 §3.2.1: each payload is named in the Manifest by a cid: reference.
        references.append(Reference(href=f"cid:{cid.strip('<>')}"))
    return attachments, references


def _ack_requests(params: SendingParameters, ack: bool) -> tuple[AckRequested, ...]:
    """The AckRequested elements of a message that asks for an acknowledgment (``ack``) or not."""
    if not ack:
        return ()
    signed = params.messaging.ack_signature_requested is PerMessage.ALWAYS
    requested = (AckRequested(signed=signed, actor=params.messaging.actor or AckRequested().actor),)
    # ebMS2 §10.1.3, §6.6 rows 1 and 5: the agreement's nextMSH channel asks the intermediary as well
    # (perMessage follows the end-to-end choice; without an end-to-end request there is no second one).
    if params.messaging.next_msh_ack_requested is PerMessage.NEVER:
        return requested
    if params.messaging.sync_reply_mode is not SyncReplyMode.NONE:
        # ebMS2 §10.1.1: SyncReply and an AckRequested aimed at the next MSH never go together.
        raise ConfigurationError(
            f"agreement {params.cpaid} asks for SyncReply (syncReplyMode {params.messaging.sync_reply_mode.value})"
            f" and, through its nextMSH channel, for an intermediary's acknowledgment of {params.action}: ebMS2 "
            "§10.1.1 forbids both on one message; set syncReplyMode none on the sending channel"
        )
    hop_signed = params.messaging.next_msh_ack_signature_requested is PerMessage.ALWAYS
    return (*requested, AckRequested(signed=hop_signed, actor=ACTOR_NEXT_MSH))


def is_ordered(params: SendingParameters) -> bool:
    """Whether messages sent under ``params`` carry MessageOrder (the sending channel's
    MessageOrderSemantics is Guaranteed, CPP/A 2.0 §8.4.38; ebMS2 §9)."""
    rm = params.reliable_messaging
    return rm is not None and rm.message_order_semantics is MessageOrderSemantics.GUARANTEED


def new_message_id(domain: str) -> str:
    """A fresh MessageId (RFC 2822 msg-id form, ebMS2 §3.1.6.1): random hex @ ``domain``."""
    return f"{os.urandom(16).hex()}@{domain}"
