"""How ``msh serve`` writes its log: ``--log-format text`` (one readable line per record, the default) or
``json`` (one JSON object per line, for log collectors).

A JSON line has ``time`` (ISO 8601, UTC), ``level``, ``logger`` and ``message``, and, when the record carries
them (the runtime passes them as ``extra``, :func:`msh.runtime.logfields.fields`), ``messageId``, ``cpaId``,
``partner`` and ``event``; an exception's traceback is in ``exception``. Keys are camelCase, like every JSON
the project prints.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Final

__all__ = ["LOG_FORMATS", "JsonFormatter", "configure_logging"]

LOG_FORMATS: Final = ("text", "json")
_TEXT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_FIELDS: Final = (("message_id", "messageId"), ("cpa_id", "cpaId"), ("partner", "partner"), ("event", "event"))


class JsonFormatter(logging.Formatter):
    """A log record as one JSON line (see the module docs)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for attribute, key in _FIELDS:
            value = getattr(record, attribute, None)
            if value is not None:
                line[key] = value if isinstance(value, (str, int, float, bool)) else str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str, log_format: str) -> None:
    """The root logger at ``level``, writing to stderr in ``log_format`` (``text`` or ``json``)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT))
    logging.basicConfig(level=level.upper(), handlers=[handler])  # as before: kept when logging is set up already
