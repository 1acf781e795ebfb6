"""The fields a log record of the runtime carries besides its message (``extra=fields(...)``): the MessageId,
the agreement (CPAId), the partner and the event (a journal event kind, or another short name). ``msh serve
--log-format json`` writes them as ``messageId``, ``cpaId``, ``partner`` and ``event`` (:mod:`msh.cli.logformat`);
the text format leaves them out (the message says them in words).
"""

from __future__ import annotations

__all__ = ["fields"]


def fields(
    *, message_id: str | None = None, cpa_id: str | None = None, partner: str | None = None, event: str | None = None
) -> dict[str, str]:
    """The ``extra`` of a log call: the given fields only (a record without one has no such attribute)."""
    given = {"message_id": message_id, "cpa_id": cpa_id, "partner": partner, "event": event}
    return {key: str(value) for key, value in given.items() if value is not None}
