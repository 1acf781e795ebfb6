"""cpa.memo: answers kept per agreement object, the oldest of a reloaded agreement's versions dropped, bounded."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cpa.memo import AgreementMemo
from cpa.resolve import Exchange, resolve
from tests.support.cpa_factory import A_ID, B_ID, NOW, make_cpa


def test_an_answer_is_handed_out_for_the_same_agreement_object_only() -> None:
    memo: AgreementMemo[str, int] = AgreementMemo(per_agreement=10, agreements=10)
    first, again = make_cpa(), make_cpa()  # equal agreements, two objects (a reload)
    memo.put(first, "q", 1)
    assert memo.get(first, "q") == 1
    assert memo.get(again, "q") is None
    assert memo.get(first, "other") is None


def test_a_reloaded_agreement_drops_the_answers_of_the_oldest_object() -> None:
    memo: AgreementMemo[str, int] = AgreementMemo(per_agreement=10, agreements=10, versions=2)
    first, second, third = make_cpa(), make_cpa(), make_cpa()  # three loads of one agreement
    memo.put(first, "q1", 1)
    memo.put(first, "q2", 2)
    memo.put(second, "q1", 3)
    assert (memo.get(first, "q1"), memo.get(second, "q1")) == (1, 3)  # two objects in use: both kept
    memo.put(third, "q1", 4)
    # The oldest object is no longer held (it may be garbage-collected) and none of its answers is left.
    assert memo.held() == (second, third)
    assert len(memo) == 2
    assert memo.get(first, "q2") is None and memo.get(third, "q1") == 4


def test_several_msh_in_one_process_keep_their_answers() -> None:
    # Each MSH of a process loads its own object of the agreement: by default four are kept side by side.
    memo: AgreementMemo[str, int] = AgreementMemo(per_agreement=10, agreements=10)
    loads = [make_cpa() for _ in range(4)]
    for _round in range(2):
        for number, cpa in enumerate(loads):
            if memo.get(cpa, "q") is None:
                memo.put(cpa, "q", number)
    assert [memo.get(cpa, "q") for cpa in loads] == [0, 1, 2, 3]


def test_agreements_of_other_cpaids_keep_their_answers() -> None:
    memo: AgreementMemo[str, int] = AgreementMemo(per_agreement=10, agreements=10)
    one, other = make_cpa(), make_cpa(cpaid="other")
    memo.put(one, "q", 1)
    memo.put(other, "q", 2)
    assert (memo.get(one, "q"), memo.get(other, "q")) == (1, 2)


def test_the_bounds_forget_whole_parts() -> None:
    memo: AgreementMemo[int, int] = AgreementMemo(per_agreement=3, agreements=2)
    cpa = make_cpa()
    for question in range(3):
        memo.put(cpa, question, question)
    memo.put(cpa, 3, 3)  # the fourth answer of one agreement: its three older ones are forgotten
    assert len(memo) == 1 and memo.get(cpa, 3) == 3 and memo.get(cpa, 0) is None
    memo.put(make_cpa(cpaid="two"), 0, 0)
    third = make_cpa(cpaid="three")
    memo.put(third, 0, 0)  # a third CPAId beyond the bound of two: the memo starts again
    assert memo.held() == (third,)


def test_bounds_must_keep_something() -> None:
    for bounds in ({"per_agreement": 0, "agreements": 1}, {"per_agreement": 1, "agreements": 1, "versions": 0}):
        with pytest.raises(ValueError, match="at least one"):
            AgreementMemo(**bounds)


def test_resolve_answers_for_the_reloaded_agreement() -> None:
    # A reload that changes the agreement under the same CPAId: the remembered resolution is recomputed (the
    # check's counterpart: tests/unit/cpa/test_check_memo.py).
    exchange = Exchange((A_ID.value, A_ID.type), (B_ID.value, B_ID.type), "urn:example:services:ordering", "NewOrder")
    before = resolve(make_cpa(retry_interval=timedelta(minutes=10)), exchange, now=NOW)
    after = resolve(make_cpa(retry_interval=timedelta(minutes=20)), exchange, now=NOW)
    assert before.reliable_messaging is not None and after.reliable_messaging is not None
    assert after.reliable_messaging.retry_interval != before.reliable_messaging.retry_interval
