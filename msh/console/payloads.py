"""A stored message's payloads (ebMS2 §2.1.3: the MIME parts after the SOAP part), listed and downloaded as
stored: with the content type of their part and a file name from its Content-Disposition, else from its
Content-ID and the extension of its media type. A payload encrypted under the agreement's DigitalEnvelope is
what travelled, so it downloads encrypted."""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from msh.ebms.message import EbxmlMessage, ParseMode, parse_message
from msh.ebms.mime.parts import MimePart
from msh.store.api import Store

__all__ = ["Download", "PayloadInfo", "download", "payloads_of"]

_CHUNK: Final = 1 << 16
_FILENAME: Final = re.compile(r'filename\*?=(?:UTF-8\'\')?"?([^";]+)"?', re.IGNORECASE)
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_EXTENSIONS: Final = {
    "application/xml": ".xml",
    "text/xml": ".xml",
    "application/json": ".json",
    "text/plain": ".txt",
    "application/pdf": ".pdf",
    "application/octet-stream": ".bin",
}
"""The usual extension of common payload types (the platform's tables differ, e.g. .xsl for XML)."""


@dataclass(frozen=True, slots=True)
class PayloadInfo:
    index: int
    content_id: str | None
    content_type: str
    filename: str
    size: int


@dataclass(frozen=True, slots=True)
class Download:
    content_type: str
    filename: str
    chunks: Iterator[bytes]


def _filename(part: MimePart, index: int) -> str:
    disposition = part.header("Content-Disposition") or ""
    found = _FILENAME.search(disposition)
    if found:
        name = found.group(1).rsplit("/", 1)[-1]
    else:
        stem = part.content_id.split("@", 1)[0] if part.content_id else f"payload-{index + 1}"
        media = part.media_type.lower()
        name = stem + (_EXTENSIONS.get(media) or mimetypes.guess_extension(media) or ".bin")
    return _UNSAFE.sub("_", name).strip("._") or f"payload-{index + 1}.bin"


def _parsed(store: Store, blob_id: int, content_type: str) -> EbxmlMessage:
    with store.open_blob(blob_id) as blob:
        return parse_message(blob, content_type, mode=ParseMode.LENIENT)


def payloads_of(store: Store, blob_id: int, content_type: str) -> list[PayloadInfo]:
    """The payloads of the stored body ``blob_id`` (blocking: parses the message)."""
    message = _parsed(store, blob_id, content_type)
    try:
        return [
            PayloadInfo(i, p.content_id, p.content_type, _filename(p, i), p.body.size)
            for i, p in enumerate(message.payloads)
        ]
    finally:
        message.close()


def download(store: Store, blob_id: int, content_type: str, index: int) -> Download | None:
    """Payload ``index`` of the stored body, to be streamed (None: no such payload). The chunks close the parsed
    message when they end."""
    message = _parsed(store, blob_id, content_type)
    if not 0 <= index < len(message.payloads):
        message.close()
        return None
    part = message.payloads[index]

    def chunks() -> Iterator[bytes]:
        try:
            with part.body.open() as source:
                while chunk := source.read(_CHUNK):
                    yield chunk
        finally:
            message.close()

    return Download(part.content_type, _filename(part, index), chunks())
