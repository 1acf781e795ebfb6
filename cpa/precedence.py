"""Which value wins when the CPA and the message header disagree (docs/design.md §4).

CPP/A 2.0 settles most messaging parameters with ``always | never | perMessage``: ``perMessage`` lets the
header decide; ``always`` / ``never`` require the header to agree. What a receiving MSH does when they do
not agree is its :class:`Reading` (a setting): ``strict`` (ebMS 2.0: an ``Inconsistent`` error of severity
Error, the draft's reading d), ``header`` (header wins silently, reading a), ``header-warn`` (header wins,
a Warning is returned, reading b) or ``cpa-warn`` (the CPA wins, a Warning is returned, reading c).

One table, :data:`HEADER_FORMS`, drives this for every parameter that has a header form: how its CPA value
reads as always/never/perMessage, which header element expresses it, where that element is (the XPath
used in ``eb:Error@location``) and which error code a disagreement gets. Parameters without a header form
(Retries, RetryInterval, PersistDuration) always come from the CPA and are not in the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from cpa.model import MessageOrderSemantics, PerMessage, SyncReplyMode
from msh.errors import ErrorCode, Issue, Severity

__all__ = [
    "HEADER_FORMS",
    "Decision",
    "HeaderForm",
    "Parameter",
    "Reading",
    "cpa_reading",
    "decide",
    "disagreement_severity",
]


class Reading(StrEnum):
    """docs/design.md §4: how a receiving MSH settles a CPA/header disagreement (the draft's readings a-d)."""

    STRICT = "strict"
    HEADER = "header"
    HEADER_WARN = "header-warn"
    CPA_WARN = "cpa-warn"


class Parameter(StrEnum):
    """The CPA messaging parameters that have a header form, named as in CPP/A 2.0."""

    ACK_REQUESTED = "ackRequested"
    ACK_SIGNATURE_REQUESTED = "ackSignatureRequested"
    DUPLICATE_ELIMINATION = "duplicateElimination"
    SYNC_REPLY_MODE = "syncReplyMode"
    MESSAGE_ORDER = "messageOrder"


@dataclass(frozen=True, slots=True)
class HeaderForm:
    """One row of the precedence table.

    ``cpa_values`` maps each CPA token of the parameter to always/never/perMessage; ``location`` is the
    XPath of the header element; ``present_when_never`` / ``absent_when_always`` are the error codes of
    the two ways the header can disagree with a binding CPA value; ``spec`` cites the rule.
    """

    parameter: Parameter
    header_form: str
    location: str
    cpa_values: MappingProxyType[str, PerMessage]
    present_when_never: ErrorCode
    absent_when_always: ErrorCode
    spec: str

    def allows(self, cpa_value: PerMessage) -> bool:
        """True when ``cpa_value`` is a value this parameter's CPA tokens can take."""
        return cpa_value in self.cpa_values.values()


_PER_MESSAGE_TOKENS: Final = MappingProxyType({p.value: p for p in PerMessage})

HEADER_FORMS: Final[MappingProxyType[Parameter, HeaderForm]] = MappingProxyType(
    {
        # ebMS2 §6.3.1, §6.4.2; CPP/A 2.0 §8.4.8.2: ackRequested always|never|perMessage.
        Parameter.ACK_REQUESTED: HeaderForm(
            Parameter.ACK_REQUESTED,
            "AckRequested (for the channel's actor, toPartyMSH by default)",
            "//Header/AckRequested",
            _PER_MESSAGE_TOKENS,
            ErrorCode.INCONSISTENT,
            ErrorCode.INCONSISTENT,
            "ebMS2 §6.3.1.2, §3.1.2",
        ),
        # ebMS2 §6.3.1.2: Inconsistent, severity Error when inconsistent with the CPA.
        Parameter.ACK_SIGNATURE_REQUESTED: HeaderForm(
            Parameter.ACK_SIGNATURE_REQUESTED,
            'AckRequested@signed="true"',
            "//Header/AckRequested/@signed",
            _PER_MESSAGE_TOKENS,
            ErrorCode.INCONSISTENT,
            ErrorCode.INCONSISTENT,
            "ebMS2 §6.3.1.2",
        ),
        # ebMS2 §6.4.1: never forbids DuplicateElimination; a mismatch is Inconsistent, severity Error.
        Parameter.DUPLICATE_ELIMINATION: HeaderForm(
            Parameter.DUPLICATE_ELIMINATION,
            "MessageHeader/DuplicateElimination",
            "//Header/MessageHeader/DuplicateElimination",
            _PER_MESSAGE_TOKENS,
            ErrorCode.INCONSISTENT,
            ErrorCode.INCONSISTENT,
            "ebMS2 §6.4.1",
        ),
        # ebMS2 §6.4.7: syncReplyMode other than none requires SyncReply; none with SyncReply is Inconsistent.
        Parameter.SYNC_REPLY_MODE: HeaderForm(
            Parameter.SYNC_REPLY_MODE,
            "SyncReply",
            "//Header/SyncReply",
            MappingProxyType(
                {m.value: (PerMessage.NEVER if m is SyncReplyMode.NONE else PerMessage.ALWAYS) for m in SyncReplyMode}
            ),
            ErrorCode.INCONSISTENT,
            ErrorCode.INCONSISTENT,
            "ebMS2 §6.4.7",
        ),
        # ebMS2 §9, §4.2.3.4.1: MessageOrder is a module; present where the CPA does not guarantee order it is
        # a module "not supported" (NotSupported); absent where the CPA guarantees order it is Inconsistent.
        Parameter.MESSAGE_ORDER: HeaderForm(
            Parameter.MESSAGE_ORDER,
            "MessageOrder",
            "//Header/MessageOrder",
            MappingProxyType(
                {
                    MessageOrderSemantics.GUARANTEED.value: PerMessage.ALWAYS,
                    MessageOrderSemantics.NOT_GUARANTEED.value: PerMessage.NEVER,
                }
            ),
            ErrorCode.NOT_SUPPORTED,
            ErrorCode.INCONSISTENT,
            "ebMS2 §9, §4.2.3.4.1",
        ),
    }
)


@dataclass(frozen=True, slots=True)
class Decision:
    """The value in force for one parameter of one message, and the issue to report (if any).

    Under ``strict`` a disagreement is an Error and the message is refused; ``effective`` is then the
    CPA's value (the agreement governs), for the record only.
    """

    effective: bool
    issue: Issue | None = None


def cpa_reading(parameter: Parameter, cpa_value: str) -> PerMessage:
    """How the CPA token ``cpa_value`` of ``parameter`` reads as always/never/perMessage.

    >>> cpa_reading(Parameter.SYNC_REPLY_MODE, "mshSignalsOnly")
    <PerMessage.ALWAYS: 'always'>
    """
    try:
        return HEADER_FORMS[parameter].cpa_values[str(cpa_value)]
    except KeyError:
        allowed = ", ".join(HEADER_FORMS[parameter].cpa_values)
        raise ValueError(f"{cpa_value!r} is not a CPA value of {parameter.value} (one of: {allowed})") from None


def disagreement_severity(reading: Reading) -> Severity | None:
    """The severity of a CPA/header disagreement under ``reading``; None when it is not reported."""
    # docs/design.md §4: strict is ebMS 2.0's Error (ebMS2 §3.1.2); a/header is silent; b and c warn.
    if reading is Reading.STRICT:
        return Severity.ERROR
    if reading is Reading.HEADER:
        return None
    return Severity.WARNING


def decide(
    parameter: Parameter,
    cpa_value: PerMessage,
    header_present: bool,
    reading: Reading = Reading.STRICT,
    *,
    cpa_token: str | None = None,
) -> Decision:
    """Settle ``parameter`` for one message from its CPA value and whether the header expresses it.

    ``cpa_token`` is the CPA's own spelling (``mshSignalsOnly``, ``NotGuaranteed``), used only in the
    description of an issue. Raises ValueError for a CPA value the parameter cannot have (perMessage for
    syncReplyMode or messageOrder).
    """
    form = HEADER_FORMS[parameter]
    if not form.allows(cpa_value):
        raise ValueError(f"{parameter.value} has no CPA value that reads as {cpa_value.value}")
    # CPP/A 2.0 §8.4.8: perMessage leaves the choice to the message.
    if cpa_value is PerMessage.PER_MESSAGE:
        return Decision(header_present)
    cpa_wants = cpa_value is PerMessage.ALWAYS
    if cpa_wants == header_present:
        return Decision(header_present)
    code = form.present_when_never if header_present else form.absent_when_always
    severity = disagreement_severity(reading)
    effective = cpa_wants if reading in (Reading.STRICT, Reading.CPA_WARN) else header_present
    if severity is None:
        return Decision(effective)
    shown = cpa_token or cpa_value.value
    state = "present" if header_present else "absent"
    outcome = {
        Reading.STRICT: "the message is refused",
        Reading.HEADER_WARN: "the header's choice is applied",
        Reading.CPA_WARN: "the agreement's choice is applied",
    }[reading]
    description = f"{form.header_form} is {state} but the CPA says {parameter.value}={shown} ({form.spec}); {outcome}"
    return Decision(effective, Issue(code, severity, description, form.location))
