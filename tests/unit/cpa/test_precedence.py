"""docs/design.md §4: which value wins, CPA or header, for every parameter x CPA value x header x reading."""

from __future__ import annotations

import pytest

from cpa.model import MessageOrderSemantics, PerMessage, SyncReplyMode
from cpa.precedence import (
    HEADER_FORMS,
    Decision,
    Parameter,
    Reading,
    cpa_reading,
    decide,
    disagreement_severity,
)
from msh.errors import ErrorCode, Severity

ACK = Parameter.ACK_REQUESTED
SIG = Parameter.ACK_SIGNATURE_REQUESTED
DUP = Parameter.DUPLICATE_ELIMINATION
SYNC = Parameter.SYNC_REPLY_MODE
ORDER = Parameter.MESSAGE_ORDER
ALWAYS, NEVER, PER = PerMessage.ALWAYS, PerMessage.NEVER, PerMessage.PER_MESSAGE
INC, NSUP = ErrorCode.INCONSISTENT, ErrorCode.NOT_SUPPORTED
ERR, WARN = Severity.ERROR, Severity.WARNING

# An outcome is (effective, error code, severity); INVALID: the CPA cannot have that value (ValueError).
T = (True, None, None)
F = (False, None, None)
INVALID = "invalid"

# parameter, CPA value, header present:  strict,  header,  header-warn,  cpa-warn
TABLE = [
    (ACK, ALWAYS, True, T, T, T, T),
    (ACK, ALWAYS, False, (True, INC, ERR), F, (False, INC, WARN), (True, INC, WARN)),
    (ACK, NEVER, True, (False, INC, ERR), T, (True, INC, WARN), (False, INC, WARN)),
    (ACK, NEVER, False, F, F, F, F),
    (ACK, PER, True, T, T, T, T),
    (ACK, PER, False, F, F, F, F),
    (SIG, ALWAYS, True, T, T, T, T),
    (SIG, ALWAYS, False, (True, INC, ERR), F, (False, INC, WARN), (True, INC, WARN)),
    (SIG, NEVER, True, (False, INC, ERR), T, (True, INC, WARN), (False, INC, WARN)),
    (SIG, NEVER, False, F, F, F, F),
    (SIG, PER, True, T, T, T, T),
    (SIG, PER, False, F, F, F, F),
    (DUP, ALWAYS, True, T, T, T, T),
    (DUP, ALWAYS, False, (True, INC, ERR), F, (False, INC, WARN), (True, INC, WARN)),
    (DUP, NEVER, True, (False, INC, ERR), T, (True, INC, WARN), (False, INC, WARN)),
    (DUP, NEVER, False, F, F, F, F),
    (DUP, PER, True, T, T, T, T),
    (DUP, PER, False, F, F, F, F),
    (SYNC, ALWAYS, True, T, T, T, T),
    (SYNC, ALWAYS, False, (True, INC, ERR), F, (False, INC, WARN), (True, INC, WARN)),
    (SYNC, NEVER, True, (False, INC, ERR), T, (True, INC, WARN), (False, INC, WARN)),
    (SYNC, NEVER, False, F, F, F, F),
    (SYNC, PER, True, INVALID, INVALID, INVALID, INVALID),
    (SYNC, PER, False, INVALID, INVALID, INVALID, INVALID),
    (ORDER, ALWAYS, True, T, T, T, T),
    (ORDER, ALWAYS, False, (True, INC, ERR), F, (False, INC, WARN), (True, INC, WARN)),
    (ORDER, NEVER, True, (False, NSUP, ERR), T, (True, NSUP, WARN), (False, NSUP, WARN)),
    (ORDER, NEVER, False, F, F, F, F),
    (ORDER, PER, True, INVALID, INVALID, INVALID, INVALID),
    (ORDER, PER, False, INVALID, INVALID, INVALID, INVALID),
]
READINGS = (Reading.STRICT, Reading.HEADER, Reading.HEADER_WARN, Reading.CPA_WARN)
LOCATIONS = {
    ACK: "//Header/AckRequested",
    SIG: "//Header/AckRequested/@signed",
    DUP: "//Header/MessageHeader/DuplicateElimination",
    SYNC: "//Header/SyncReply",
    ORDER: "//Header/MessageOrder",
}
CASES = [
    pytest.param(
        p,
        cpa,
        present,
        reading,
        outcomes[i],
        id=f"{p.value}-{cpa.value}-{'present' if present else 'absent'}-{reading.value}",
    )
    for (p, cpa, present, *outcomes) in TABLE
    for i, reading in enumerate(READINGS)
]


def test_the_table_covers_every_combination() -> None:
    assert len(CASES) == len(Parameter) * len(PerMessage) * 2 * len(Reading) == 120
    assert {(p, c, h) for p, c, h, *_ in TABLE} == {
        (p, c, h) for p in Parameter for c in PerMessage for h in (True, False)
    }


@pytest.mark.parametrize(("parameter", "cpa_value", "present", "reading", "expected"), CASES)
def test_decide(parameter: Parameter, cpa_value: PerMessage, present: bool, reading: Reading, expected: object) -> None:
    if expected == INVALID:
        with pytest.raises(ValueError, match=f"{parameter.value} has no CPA value that reads as perMessage"):
            decide(parameter, cpa_value, present, reading)
        return
    assert isinstance(expected, tuple)
    effective, code, severity = expected
    decision = decide(parameter, cpa_value, present, reading)
    assert decision.effective is effective
    if code is None:
        assert decision.issue is None
    else:
        assert decision.issue is not None
        assert (decision.issue.error_code, decision.issue.severity) == (code, severity)
        assert decision.issue.location == LOCATIONS[parameter]
        assert parameter.value in decision.issue.description


def test_cpa_tokens_read_as_always_never_per_message() -> None:
    assert cpa_reading(SYNC, SyncReplyMode.NONE) is NEVER
    for mode in ("mshSignalsOnly", "signalsOnly", "signalsAndResponse", "responseOnly"):
        assert cpa_reading(SYNC, mode) is ALWAYS
    assert cpa_reading(ORDER, MessageOrderSemantics.GUARANTEED) is ALWAYS
    assert cpa_reading(ORDER, "NotGuaranteed") is NEVER
    assert cpa_reading(ACK, "perMessage") is PER
    assert cpa_reading(DUP, "never") is NEVER
    with pytest.raises(ValueError, match="'sometimes' is not a CPA value of ackRequested"):
        cpa_reading(ACK, "sometimes")
    with pytest.raises(ValueError, match="not a CPA value of messageOrder"):
        cpa_reading(ORDER, "perMessage")


def test_table_rows_name_their_header_elements() -> None:
    assert {p: f.location for p, f in HEADER_FORMS.items()} == LOCATIONS
    assert HEADER_FORMS[ORDER].present_when_never is NSUP
    assert HEADER_FORMS[ORDER].absent_when_always is INC
    assert all(f.present_when_never is INC for p, f in HEADER_FORMS.items() if p is not ORDER)


def test_description_uses_the_cpa_spelling_and_says_what_happens() -> None:
    issue = decide(SYNC, ALWAYS, False, Reading.STRICT, cpa_token="mshSignalsOnly").issue
    assert issue is not None
    assert "syncReplyMode=mshSignalsOnly" in issue.description
    assert "SyncReply is absent" in issue.description
    assert "refused" in issue.description
    warn = decide(DUP, NEVER, True, Reading.CPA_WARN).issue
    assert warn is not None and "agreement's choice is applied" in warn.description


def test_disagreement_severity_per_reading() -> None:
    assert [disagreement_severity(r) for r in READINGS] == [ERR, None, WARN, WARN]
    assert decide(ACK, ALWAYS, True) == Decision(True)
