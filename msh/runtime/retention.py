"""Retention: removing the messages whose outcome is final once they have been kept long enough (``msh purge``,
:meth:`msh.runtime.Msh.purge`, and ``msh serve`` every ``retention.interval`` when ``retention.enabled``).

A message goes when its outcome is final (a sent message delivered, sent or failed with its DeliveryFailure
reported; a received one settled by the application), it was settled before the cut-off (``retention.keep``
ago, or the operator's ``before``), and its PersistDuration has passed since it was first sent or received
(ebMS2 §6.4.6: "the minimum length of time ... data from a reliably sent Message, is kept in Persistent
Storage by a Receiving MSH"; for a received message it is its duplicate-elimination record, §6.4.1, so it is
kept as long as the agreement requires). A sent message's PersistDuration is the one it was sent with; a
received one's is the longest the loaded agreement names (its channels' bindings may differ), and one whose
agreement is no longer loaded is kept ``retention.keep`` only. What is in flight (a message being retried,
awaiting an acknowledgment, waiting in the inbox) is never removed: the store refuses it in the statement
that removes (:mod:`msh.store.retention_port`). The journal stays, with a ``purged`` event per message.

Each batch of ``retention.batch_size`` is one unit of work through the store writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from cpa.model import CollaborationProtocolAgreement
from msh.runtime.core import Core
from msh.store.api import Transaction
from msh.store.retention_port import InboundPosition, OutboundPosition, PurgeCandidate

__all__ = ["PurgeReport", "PurgeSchedule", "Retention", "kept_until"]

log = logging.getLogger("msh.runtime")


@dataclass
class PurgeReport:
    """What a purge removed (or, ``dry_run``, would remove): counts by direction, bytes freed, the messages
    (direction, MessageId), and how many final ones are still kept for their PersistDuration."""

    dry_run: bool
    cutoff: datetime
    removed: Counter[str] = field(default_factory=Counter)
    bytes_freed: int = 0
    messages: list[tuple[str, str]] = field(default_factory=list)
    kept_for_persist_duration: int = 0

    def to_json(self) -> dict[str, object]:
        """The report with camelCase keys, as ``msh purge --json`` prints it."""
        return {
            "dryRun": self.dry_run,
            "cutoff": self.cutoff.isoformat(),
            "removed": {"outbound": self.removed["outbound"], "inbound": self.removed["inbound"]},
            "bytesFreed": self.bytes_freed,
            "keptForPersistDuration": self.kept_for_persist_duration,
            "messages": [{"direction": d, "messageId": m} for d, m in self.messages],
        }


def _agreement_persist(cpa: CollaborationProtocolAgreement, since: datetime) -> datetime | None:
    """The latest end of any PersistDuration the agreement names, counted from ``since`` (CPP/A 2.0 §8.4.36)."""
    ends = [
        binding.persist_duration.add_to_or_latest(since)
        for info in cpa.party_infos
        for channel in info.delivery_channels
        for binding in (channel.doc_exchange.sender_binding, channel.doc_exchange.receiver_binding)
        if binding is not None and binding.persist_duration is not None
    ]
    return max(ends, default=None)


def kept_until(core: Core, candidate: PurgeCandidate) -> datetime:
    """Until when ``candidate`` must stay for its PersistDuration (ebMS2 §6.4.6); its start when it has none."""
    start = candidate.started_at
    if candidate.persist_duration is not None:
        return candidate.persist_duration.add_to_or_latest(start)
    if candidate.inbound_id is None:
        return start
    cpa = core.registry.get(candidate.cpaid)
    end = _agreement_persist(cpa, start) if cpa is not None else None
    return start if end is None else end


class Retention:
    """Runs purges (see the module docs)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def purge(self, *, before: datetime | None = None, dry_run: bool = False) -> PurgeReport:
        """Purge now, blocking (the command line; :meth:`purge_async` on the event loop)."""
        report, position = self._start(before, dry_run)
        while position is not None:
            position = self.core.writer.call(functools.partial(self._batch, report=report, position=position))
        return report

    async def purge_async(self) -> PurgeReport:
        """Purge now with the settings' cut-off, each batch awaited through the writer."""
        report, position = self._start(None, False)
        while position is not None:
            position = await self.core.writer.run(functools.partial(self._batch, report=report, position=position))
        return report

    def _start(self, before: datetime | None, dry_run: bool) -> tuple[PurgeReport, _Position | None]:
        now = self.core.clock()
        cutoff = before if before is not None else now - self.core.settings.retention.keep
        return PurgeReport(dry_run, cutoff), _Position()

    def _batch(self, tx: Transaction, report: PurgeReport, position: _Position) -> _Position | None:
        """One batch: the next final messages of the direction under way, removed unless still kept."""
        limit = self.core.settings.retention.batch_size
        now = self.core.clock()
        if position.inbound is None and not position.outbound_done:
            found = tx.outbound_purge_candidates(settled_before=report.cutoff, after=position.outbound, limit=limit)
            for c in found:
                self._one(tx, report, c, now)
            if len(found) < limit:
                return _Position(outbound_done=True)
            return _Position((found[-1].settled_at, found[-1].message_id))
        found = tx.inbound_purge_candidates(settled_before=report.cutoff, after=position.inbound, limit=limit)
        for c in found:
            self._one(tx, report, c, now)
        if len(found) < limit:
            return None
        last = found[-1]
        assert last.inbound_id is not None
        return _Position(outbound_done=True, inbound=(last.settled_at, last.inbound_id))

    def _one(self, tx: Transaction, report: PurgeReport, c: PurgeCandidate, now: datetime) -> None:
        until = kept_until(self.core, c)
        if now < until:
            # ebMS2 §6.4.6: kept at least PersistDuration (for a received message: its duplicate elimination).
            report.kept_for_persist_duration += 1
            return
        direction = c.direction.value
        if report.dry_run:
            freed: int | None = c.size
        else:
            detail = {"status": c.status, "keptUntil": until.isoformat()}
            if c.inbound_id is None:
                freed = tx.purge_outbound(c.message_id, at=now, detail=detail)
            else:
                freed = tx.purge_inbound(c.inbound_id, at=now, detail=detail)
        if freed is None:
            return  # it changed meanwhile (e.g. resent): the store kept it
        report.removed[direction] += 1
        report.bytes_freed += freed
        report.messages.append((direction, c.message_id))


@dataclass(frozen=True, slots=True)
class _Position:
    """Where a purge stands: the last sent message seen, whether they are done, the last received copy seen."""

    outbound: OutboundPosition | None = None
    outbound_done: bool = False
    inbound: InboundPosition | None = None


class PurgeSchedule:
    """``msh serve``'s purge every ``retention.interval`` (a companion of :func:`msh.runtime.serving.serve`)."""

    def __init__(self, core: Core, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """``sleep`` waits between purges (a test passes one that does not wait)."""
        self.core = core
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="msh-retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        interval = self.core.settings.retention.interval.total_seconds()
        while True:
            await self._sleep(interval)
            try:
                report = await Retention(self.core).purge_async()
            except Exception:
                log.exception("retention: the purge failed; trying again in %s s", interval)
                continue
            if report.messages:
                log.info(
                    "retention: purged %d sent and %d received messages, %d bytes",
                    report.removed["outbound"],
                    report.removed["inbound"],
                    report.bytes_freed,
                )
