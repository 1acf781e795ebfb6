"""Is an inbound message allowed by its agreement? The ebMS errors a receiving MSH returns if not.

:func:`check` reads the header of a received message against the CPA its CPAId names and returns the
issues another ebMS 2.0 implementation would report, with their ``errorCode``, ``severity`` and
``location`` (an XPath in the style ``//Header/MessageHeader/From/PartyId``), plus the value in force
for each parameter that has a header form (``effective``), so the engine acts on one settled answer.

Decisions where the specifications leave room:

* An agreement that is not agreed/signed, or not in force at ``now`` (Start <= now < End), is reported as
  ``Inconsistent`` / Error at ``//Header/MessageHeader/CPAId``: the CPAId is recognised (so not
  ``ValueNotRecognized``) but the message conflicts with it (ebMS2 §3.1.2: "If a Receiving MSH detects an
  inconsistency, then it MUST report it with an errorCode of Inconsistent and a severity of Error").
* Every PartyId of From (resp. To) must be one the agreement lists for that party, value and type exactly;
  a header PartyId the party does not list is ``Inconsistent`` (ebMS2 §3.1.2).
* A Role is compared with the CPA's Role@name of that party's CollaborationRoles (ebMS2 §3.1.1.2: the
  value "is specified in the CPA"; the ebXML messaging TC settled on Role/@name, not its xlink:href).
* Parameters are taken from the From party's sending channel (its CanSend binding's first channel), the
  same channel :func:`cpa.resolve.resolve` uses, so a header built from a resolution passes.
* AckRequested is looked for under the channel's ``actor`` (toPartyMSH unless it says nextMSH).
  ackSignatureRequested is judged only when that AckRequested is present (its ``signed`` attribute).
* MSH signals (Service ``urn:oasis:names:tc:ebxml-msg:service``) use the parties' defaultMshChannel
  (CPP/A 2.0 §8.4.1); on them only ``never`` binds, since an Acknowledgment or Error message must not
  request an acknowledgment (ebMS2 §6.3.1.4) and signals answer rather than ask for replies.
* TimeToLive earlier than or equal to Timestamp + (Retries + 1) * RetryInterval on a reliable message is
  ``Inconsistent`` with severity Warning (none under the ``header`` reading): ebMS2 §6.4.5 binds the
  sender's choice, but the message can still be processed (ebMS2 §4.2.3.2.4: Warning), and refusing it
  would turn a shortened retry schedule into a certain failure. The PersistDuration bound of ebMS2 §6.4.6
  is not checked: the real agreements set PersistDuration = (Retries + 1) * RetryInterval, which makes the
  two bounds exclusive of each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final

from cpa.duration import XsDuration
from cpa.memo import AgreementMemo
from cpa.model import CollaborationProtocolAgreement, DeliveryChannel, MessageOrderSemantics, PartyInfo, PerMessage
from cpa.precedence import Decision, Parameter, Reading, cpa_reading, decide
from cpa.registry import CpaRegistry
from cpa.resolve import (
    IN_FORCE,
    MSH_SIGNAL_ACTIONS,
    PartyKey,
    action_bindings,
    matching_parties,
    party_keys,
)
from msh.ebms.model import Actor, Envelope, MessageHeader
from msh.ebms.namespaces import ACTOR_NEXT_MSH, SERVICE_MSH
from msh.errors import ErrorCode, Issue, Severity

__all__ = [
    "ACTION",
    "CPA_ID",
    "FROM_PARTY_ID",
    "FROM_ROLE",
    "MESSAGE_ORDER",
    "SERVICE",
    "SERVICE_TYPE",
    "TIME_TO_LIVE",
    "TO_PARTY_ID",
    "TO_ROLE",
    "CheckResult",
    "check",
    "clear_cache",
    "time_to_live_floor",
]

# ebMS2 §4.2.3.2.5: locations, as XPath expressions into the offending message.
CPA_ID: Final = "//Header/MessageHeader/CPAId"
FROM_PARTY_ID: Final = "//Header/MessageHeader/From/PartyId"
TO_PARTY_ID: Final = "//Header/MessageHeader/To/PartyId"
FROM_ROLE: Final = "//Header/MessageHeader/From/Role"
TO_ROLE: Final = "//Header/MessageHeader/To/Role"
SERVICE: Final = "//Header/MessageHeader/Service"
SERVICE_TYPE: Final = "//Header/MessageHeader/Service/@type"
ACTION: Final = "//Header/MessageHeader/Action"
TIME_TO_LIVE: Final = "//Header/MessageHeader/MessageData/TimeToLive"
MESSAGE_ORDER: Final = "//Header/MessageOrder"
MESSAGE_HEADER: Final = "//Header/MessageHeader"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What :func:`check` found.

    ``issues`` are the ebMS errors to report (none: the agreement allows the message). ``effective`` maps
    each :class:`~cpa.precedence.Parameter` value (``ackRequested``, ``duplicateElimination`` ...) to the
    choice in force for this message after :func:`~cpa.precedence.decide` (the header's presence where
    no channel could be determined). ``cpa`` and the channel ids are those the message was judged by.
    """

    issues: tuple[Issue, ...]
    effective: Mapping[str, bool] = field(default_factory=dict)
    cpa: CollaborationProtocolAgreement | None = None
    sending_channel_id: str | None = None
    receiving_channel_id: str | None = None

    @property
    def errors(self) -> tuple[Issue, ...]:
        """The issues of severity Error (the message must not be processed if there is one)."""
        return tuple(i for i in self.issues if i.severity is Severity.ERROR)

    @property
    def ok(self) -> bool:
        """True when no issue is an Error (Warnings let processing go on, ebMS2 §4.2.3.2.4)."""
        return not self.errors


def _utc(t: datetime) -> datetime:
    # ebMS2 §3.1.6.2/§3.1.6.4: Timestamp and TimeToLive are UTC; a value without offset is read as UTC.
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def _keys_text(keys: tuple[PartyKey, ...]) -> str:
    return ", ".join(f"{v!r} (type {t!r})" for v, t in keys)


def _ids_text(info: PartyInfo) -> str:
    return ", ".join(f"{p.value!r} (type {p.type!r})" for p in info.party_ids)


def _header_effective(envelope: Envelope, header: MessageHeader, actor: Actor) -> dict[str, bool]:
    ack = envelope.ack_requested_for(actor)
    return {
        Parameter.ACK_REQUESTED.value: ack is not None,
        Parameter.ACK_SIGNATURE_REQUESTED.value: ack is not None and ack.signed,
        Parameter.DUPLICATE_ELIMINATION.value: header.duplicate_elimination,
        Parameter.SYNC_REPLY_MODE.value: envelope.sync_reply is not None,
        Parameter.MESSAGE_ORDER.value: envelope.message_order is not None,
    }


def _agreement_issue(cpa: CollaborationProtocolAgreement, now: datetime) -> Issue | None:
    # ebMS2 §3.1.2: a message conflicting with its CPA is Inconsistent, severity Error.
    if cpa.status not in IN_FORCE:
        text = f"agreement {cpa.cpaid!r} has Status {cpa.status.value!r}, not agreed"
    elif now < cpa.start:
        text = f"agreement {cpa.cpaid!r} is not yet in force (Start {cpa.start.isoformat()})"
    elif now >= cpa.end:
        text = f"agreement {cpa.cpaid!r} is no longer in force (End {cpa.end.isoformat()})"
    else:
        return None
    return Issue(ErrorCode.INCONSISTENT, Severity.ERROR, text + " (ebMS2 §3.1.2, CPP/A 2.0 §9.4)", CPA_ID)


def _party_issues(
    cpa: CollaborationProtocolAgreement, header: MessageHeader
) -> tuple[list[Issue], PartyInfo | None, PartyInfo | None]:
    issues: list[Issue] = []
    from_keys, to_keys = party_keys(header.from_party), party_keys(header.to_party)
    senders, receivers = matching_parties(cpa, from_keys), matching_parties(cpa, to_keys)
    a, b = cpa.party_infos
    parties = f"its parties are {a.party_name} [{_ids_text(a)}] and {b.party_name} [{_ids_text(b)}]"
    # ebMS2 §3.1.1.1, §3.1.2: the From and To PartyIds must be the agreement's two parties.
    if not senders:
        issues.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.ERROR,
                f"From {_keys_text(from_keys)} is not a party of agreement {cpa.cpaid!r}; {parties}",
                FROM_PARTY_ID,
            )
        )
    if not receivers:
        issues.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.ERROR,
                f"To {_keys_text(to_keys)} is not a party of agreement {cpa.cpaid!r}; {parties}",
                TO_PARTY_ID,
            )
        )
    pairs = [(f, t) for f in senders for t in receivers if f is not t]
    if senders and receivers and not pairs:
        issues.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.ERROR,
                f"From and To name the same party of agreement {cpa.cpaid!r}; {parties}",
                TO_PARTY_ID,
            )
        )
    if not pairs:
        return issues, None, None
    sender, receiver = pairs[0]
    # ebMS2 §3.1.1: every PartyId of From (To) identifies the same party; each must be one the CPA lists.
    for info, keys, location, which in (
        (sender, from_keys, FROM_PARTY_ID, "From"),
        (receiver, to_keys, TO_PARTY_ID, "To"),
    ):
        listed = {(p.value, p.type) for p in info.party_ids}
        extra = tuple(k for k in keys if k not in listed)
        if extra:
            issues.append(
                Issue(
                    ErrorCode.INCONSISTENT,
                    Severity.ERROR,
                    f"{which} PartyId {_keys_text(extra)} is not a PartyId of {info.party_name} in "
                    f"agreement {cpa.cpaid!r} (it has {_ids_text(info)})",
                    location,
                )
            )
    return issues, sender, receiver


def _role_ok(info: PartyInfo, role: str | None, location: str, which: str, issues: list[Issue]) -> str | None:
    """The role to restrict bindings to: ``role`` when it is one of ``info``'s, else None (and an issue)."""
    if role is None:
        return None
    names = list(dict.fromkeys(cr.role for cr in info.collaboration_roles))
    if role in names:
        return role
    # ebMS2 §3.1.1.2: the Role is one the CPA gives the party.
    issues.append(
        Issue(
            ErrorCode.VALUE_NOT_RECOGNIZED,
            Severity.ERROR,
            f"{which} Role {role!r} is not a role of {info.party_name} (its roles: {', '.join(names)})",
            location,
        )
    )
    return None


def _channels(
    cpa: CollaborationProtocolAgreement,
    header: MessageHeader,
    sender: PartyInfo,
    receiver: PartyInfo,
    issues: list[Issue],
) -> tuple[DeliveryChannel, DeliveryChannel] | None:
    """The sending and receiving channels of the message, or None (and an issue) when none is bound."""
    service, stype, action = header.service.value, header.service.type, header.action
    if service == SERVICE_MSH:
        if action not in MSH_SIGNAL_ACTIONS:
            # ebMS2 §7, §8: a service of the MSH this MSH does not support is answered NotSupported, Error.
            issues.append(
                Issue(
                    ErrorCode.NOT_SUPPORTED,
                    Severity.ERROR,
                    f"Action {action!r} is a service of the MSH not supported here (the MSH service's actions: "
                    f"{', '.join(sorted(MSH_SIGNAL_ACTIONS))})",
                    ACTION,
                )
            )
            return None
        # CPP/A 2.0 §8.4.1: MSH signals travel on the parties' default MSH channels.
        return sender.default_msh_channel, receiver.default_msh_channel
    from_role = _role_ok(sender, header.from_party.role, FROM_ROLE, "From", issues)
    to_role = _role_ok(receiver, header.to_party.role, TO_ROLE, "To", issues)
    sends = action_bindings(sender, receive=False, role=from_role)
    receives = action_bindings(receiver, receive=True, role=to_role)
    allowed = [k for k in sends if k in receives]
    key = (service, stype, action)
    if key in receives and key in sends:
        return sends[key][0][1].channels[0], receives[key][0][1].channels[0]
    # CPP/A 2.0 §8.4.11-§8.4.15: From must CanSend and To CanReceive this service, type and action.
    direction = f"{sender.party_name} to {receiver.party_name} under agreement {cpa.cpaid!r}"
    if not any(k[0] == service for k in allowed):
        services = ", ".join(dict.fromkeys(k[0] for k in allowed)) or "none"
        issues.append(
            Issue(
                ErrorCode.VALUE_NOT_RECOGNIZED,
                Severity.ERROR,
                f"Service {service!r} is not one {direction} allows (allowed: {services})",
                SERVICE,
            )
        )
    elif not any(k[0] == service and k[1] == stype for k in allowed):
        types = ", ".join(repr(k[1]) for k in dict.fromkeys(k for k in allowed if k[0] == service))
        issues.append(
            Issue(
                ErrorCode.VALUE_NOT_RECOGNIZED,
                Severity.ERROR,
                f"Service type {stype!r} of {service!r} is not one {direction} allows (allowed: {types})",
                SERVICE_TYPE,
            )
        )
    else:
        actions = ", ".join(k[2] for k in allowed if k[0] == service and k[1] == stype)
        issues.append(
            Issue(
                ErrorCode.VALUE_NOT_RECOGNIZED,
                Severity.ERROR,
                f"Action {action!r} of service {service!r} is not one {direction} allows (allowed: {actions})",
                ACTION,
            )
        )
    return None


def _precedence(
    envelope: Envelope,
    header: MessageHeader,
    sending: DeliveryChannel,
    reading: Reading,
    signal: bool,
    effective: dict[str, bool],
    issues: list[Issue],
) -> None:
    mc = sending.messaging_characteristics
    sender_binding = sending.doc_exchange.sender_binding
    rm = sender_binding.reliable_messaging if sender_binding is not None else None
    order = rm.message_order_semantics if rm is not None else MessageOrderSemantics.NOT_GUARANTEED
    actor = Actor.NEXT_MSH if mc.actor == ACTOR_NEXT_MSH else Actor.TO_PARTY_MSH
    ack = envelope.ack_requested_for(actor)

    def settle(parameter: Parameter, value: PerMessage, present: bool, token: str | None = None) -> Decision:
        # ebMS2 §6.3.1.4: signals do not ask for acknowledgments or replies; only "never" binds them.
        d = (
            Decision(present)
            if signal and value is PerMessage.ALWAYS
            else decide(parameter, value, present, reading, cpa_token=token)
        )
        effective[parameter.value] = d.effective
        if d.issue is not None:
            issues.append(d.issue)
        return d

    settle(Parameter.DUPLICATE_ELIMINATION, mc.duplicate_elimination, header.duplicate_elimination)
    acked = settle(Parameter.ACK_REQUESTED, mc.ack_requested, ack is not None)
    if ack is not None:
        settle(Parameter.ACK_SIGNATURE_REQUESTED, mc.ack_signature_requested, ack.signed)
    else:
        effective[Parameter.ACK_SIGNATURE_REQUESTED.value] = (
            acked.effective and mc.ack_signature_requested is PerMessage.ALWAYS
        )
    sync = mc.sync_reply_mode.value
    settle(
        Parameter.SYNC_REPLY_MODE, cpa_reading(Parameter.SYNC_REPLY_MODE, sync), envelope.sync_reply is not None, sync
    )
    settle(
        Parameter.MESSAGE_ORDER,
        cpa_reading(Parameter.MESSAGE_ORDER, order.value),
        envelope.message_order is not None,
        order.value,
    )


def _time_to_live(
    header: MessageHeader,
    sending: DeliveryChannel | None,
    reliable: bool,
    now: datetime,
    accuracy: timedelta,
    reading: Reading,
    issues: list[Issue],
) -> None:
    data = header.message_data
    if data.time_to_live is None:
        return
    ttl = _utc(data.time_to_live)
    # ebMS2 §3.1.6.4, §4.2.3.4.2: expired when the receiver's clock (less its accuracy) is past TimeToLive.
    if ttl < now - accuracy:
        issues.append(
            Issue(
                ErrorCode.TIME_TO_LIVE_EXPIRED,
                Severity.ERROR,
                f"TimeToLive {ttl.isoformat()} has passed (received at {now.isoformat()}, clock "
                f"accuracy {accuracy}) (ebMS2 §3.1.6.4)",
                TIME_TO_LIVE,
            )
        )
    binding = sending.doc_exchange.sender_binding if sending is not None else None
    rm = binding.reliable_messaging if binding is not None else None
    if rm is None or not reliable or reading is Reading.HEADER:
        return
    # ebMS2 §6.4.5: TimeToLive > Timestamp + (Retries + 1) * RetryInterval; Warning per §4.2.3.2.4 (see docs).
    floor = time_to_live_floor(rm.retries, rm.retry_interval, _utc(data.timestamp))
    if ttl <= floor:
        issues.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.WARNING,
                f"TimeToLive {ttl.isoformat()} is not after Timestamp + (Retries + 1) * RetryInterval = "
                f"{floor.isoformat()} (Retries {rm.retries}, RetryInterval {rm.retry_interval}; "
                f"ebMS2 §6.4.5): the sender cannot retry as agreed",
                TIME_TO_LIVE,
            )
        )


def time_to_live_floor(retries: int, retry_interval: XsDuration, timestamp: datetime) -> datetime:
    """The instant a reliably sent message's TimeToLive must be after (ebMS2 §6.4.5: "TimeToLive >
    Timestamp + ((Retries + 1) * RetryInterval)"); the product is a duration (months kept) added to the
    Timestamp as XML Schema Part 2 Appendix E does."""
    return ((retries + 1) * retry_interval).add_to_or_latest(timestamp)


def _header_rules(envelope: Envelope, header: MessageHeader, issues: list[Issue]) -> None:
    if envelope.message_order is None:
        return
    # ebMS2 §9.2: MessageOrder must not come with SyncReply (Inconsistent, Error).
    if envelope.sync_reply is not None:
        issues.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.ERROR,
                "MessageOrder and SyncReply are both present (ebMS2 §9.2)",
                MESSAGE_ORDER,
            )
        )
    # ebMS2 §9.1: MessageOrder requires DuplicateElimination.
    if not header.duplicate_elimination:
        issues.append(
            Issue(
                ErrorCode.INCONSISTENT,
                Severity.ERROR,
                "MessageOrder is present without DuplicateElimination (ebMS2 §9.1)",
                MESSAGE_ORDER,
            )
        )


def check(
    envelope: Envelope,
    registry_or_cpa: CpaRegistry | CollaborationProtocolAgreement,
    *,
    now: datetime,
    reading: Reading = Reading.STRICT,
    msh_time_accuracy: timedelta = timedelta(0),
) -> CheckResult:
    """Judge the header of a received message against its agreement (see the module docs).

    ``registry_or_cpa`` is a registry (the CPA is looked up by the header's CPAId) or one agreement (which
    must carry that CPAId). ``reading`` settles CPA/header disagreements (docs/design.md §4);
    ``msh_time_accuracy`` is the clock tolerance of TimeToLive checks (docs/design.md §3).

    What depends only on the agreement and the header's shape (its parties, roles, service, action and the
    presence of its elements) is computed once per agreement object and remembered; the agreement's period
    and TimeToLive are judged at every call (:func:`clear_cache` forgets what was remembered).
    """
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware (UTC), got {now!r}")
    header = envelope.message_header
    if header is None:
        # ebMS2 §3.1: every ebXML message has a MessageHeader.
        issue = Issue(
            ErrorCode.OTHER_XML, Severity.ERROR, "the message has no MessageHeader (ebMS2 §3.1)", MESSAGE_HEADER
        )
        return CheckResult((issue,))
    if isinstance(registry_or_cpa, CpaRegistry):
        cpa = registry_or_cpa.get(header.cpa_id)
    else:
        cpa = registry_or_cpa if registry_or_cpa.cpaid == header.cpa_id else None
    if cpa is None:
        # ebMS2 §3.1.2: an unrecognised CPAId is reported as (Value)NotRecognized, severity Error.
        issue = Issue(
            ErrorCode.VALUE_NOT_RECOGNIZED,
            Severity.ERROR,
            f"CPAId {header.cpa_id!r} names no agreement known here (ebMS2 §3.1.2)",
            CPA_ID,
        )
        return CheckResult((issue,), _header_effective(envelope, header, Actor.TO_PARTY_MSH))
    issues: list[Issue] = []
    agreement = _agreement_issue(cpa, now)
    if agreement is not None:
        issues.append(agreement)
    judged = _judged(cpa, envelope, header, reading)
    issues.extend(judged.issues)
    channels = judged.channels
    signal = header.service.value == SERVICE_MSH
    reliable = judged.effective[Parameter.ACK_REQUESTED.value] and not signal
    _time_to_live(header, channels[0] if channels else None, reliable, now, msh_time_accuracy, reading, issues)
    return CheckResult(
        tuple(issues),
        dict(judged.effective),
        cpa,
        channels[0].channel_id if channels else None,
        channels[1].channel_id if channels else None,
    )


@dataclass(frozen=True, slots=True)
class _Judged:
    """What :func:`check` finds from the agreement and the header's shape alone, whatever the time: the
    parties', roles' and binding's issues, the precedence decisions and the header rules, in that order."""

    issues: tuple[Issue, ...]
    effective: Mapping[str, bool]
    channels: tuple[DeliveryChannel, DeliveryChannel] | None


# Headers of one agreement's traffic come in few shapes: the answer for a shape is computed once per
# agreement object (cpa.memo: bounded, so made-up shapes cannot grow it and reloaded versions are let go).
_judged_cache: Final[AgreementMemo[tuple[object, ...], _Judged]] = AgreementMemo(per_agreement=1_024, agreements=20_000)


def clear_cache() -> None:
    """Forget every remembered judgment (see :mod:`cpa.memo` for what is kept, and for how long)."""
    _judged_cache.clear()


def _shape(envelope: Envelope, header: MessageHeader, reading: Reading) -> tuple[object, ...]:
    """Every value of the header and envelope that :func:`_judge` reads (the memo's question)."""
    return (
        party_keys(header.from_party),
        header.from_party.role,
        party_keys(header.to_party),
        header.to_party.role,
        header.service.value,
        header.service.type,
        header.action,
        header.duplicate_elimination,
        tuple((a.is_to_party_msh, a.is_next_msh, a.signed) for a in envelope.ack_requested),
        envelope.sync_reply is not None,
        envelope.message_order is not None,
        reading,
    )


def _judged(
    cpa: CollaborationProtocolAgreement, envelope: Envelope, header: MessageHeader, reading: Reading
) -> _Judged:
    shape = _shape(envelope, header, reading)
    judged = _judged_cache.get(cpa, shape)
    if judged is None:
        judged = _judge(cpa, envelope, header, reading)
        _judged_cache.put(cpa, shape, judged)
    return judged


def _judge(cpa: CollaborationProtocolAgreement, envelope: Envelope, header: MessageHeader, reading: Reading) -> _Judged:
    issues: list[Issue] = []
    effective = _header_effective(envelope, header, Actor.TO_PARTY_MSH)
    party_issues, sender, receiver = _party_issues(cpa, header)
    issues.extend(party_issues)
    channels = None
    signal = header.service.value == SERVICE_MSH
    if sender is not None and receiver is not None:
        if signal:
            _role_ok(sender, header.from_party.role, FROM_ROLE, "From", issues)
            _role_ok(receiver, header.to_party.role, TO_ROLE, "To", issues)
        channels = _channels(cpa, header, sender, receiver, issues)
    if channels is not None:
        mc = channels[0].messaging_characteristics
        if mc.actor == ACTOR_NEXT_MSH:
            effective = _header_effective(envelope, header, Actor.NEXT_MSH)
        _precedence(envelope, header, channels[0], reading, signal, effective, issues)
    _header_rules(envelope, header, issues)
    return _Judged(tuple(issues), effective, channels)
