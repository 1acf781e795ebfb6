"""Answers remembered per agreement: what :mod:`cpa.resolve` and :mod:`cpa.check` compute once for an
agreement and a question (a route to send on, a header's shape to judge), kept while that agreement is the
one in use.

An agreement is an immutable object; loading it again (a reload, a new version under the same CPAId) makes
another object. The answers are kept per CPAId with the agreement object they were computed from:

* an answer is handed out only for that very object (identity, not equality: comparing two agreements field
  by field would cost more than the answer);
* answers are kept for at most ``versions`` objects of one CPAId (4 by default): several MSHs in one
  process (the test network, an intermediary's parties) each load their own object of the same agreement,
  and each keeps its answers. One more object of that CPAId drops the answers of the oldest one (the first
  asked about), so the versions reloads leave behind are not kept alive by their answers for long;
* each agreement keeps at most ``per_agreement`` answers and the memo at most ``agreements`` CPAIds; past
  either bound that part is forgotten whole, so questions made up by a partner (random PartyIds in headers)
  cannot make it grow.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from cpa.model import CollaborationProtocolAgreement

__all__ = ["AgreementMemo"]

K = TypeVar("K")
V = TypeVar("V")


class AgreementMemo(Generic[K, V]):
    """Answers of type ``V`` to questions ``K`` about agreements (see the module docs). Safe to share between
    threads: a race between two of them can only make one compute an answer again."""

    __slots__ = ("_agreements", "_by_cpaid", "_per_agreement", "_versions")

    def __init__(self, *, per_agreement: int, agreements: int, versions: int = 4) -> None:
        if per_agreement < 1 or agreements < 1 or versions < 1:
            raise ValueError("an AgreementMemo keeps at least one answer of one agreement")
        self._per_agreement = per_agreement
        self._agreements = agreements
        self._versions = versions
        # Per CPAId, the objects asked about (in the order they were first asked about) and their answers.
        self._by_cpaid: dict[str, list[tuple[CollaborationProtocolAgreement, dict[K, V]]]] = {}

    def _answers(self, cpa: CollaborationProtocolAgreement) -> dict[K, V] | None:
        for kept, answers in self._by_cpaid.get(cpa.cpaid, ()):
            if kept is cpa:
                return answers
        return None

    def get(self, cpa: CollaborationProtocolAgreement, question: K) -> V | None:
        """The answer remembered for ``question`` about this very agreement object, or None."""
        answers = self._answers(cpa)
        return None if answers is None else answers.get(question)

    def put(self, cpa: CollaborationProtocolAgreement, question: K, answer: V) -> None:
        """Remember ``answer`` (see the module docs for what is forgotten to make room)."""
        answers = self._answers(cpa)
        if answers is None:
            kept = self._by_cpaid.get(cpa.cpaid)
            if kept is None:
                if len(self._by_cpaid) >= self._agreements:
                    self._by_cpaid.clear()
                kept = self._by_cpaid[cpa.cpaid] = []
            answers = {}
            kept.append((cpa, answers))
            if len(kept) > self._versions:
                del kept[0]
        elif len(answers) >= self._per_agreement:
            answers.clear()
        answers[question] = answer

    def clear(self) -> None:
        """Forget every answer."""
        self._by_cpaid.clear()

    def held(self) -> tuple[CollaborationProtocolAgreement, ...]:
        """The agreement objects answers are kept for (at most ``versions`` per CPAId)."""
        return tuple(cpa for kept in self._by_cpaid.values() for cpa, _answers in kept)

    def __len__(self) -> int:
        """The number of answers kept, over all agreements."""
        return sum(len(answers) for kept in self._by_cpaid.values() for _cpa, answers in kept)
