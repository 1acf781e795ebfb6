"""Changing the agreements of a running MSH without a restart (SIGHUP, ``msh cpa add|remove|reload``).

:func:`check_agreement_set` is the one check of a set of agreement files, the same at the start of ``msh
serve``, at a reload and in the commands before they change the agreements folder: every file loads (schema,
references, signature), no agreement asks for security the MSH lacks or for a combination the specification
forbids (ebMS2 §9.1, §10.1.1), our party is in at least one, and our keys can do what each asks.

:class:`AgreementReloader` reloads the agreements the settings name into the running MSH: the whole new set is
checked first, off the event loop; a set with any problem changes nothing (the running set stays, and the log
and the reload status say why, naming the file). A good set replaces the registry's agreements in one step
(:meth:`cpa.registry.CpaRegistry.replace_all`): a reader sees the old set or the new one, never a mix.

Messages in flight under a removed agreement (decision): they fail, with a clear reason, never silently.
Each message of our application sent under it whose outcome is not final (pending, awaiting-ack,
forwarded) gets :class:`~msh.engine.sending.AgreementWithdrawn`: it becomes ``failed`` with evidence
``agreement-removed`` and the application is told the DeliveryFailure (severity Error when nothing left,
Warning when it may have been delivered, ebMS2 §6.5.7), as for any other failure (callback, journal,
``msh status``). Keeping the agreement half-known for them would leave their acknowledgments, resends and
signature checks depending on an agreement the operator took away. New submissions under it are refused
(:class:`~cpa.resolve.AgreementRefused`, not registered), and new inbound messages naming it are refused
by the agreement check (ebMS2 §3.1.2: ValueNotRecognized at the CPAId, which names no agreement here). Messages received
before the removal stay in the inbox. Forwards of an intermediary (routed by the routing table) and our
signals are not failed: they do not depend on our agreement. An agreement kept under the same CPAId
(edited file) is simply replaced: its messages go on.

TLS: a new agreement's partner certificates are added to the trust anchors of the running endpoint; anchors
of a removed agreement stay trusted at the TLS layer until the next start, but every message under the
removed agreement is refused by the agreement check.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cpa.registry import CpaRegistry
from cpa.resolve import PartyKey
from msh.engine.failures import OutboundKind
from msh.engine.outcomes import OutboundStatus
from msh.engine.sending import AgreementWithdrawn
from msh.errors import ConfigurationError
from msh.runtime.aftercommit import AfterCommit
from msh.runtime.agreements import agreements_in_use, load_agreements
from msh.runtime.config import Settings
from msh.runtime.msh import Msh
from msh.runtime.pidfile import write_status
from msh.runtime.security import MessageSecurity
from msh.store.api import Transaction

__all__ = ["AgreementReloader", "ReloadOutcome", "SignalledReloads", "check_agreement_set"]

log = logging.getLogger("msh.runtime")

_IN_FLIGHT = (OutboundStatus.PENDING, OutboundStatus.AWAITING_ACK, OutboundStatus.FORWARDED)
_PAGE = 500  # outbound rows read per query while looking for messages under a removed agreement
_BATCH = 100  # messages failed per unit of work


def check_agreement_set(
    settings: Settings, files: Iterable[Path], party: PartyKey, security: MessageSecurity | None
) -> CpaRegistry:
    """The registry of the agreement ``files`` as ``msh serve`` would use it (see the module docs), or
    :class:`ConfigurationError` saying what is wrong and in which file; ``security`` None leaves the keys out."""
    loaded = load_agreements(files, verify_signatures=settings.agreements.verify_signatures)
    registry = agreements_in_use(settings, loaded, party)
    if security is not None and security.with_keys:
        security.check_agreements(registry)
    return registry


@dataclass(frozen=True, slots=True)
class ReloadOutcome:
    """What one reload did: the agreements after it, those added and removed, the messages it failed; or,
    when ``problem`` is set, why nothing changed."""

    at: datetime
    generation: int
    agreements: tuple[str, ...]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    failed_messages: tuple[str, ...] = ()
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def summary(self) -> str:
        """One line for the log and the commands."""
        if self.problem is not None:
            kept = ", ".join(self.agreements) or "none"
            return f"agreements not reloaded, the running set is unchanged ({kept}): {self.problem}"
        parts = [f"agreements reloaded: {', '.join(self.agreements) or 'none'}"]
        if self.added:
            parts.append(f"added {', '.join(self.added)}")
        if self.removed:
            parts.append(f"removed {', '.join(self.removed)}")
        if self.failed_messages:
            parts.append(f"{len(self.failed_messages)} message(s) in flight under a removed agreement failed")
        return "; ".join(parts)

    def to_json(self, pid: int) -> dict[str, Any]:
        """The reload status file's content (camelCase keys, :mod:`msh.runtime.pidfile`)."""
        return {
            "pid": pid,
            "generation": self.generation,
            "ok": self.ok,
            "at": self.at.isoformat(),
            "agreements": list(self.agreements),
            "added": list(self.added),
            "removed": list(self.removed),
            "failedMessages": list(self.failed_messages),
            "problem": self.problem,
        }


@dataclass
class AgreementReloader:
    """Reloads the agreements of ``msh`` from the files its settings name (see the module docs); after a
    good reload each of ``on_loaded`` is called with the registry; with ``pid_file`` each outcome is written
    to the reload status file beside it."""

    msh: Msh
    pid_file: Path | None = None
    on_loaded: list[Callable[[CpaRegistry], None]] = field(default_factory=list)
    generation: int = 0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def _candidate(self) -> CpaRegistry:
        settings = self.msh.settings
        return check_agreement_set(settings, settings.agreements.files(), self.msh.party, self.msh.core.security)

    async def reload(self) -> ReloadOutcome:
        """Check the agreement files and, when all is well, put them in force (one reload at a time)."""
        async with self._lock:
            self.generation += 1
            registry = self.msh.registry
            before = [c.cpaid for c in registry]
            try:
                candidate = await self.msh.off_loop(self._candidate)
            except ConfigurationError as exc:
                outcome = ReloadOutcome(self.msh.clock(), self.generation, tuple(before), problem=str(exc))
                log.error("%s", outcome.summary())
                return self._done(outcome)
            registry.replace_all(candidate)
            self.msh.core.security.agreements_changed()
            after = [c.cpaid for c in registry]
            removed = tuple(c for c in before if c not in after)
            for hook in self.on_loaded:
                hook(registry)
            failed = await self.withdraw(removed) if removed else ()
            outcome = ReloadOutcome(
                self.msh.clock(),
                self.generation,
                tuple(after),
                added=tuple(c for c in after if c not in before),
                removed=removed,
                failed_messages=failed,
            )
            log.info("%s", outcome.summary())
            return self._done(outcome)

    def _done(self, outcome: ReloadOutcome) -> ReloadOutcome:
        if self.pid_file is not None:
            try:
                write_status(self.pid_file, outcome.to_json(os.getpid()))
            except OSError as exc:
                log.error("server.pid_file: cannot write the reload status beside %s: %s", self.pid_file, exc)
        return outcome

    async def withdraw(self, cpaids: Sequence[str]) -> tuple[str, ...]:
        """Fail our messages in flight under the removed agreements ``cpaids`` (see the module docs)."""
        found = await self.msh.off_loop(self._in_flight, set(cpaids))  # a read, beside the event loop
        failed: list[str] = []
        for start in range(0, len(found), _BATCH):
            after, done = await self.msh.writer.run(functools.partial(self._fail, batch=found[start : start + _BATCH]))
            failed += done  # committed
            self.msh.sender.after_commit(after)
        return tuple(failed)  # each was logged as it failed, with its DeliveryFailure

    def _in_flight(self, cpaids: set[str]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        with self.msh.store.transaction(readonly=True) as tx:
            for status in _IN_FLIGHT:
                found += _under(tx, status, cpaids)
        return found

    def _fail(self, tx: Transaction, batch: list[tuple[str, str]]) -> tuple[AfterCommit, list[str]]:
        after = AfterCommit()
        failed: list[str] = []
        now = self.msh.clock()
        for message_id, cpaid in batch:
            stored = tx.get_outbound(message_id, for_update=True)
            if stored is None or stored.state.status.final:
                continue  # purged, or its outcome came meanwhile
            event = AgreementWithdrawn(message_id, cpaid)
            if self.msh.executor.step_outbound(tx, message_id, event, now, after, stored) is OutboundStatus.FAILED:
                failed.append(message_id)
        return after, failed


class SignalledReloads:
    """The reloads SIGHUP asks for (:func:`msh.runtime.serving.serve`): :meth:`hangup` is called in the signal
    handler and only schedules the reload on ``loop``; :meth:`drain` awaits those under way (at the stop)."""

    def __init__(self, reloader: AgreementReloader, loop: asyncio.AbstractEventLoop) -> None:
        self.reloader = reloader
        self.loop = loop
        self.tasks: set[asyncio.Task[ReloadOutcome]] = set()

    def hangup(self) -> None:
        log.info("SIGHUP: reloading the agreements")
        self.loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        if not self.reloader.msh.running:
            log.warning("SIGHUP ignored: the MSH is starting or stopping; send it again once it serves")
            return
        task = self.loop.create_task(self.reloader.reload())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def drain(self) -> None:
        if self.tasks:
            await asyncio.wait(set(self.tasks))


def _under(tx: Transaction, status: OutboundStatus, cpaids: set[str]) -> list[tuple[str, str]]:
    """(MessageId, CPAId) of our messages in ``status`` sent under one of ``cpaids``."""
    out: list[tuple[str, str]] = []
    after: str | None = None
    while True:
        page = tx.list_outbound(kind=OutboundKind.OWN, status=status, limit=_PAGE, after=after)
        out += [(m.message_id, m.cpaid) for m in page if m.cpaid in cpaids]
        if len(page) < _PAGE:
            return out
        after = page[-1].message_id
