"""What every handler of the application interfaces works with: the MSH, the ``[api]`` settings, the
applications, and the notice of arrivals that wakes long polls."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from msh.api.auth import Applications
from msh.runtime.config.api import ApiSettings, priorities
from msh.runtime.msh import Msh
from msh.store.api import Transaction
from msh.store.app_records import PriorityRule

__all__ = ["ApiContext", "Arrivals"]

_T = TypeVar("_T")


class Arrivals:
    """Wakes the long polls when a message arrives (set from the runtime's loop, or any thread)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def notify(self) -> None:
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            self._event.set()
        else:
            loop.call_soon_threadsafe(self._event.set)

    async def wait(self, timeout: float) -> None:
        """Wait until an arrival, at most ``timeout`` seconds."""
        self._event.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)


@dataclass
class ApiContext:
    """The MSH and the interfaces' settings; :meth:`read` and :meth:`write` run store work off the loop."""

    msh: Msh
    settings: ApiSettings
    applications: Applications
    arrivals: Arrivals = field(default_factory=Arrivals)
    rules: tuple[PriorityRule, ...] = ()

    def __post_init__(self) -> None:
        self.rules = tuple(
            PriorityRule(p.cpaid, p.service, p.action, p.priority) for p in priorities(self.settings.priorities)
        )
        self.msh.listen_for_messages(lambda entry_id, message_id: self.arrivals.notify())

    def now(self) -> datetime:
        """The MSH's clock (a fake one in tests)."""
        return self.msh.clock()

    async def read(self, fn: Callable[[Transaction], _T]) -> _T:
        """``fn`` in a read-only transaction, off the event loop."""
        return await self.msh.read(fn)

    async def write(self, unit: Callable[[Transaction], _T]) -> _T:
        """``unit`` through the MSH's store writer (committed before this returns)."""
        return await self.msh.writer.run(unit)
