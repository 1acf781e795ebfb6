"""Answers remembered per agreement: what :mod:`cpa.resolve` and :mod:`cpa.check` compute once for an
agreement and a question (a route to send on, a header's shape to judge), kept while that agreement is the
one in use.

An agreement is an immutable object; loading it again (a reload, a new version under the same CPAId) makes
another object. The answers are kept per CPAId with the agreement object they were computed from:

* an answer is handed out only for that very object (identity, not equality: comparing two agreements field
  by field would cost more than the answer);
* the first question about another object of the same CPAId drops every answer of the old one, so a
  reloaded agreement is not kept alive by its answers (at most one object per CPAId is held);
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
    """Answers of type ``V`` to questions ``K`` about agreements (see the module docs). Thread-safe for the
    uses here: each step is one dictionary operation, and a lost race only computes an answer again."""

    __slots__ = ("_agreements", "_by_cpaid", "_per_agreement")

    def __init__(self, *, per_agreement: int, agreements: int) -> None:
        if per_agreement < 1 or agreements < 1:
            raise ValueError("an AgreementMemo keeps at least one answer of one agreement")
        self._per_agreement = per_agreement
        self._agreements = agreements
        self._by_cpaid: dict[str, tuple[CollaborationProtocolAgreement, dict[K, V]]] = {}

    def get(self, cpa: CollaborationProtocolAgreement, question: K) -> V | None:
        """The answer remembered for ``question`` about this very agreement object, or None."""
        entry = self._by_cpaid.get(cpa.cpaid)
        if entry is None or entry[0] is not cpa:
            return None
        return entry[1].get(question)

    def put(self, cpa: CollaborationProtocolAgreement, question: K, answer: V) -> None:
        """Remember ``answer``; forgets the answers of another object of the same CPAId."""
        entry = self._by_cpaid.get(cpa.cpaid)
        if entry is None or entry[0] is not cpa:
            if entry is None and len(self._by_cpaid) >= self._agreements:
                self._by_cpaid.clear()
            entry = (cpa, {})
            self._by_cpaid[cpa.cpaid] = entry
        answers = entry[1]
        if len(answers) >= self._per_agreement:
            answers.clear()
        answers[question] = answer

    def clear(self) -> None:
        """Forget every answer."""
        self._by_cpaid.clear()

    def held(self) -> tuple[CollaborationProtocolAgreement, ...]:
        """The agreement objects answers are kept for (at most one per CPAId)."""
        return tuple(cpa for cpa, _answers in self._by_cpaid.values())

    def __len__(self) -> int:
        """The number of answers kept, over all agreements."""
        return sum(len(answers) for _cpa, answers in self._by_cpaid.values())
