"""Waiting for the answer to a question this MSH asked (:mod:`msh.runtime.questions`): handed over by the
runtime of this process when it receives the answer, or found in the journal when another process on the
same store did (``msh serve`` beside the command that asked, or another server on a shared PostgreSQL store).
Whoever waits claims the question when its time is up, so exactly one side acts on each answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import datetime

from msh.ebms.model import MessageStatus
from msh.runtime.core import Core
from msh.runtime.questions import Answer, Question
from msh.store.api import Direction, Store
from msh.store.events import signal_received

__all__ = ["Outcome", "await_answer", "journal_answer"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The end of a wait: the answer (None: none came) and whether the waiter owns the question (it then
    acts on it; when it does not, a unit of this process claimed it and acts on it)."""

    answer: Answer | None
    owned: bool


def journal_answer(store: Store, question: Question) -> Answer | None:
    """The answer to ``question`` as another process (``msh serve`` on this store) journaled it."""
    with store.transaction(readonly=True) as tx:
        events = tx.message_events(question.request_id, direction=Direction.INBOUND, limit=20)
    for event in events:
        if event.kind != signal_received(question.expects):
            continue
        about = event.detail.get("refToMessageId")
        if not question.answers(
            question.expects, event.from_party or "", event.cpa_id or "", about if isinstance(about, str) else None
        ):
            continue
        status, stamp, answer_id = (event.detail.get(k) for k in ("messageStatus", "timestamp", "messageId"))
        message_status = None
        if isinstance(status, str):
            with contextlib.suppress(ValueError):
                message_status = MessageStatus(status)
        return Answer(
            question.expects,
            answer_id if isinstance(answer_id, str) else None,
            event.from_party or "",
            event.cpa_id or "",
            event.at,
            message_status,
            datetime.fromisoformat(stamp) if isinstance(stamp, str) else None,
        )
    return None


async def await_answer(core: Core, question: Question) -> Outcome:
    """Wait for the answer to ``question`` until its deadline: handed over by this process's runtime, or
    found in the journal (written by another process on this store); then settle who owns it."""
    poll = max(core.settings.timers.poll_interval.total_seconds(), 0.05)
    was_running = core.running
    found: Answer | None = None
    while question.answer is None and found is None:
        remaining = (question.deadline - core.clock()).total_seconds()
        if remaining <= 0 or (was_running and not core.running):
            break
        question.wake.clear()
        if question.answer is not None:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(question.wake.wait(), timeout=min(remaining, poll))
        if question.answer is None:
            found = await core.off_loop(journal_answer, core.store, question)
    if question.answer is not None:
        return Outcome(question.answer, owned=False)
    if core.questions.claim(question.request_id) is not None:
        return Outcome(found, owned=True)
    # A unit of this process claimed it and is committing the answer: its after-commit work hands it over.
    loop = asyncio.get_running_loop()
    end = loop.time() + poll
    while question.answer is None and loop.time() < end:
        question.wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(question.wake.wait(), timeout=max(end - loop.time(), 0))
    return Outcome(question.answer, owned=False)
