"""xsd:dateTime values in ebXML headers (Timestamp, TimeToLive; ebMS2 §3.1.6.2, §3.1.6.4, §6.3.2.2).

:func:`parse_datetime` reads them as the reader finds them (with or without a zone, with fractions);
:func:`format_datetime` writes them, UTC with ``Z``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from msh.errors import EbmsError, ErrorCode

__all__ = ["format_datetime", "parse_datetime"]


def parse_datetime(text: str, location: str) -> datetime:
    """Parse an xsd:dateTime (``2002-02-21T12:00:00Z``, offsets, fractions, or no zone at all)."""
    value = text.strip()
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise EbmsError(
            f"{value!r} is not an xsd:dateTime (expected e.g. 2002-02-21T12:00:00Z)",
            error_code=ErrorCode.OTHER_XML,
            location=location,
        ) from None


def format_datetime(value: datetime) -> str:
    """Format a datetime as xsd:dateTime; UTC is written with ``Z`` (ebMS2 §3.1.6.2 recommends UTC)."""
    text = value.isoformat()
    if value.tzinfo is not None and value.utcoffset() == UTC.utcoffset(None):
        text = text[: -len("+00:00")] + "Z"
    return text
