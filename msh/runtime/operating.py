"""What an operator does to a running MSH beyond the application API: resend failed messages
(:mod:`msh.runtime.resending`) and purge what retention allows (:mod:`msh.runtime.retention`).

:class:`Operating` is a base of :class:`msh.runtime.Msh`, so these are methods of the facade; it keeps
the facade's module small.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from msh.runtime.core import Core
from msh.runtime.executor import Executor
from msh.runtime.resending import Resending, ResendResult
from msh.runtime.retention import PurgeReport, Retention
from msh.runtime.sender import Sender

__all__ = ["Operating"]


class Operating:
    """The operator's actions of :class:`msh.runtime.Msh` (see the module docs)."""

    core: Core
    executor: Executor
    sender: Sender

    def resend(
        self, message_ids: Iterable[str], *, reason: str, requested_by: str, force: bool = False
    ) -> list[ResendResult]:
        """Send failed messages again, each as a new attempt series with the same MessageId (ebMS2 §6.4.1: the
        partner's duplicate elimination protects its application), journaled (``resend-requested``) with
        ``requested_by`` (the OS user or the API principal) and ``reason``. One result per MessageId, in the
        order given: resent, refused (a message that is not failed, not the application's own, sent with
        MessageOrder, past its PersistDuration or TimeToLive, or, unless ``force``, sent without
        DuplicateElimination: :mod:`msh.engine.resend`) or unknown. Each is its own transaction; the
        transmission goes from this process when its runtime runs, else from ``msh serve`` on the store."""
        who = requested_by.strip()
        if not who:
            raise ValueError("requested_by must name who asks for the resend (an OS user or an API principal)")
        resending = Resending(self.core, self.executor)
        results = []
        for message_id in dict.fromkeys(message_ids):
            result, after = self.core.writer.call(
                resending.unit(message_id, reason=reason, requested_by=who, force=force)
            )
            self.sender.after_commit(after)
            results.append(result)
        return results

    def purge(self, *, before: datetime | None = None, dry_run: bool = False) -> PurgeReport:
        """Remove from the store the messages whose outcome is final and whose keeping time has passed
        (:mod:`msh.runtime.retention`), with their payloads; the journal is kept and records each removal.
        ``before``: only those settled before this time too; ``dry_run``: say what would go, remove nothing."""
        return Retention(self.core).purge(before=before, dry_run=dry_run)
