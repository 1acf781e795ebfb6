"""Questions this MSH has asked a partner and awaits the answer to: its Pings (ebMS2 §8) and StatusRequests
(§7), by the MessageId of the request.

A request is asked by :mod:`msh.runtime.services`, which registers it here before sending it; its answer (a
Pong, a StatusResponse) may come back on the connection or later, asynchronously, to our endpoint. Either
way the inbound pipeline commits the answer, and the executor, in that unit of work, *claims* the question
the answer names (its MessageData/RefToMessageId), when it comes from the party asked under the agreement
asked under; after the commit it hands the answer to whoever waits (:meth:`Question.answered`). The one
waiting claims the question itself when its time is up: exactly one of the two owns each question, so an
answer is acted on once (a status question asked in place of a resend resends at most once, docs/design.md
§5.1).

Nothing here is stored: a question lives as long as the process that asked it. An answer that arrives in
another process (``msh serve`` beside the command that asked, or another server on the same PostgreSQL
store) is found in the journal instead (``signal-Pong``, ``signal-StatusResponse``), which is where a
separate process looks (:func:`msh.runtime.service_answers.await_answer`).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import datetime

from msh.ebms.model import MessageStatus

__all__ = ["Answer", "Question", "Questions"]


@dataclass(frozen=True, slots=True)
class Answer:
    """The Pong or StatusResponse that answered one of our requests, as this MSH received it.

    ``at`` is when it was received here; ``message_status`` and ``timestamp`` are the StatusResponse's
    (ebMS2 §7.3.2, §7.3.3); ``on_connection``: it came back on the connection of the request; ``fed``: it
    has already been handed to the sending state machine of the message it is about (a StatusResponse
    the executor routed, :class:`~msh.engine.StatusReported`)."""

    action: str
    message_id: str | None
    from_party: str
    cpa_id: str
    at: datetime
    message_status: MessageStatus | None = None
    timestamp: datetime | None = None
    on_connection: bool = False
    fed: bool = False


@dataclass(eq=False)
class Question:
    """One request awaiting its answer: the request's MessageId, the Action of the answer expected, the
    party asked (``partner``, as :func:`msh.engine.signals.party_text` writes it) and the agreement asked
    under; for a StatusRequest the message it asks about and the resend it stands in for (``attempt``,
    None when asked for another reason); ``deadline``, when the wait ends (the runtime's clock)."""

    request_id: str
    expects: str
    partner: str
    cpa_id: str
    deadline: datetime
    message_id: str | None = None
    attempt: int | None = None
    answer: Answer | None = None
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def answered(self, answer: Answer | None) -> None:
        """Hand ``answer`` (None: just look at the clock again) to whoever waits; from any thread."""

        def deliver() -> None:
            if answer is not None and self.answer is None:
                self.answer = answer
            self.wake.set()

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            deliver()
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(deliver)

    def answers(self, action: str, from_party: str, cpa_id: str, about: str | None) -> bool:
        """Whether an ``action`` from ``from_party`` under ``cpa_id`` about message ``about`` answers it:
        only the party asked, under the agreement asked under, may answer (docs/design.md §7)."""
        if action != self.expects or from_party != self.partner or cpa_id != self.cpa_id:
            return False
        return self.message_id is None or about == self.message_id


class Questions:
    """The questions open in this process, by request MessageId (see the module docs); thread-safe."""

    def __init__(self) -> None:
        self._open: dict[str, Question] = {}
        self._lock = threading.Lock()

    def ask(self, question: Question) -> Question:
        """Register ``question`` (before its request is sent)."""
        with self._lock:
            self._open[question.request_id] = question
        return question

    def claim(self, request_id: str | None) -> Question | None:
        """Take the question asked by ``request_id`` out of the open ones: the caller now owns it (None:
        none is open, or another claimed it first)."""
        if request_id is None:
            return None
        with self._lock:
            return self._open.pop(request_id, None)

    def claim_answered(
        self, request_id: str | None, action: str, from_party: str, cpa_id: str, about: str | None
    ) -> Question | None:
        """:meth:`claim` the question ``request_id`` if the answer described answers it (:meth:`Question.answers`)."""
        if request_id is None:
            return None
        with self._lock:
            question = self._open.get(request_id)
            if question is None or not question.answers(action, from_party, cpa_id, about):
                return None
            return self._open.pop(request_id)

    def expire(self, now: datetime) -> None:
        """Wake whoever waits on a question whose deadline has come (the test network's clock moves in steps)."""
        with self._lock:
            due = [q for q in self._open.values() if q.deadline <= now]
        for question in due:
            question.answered(None)

    def next_deadline(self) -> datetime | None:
        """When the earliest open question's wait ends (None: none is open)."""
        with self._lock:
            return min((q.deadline for q in self._open.values()), default=None)

    def wake_all(self) -> None:
        """Wake every waiter (the runtime is stopping)."""
        with self._lock:
            waiting = list(self._open.values())
        for question in waiting:
            question.answered(None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)
