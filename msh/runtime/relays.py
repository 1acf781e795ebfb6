"""Synchronous replies relayed by an intermediary (ebMS2 §4.3, §10): the previous hop's connection waits.

A message that comes to an intermediary with SyncReply asks every node on its path to keep its connection
open for the answer (ebMS2 §4.3: "it is necessary to provide some means by which the sender of a message can
indicate it is expecting a response so the intermediary nodes can keep the connection open"). The inbound
pipeline, having committed the forward, waits here (:meth:`SyncRelays.wait`) while the sender transmits it;
the answer that comes back on the forward's connection is handed over (:meth:`SyncRelays.deliver`) and goes
back, as it came, on the waiting connection. A forward that fails, or no answer within the wait, ends the
wait with nothing: the previous hop then gets an empty answer, and what comes back later is sent on along
the reverse route like any other answer.
"""

from __future__ import annotations

import asyncio
import contextlib

from msh.transport.port import HttpReply

__all__ = ["SyncRelays"]


class SyncRelays:
    """The connections waiting for the answer to a forward, by the forwarded MessageId (one event loop)."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[HttpReply | None]] = {}

    def expect(self, message_id: str) -> asyncio.Future[HttpReply | None]:
        """Start waiting for the answer to the forward of ``message_id`` (before its transmission starts)."""
        future: asyncio.Future[HttpReply | None] = asyncio.get_running_loop().create_future()
        previous = self._waiting.pop(message_id, None)
        if previous is not None and not previous.done():
            previous.set_result(None)  # an older copy's connection: it gets the empty answer
        self._waiting[message_id] = future
        return future

    def deliver(self, message_id: str, answer: HttpReply | None) -> bool:
        """Hand ``answer`` (None: the forward failed) to the connection waiting for ``message_id``; False when
        none waits (then the answer is the caller's to send on)."""
        future = self._waiting.pop(message_id, None)
        if future is None or future.done():
            return False
        future.set_result(answer)
        return answer is not None

    async def wait(self, message_id: str, future: asyncio.Future[HttpReply | None], seconds: float) -> HttpReply | None:
        """The answer to the forward of ``message_id``, or None when none came within ``seconds``."""
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=seconds)
        except TimeoutError:
            return None
        finally:
            if self._waiting.get(message_id) is future:
                del self._waiting[message_id]
            with contextlib.suppress(asyncio.InvalidStateError):
                if not future.done():
                    future.set_result(None)
