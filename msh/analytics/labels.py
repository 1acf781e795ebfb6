"""Short labels for the report page: party names that fit a table cell or a chart's label column (the full
name goes in the page's ``title`` attribute, shown on hover), and links to the web console.

A party is named in the journal as ``type:value`` (:func:`msh.engine.signals.party_text`); with an ebCore
PartyId type (``urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088``, ebCore Party Id Type §3) the short
label keeps the scheme and the value (``0088:987654321``); any other URN keeps its last segments that fit;
whatever is still too long is cut in the middle with an ellipsis.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

__all__ = ["WIDTH", "console_link", "ellipsize", "party_label"]

WIDTH: Final = 24
"""The most characters a short label has."""

_EBCORE: Final = "urn:oasis:names:tc:ebcore:partyid-type:"


def ellipsize(text: str, width: int = WIDTH) -> str:
    """``text`` when it fits in ``width`` characters, else its start and end around an ellipsis."""
    if len(text) <= width:
        return text
    tail = (width - 1) * 2 // 3  # the end tells names apart more often than the start
    return f"{text[: width - 1 - tail]}…{text[len(text) - tail :]}"


def party_label(name: str | None, width: int = WIDTH) -> str:
    """The short label of a party named ``name`` (module docs); ``-`` for none."""
    if not name:
        return "-"
    if name.startswith(_EBCORE):
        # catalog:scheme:value -> scheme:value (the catalog, e.g. iso6523, says little on a page).
        segments = name.removeprefix(_EBCORE).split(":")
        return ellipsize(":".join(segments[-2:]), width)
    if name.lower().startswith("urn:"):
        segments = name[4:].split(":")
        kept = segments[-1]
        for segment in reversed(segments[:-1]):
            if len(segment) + 1 + len(kept) > width:
                break
            kept = f"{segment}:{kept}"
        return ellipsize(kept, width)
    return ellipsize(name, width)


def console_link(console_url: str, message_id: str) -> str:
    """The web console's page of one message's history: ``{console_url}/messages/{MessageId}``, the
    MessageId URL-escaped (a MessageId holds ``@`` and may hold ``/``, RFC 2822 msg-id)."""
    return f"{console_url.rstrip('/')}/messages/{quote(message_id, safe='')}"
