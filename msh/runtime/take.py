"""Handing received messages to an application as folders on disk (``msh inbox --take DIR``).

Each message the inbox holds for the application (not yet acknowledged) becomes one folder
``DIR/<safe MessageId>/`` with its payloads and a ``message.json`` that says what they are. The rules:

* The folder is named after the MessageId (ebMS2 §3.1.6.1: unique across every MSH and every store),
  made safe for a file system by :func:`folder_name`: deterministic, collision-free, never ``.``/``..``
  or a hidden name, no separators, at most 200 characters (a longer MessageId keeps a readable start
  and ends in a digest of the whole).
* Nothing is ever overwritten. When ``DIR/<name>`` already exists, the message is not taken and not
  acknowledged (it stays in the inbox), unless that folder already holds this very message, complete
  (same MessageId, same payload files with the same SHA-256 digests): then an earlier take was cut short
  between writing and acknowledging, and the message is acknowledged now.
* Writing is atomic: payloads and ``message.json`` are written into a temporary folder in ``DIR``
  (``.taking-…``), each file and the folder synced to disk, then the folder is renamed into place (one
  file system: atomic), ``DIR`` synced, and only then is the message acknowledged in the store. A crash
  at any point leaves either no folder (the message is offered again) or a complete one.

``message.json`` (UTF-8, keys in this order)::

    {"messageId", "conversationId", "refToMessageId" (or null), "cpaId",
     "service": {"value", "type" (or null)}, "action",
     "from": {"partyIds": [{"value", "type" (or null)}, ...], "role" (or null)}, "to": {...},
     "timestamp" (the header's, ISO 8601), "receivedAt" (when this MSH stored it, ISO 8601),
     "payloads": [{"file", "contentId" (or null), "contentType", "size", "sha256"}, ...]}

A payload file is named after the MIME part's file name (``Content-Disposition: ...; filename=``, else
the Content-Type ``name`` parameter) without any folder part, else after its Content-ID, else
``payload-<n>``; made safe like folder names, unique within the folder, never ``message.json``.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final

from msh.ebms.mime import MimePart, parse_content_type
from msh.ebms.model import Party
from msh.errors import ConfigurationError
from msh.store.api import InboxEntry, InboxState

if TYPE_CHECKING:
    from msh.ebms.message import EbxmlMessage
    from msh.runtime.msh import Msh

__all__ = [
    "METADATA",
    "Outcome",
    "Taken",
    "folder_name",
    "metadata",
    "payload_names",
    "prepare_folder",
    "take_inbox",
    "take_message",
]

METADATA: Final = "message.json"
"""The file beside the payloads that describes the message."""
_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.@+=")
_MAX_NAME: Final = 200  # characters: well under the 255 bytes file systems allow for a name
_KEEP: Final = 120  # characters of a long name kept readable before "~" and its 64-digit digest
_TEMP_PREFIX: Final = ".taking-"
_CHUNK: Final = 1 << 20
_BATCH: Final = 100


def folder_name(text: str) -> str:
    """``text`` as a safe file or folder name: every character outside ``A-Z a-z 0-9 - _ . @ + =`` (and
    a leading ``.``) percent-encoded as UTF-8 bytes, so different texts give different names; a name
    longer than 200 characters keeps (about) its first 120 and ends in ``~`` and the SHA-256 of ``text`` (a
    ``~`` never appears in a short name, so the two kinds cannot collide)."""
    out = []
    for i, char in enumerate(text):
        if char in _SAFE and not (i == 0 and char == "."):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    name = "".join(out)
    if not name:
        return "%00"
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        keep = _KEEP
        while "%" in name[max(0, keep - 2) : keep]:  # no escape cut in half
            keep -= 1
        name = f"{name[:keep]}~{digest}"
    return name


def _file_name_of(part: MimePart) -> str | None:
    """The file name the sender gave the part (RFC 2183 ``filename``, or the Content-Type ``name``)."""
    candidates = []
    disposition = part.header("Content-Disposition")
    if disposition is not None:
        # RFC 2183 §2.3: the filename parameter of Content-Disposition (parsed like a Content-Type value).
        candidates.append(parse_content_type("x/x;" + disposition.partition(";")[2])[1].get("filename"))
    candidates.append(parse_content_type(part.content_type)[1].get("name"))
    for candidate in candidates:
        if candidate:
            # Only the last path segment: a sender must not choose where the file goes.
            base = candidate.replace("\\", "/").rsplit("/", 1)[-1].strip()
            if base not in ("", ".", ".."):
                return base
    return None


def payload_names(payloads: tuple[MimePart, ...]) -> list[str]:
    """The file name of each payload in its message's folder (see the module docs)."""
    used = {METADATA}
    names = []
    for n, part in enumerate(payloads, start=1):
        base = folder_name(_file_name_of(part) or part.content_id or f"payload-{n}")
        name, k = base, 1
        while name in used:
            k += 1
            name = folder_name(f"{k}-{base}")
        used.add(name)
        names.append(name)
    return names


def _party(party: Party) -> dict[str, object]:
    return {"partyIds": [{"value": p.value, "type": p.type} for p in party.party_ids], "role": party.role}


def metadata(message: EbxmlMessage, entry: InboxEntry, payloads: list[dict[str, object]]) -> dict[str, object]:
    """The content of ``message.json`` (see the module docs); ``payloads`` as written."""
    header = message.envelope.message_header
    if header is None:  # pragma: no cover - the inbox holds business messages only
        raise ConfigurationError(f"inbox entry {entry.id} holds a message without a MessageHeader")
    data = header.message_data
    return {
        "messageId": data.message_id,
        "conversationId": header.conversation_id,
        "refToMessageId": data.ref_to_message_id,
        "cpaId": header.cpa_id,
        "service": {"value": header.service.value, "type": header.service.type},
        "action": header.action,
        "from": _party(header.from_party),
        "to": _party(header.to_party),
        "timestamp": data.timestamp.isoformat(),
        "receivedAt": entry.received_at.isoformat(),
        "payloads": payloads,
    }


class Outcome(StrEnum):
    """What became of one inbox entry."""

    TAKEN = "taken"
    ALREADY_THERE = "already-there"  # the folder held this very message: acknowledged now
    REFUSED = "refused"  # the folder exists with something else: not taken, not acknowledged


@dataclass(frozen=True, slots=True)
class Taken:
    """The outcome of taking one inbox entry into ``folder``; ``reason`` says why it was refused."""

    entry_id: int
    message_id: str
    folder: Path
    outcome: Outcome
    reason: str | None = None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, source: BinaryIO) -> tuple[int, str]:
    """Write a new file (never an existing one) with what ``source`` holds, synced; its size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "xb") as out:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def _write_temporary(folder: Path, message: EbxmlMessage, entry: InboxEntry) -> tuple[Path, dict[str, object]]:
    """The message's folder, complete and synced, under a temporary name in ``folder``; its metadata."""
    temporary = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=folder))
    try:
        payloads: list[dict[str, object]] = []
        for part, name in zip(message.payloads, payload_names(message.payloads), strict=True):
            with part.body.open() as source:
                size, sha256 = _write_file(temporary / name, source)
            payloads.append(
                {
                    "file": name,
                    "contentId": part.content_id,
                    "contentType": part.content_type,
                    "size": size,
                    "sha256": sha256,
                }
            )
        meta = metadata(message, entry, payloads)
        text = (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        _write_file(temporary / METADATA, io.BytesIO(text))
        _fsync_dir(temporary)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return temporary, meta


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _holds(target: Path, meta: dict[str, object]) -> bool:
    """Whether the existing folder ``target`` holds exactly this message, complete on disk."""
    try:
        existing = json.loads((target / METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    keys = ("messageId", "cpaId", "conversationId", "action", "payloads")
    if not isinstance(existing, dict) or any(existing.get(k) != meta[k] for k in keys):
        return False
    payloads = meta["payloads"]
    assert isinstance(payloads, list)
    try:
        return all(_sha256_of(target / str(p["file"])) == p["sha256"] for p in payloads)
    except OSError:
        return False


def take_message(msh: Msh, entry: InboxEntry, folder: Path) -> Taken:
    """Write one inbox entry's message into ``folder`` (see the module docs) and acknowledge it once its
    folder is complete on disk; refused (not acknowledged) when its folder exists with anything else."""
    target = folder / folder_name(entry.message_id)
    received = msh.fetch(entry.id, mark_delivered=False)
    try:
        temporary, meta = _write_temporary(folder, received.message, entry)
    finally:
        received.close()
    try:
        if os.path.lexists(target):
            if _holds(target, meta):
                msh.ack(entry.id)
                return Taken(entry.id, entry.message_id, target, Outcome.ALREADY_THERE)
            return Taken(entry.id, entry.message_id, target, Outcome.REFUSED, f"{target} already exists")
        try:
            # Atomic on one file system; refused by the OS if the target appeared meanwhile (a folder that
            # is not empty, or a file).
            os.rename(temporary, target)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                return Taken(entry.id, entry.message_id, target, Outcome.REFUSED, f"{target} already exists")
            raise
        _fsync_dir(folder)
    finally:
        if temporary.exists():
            shutil.rmtree(temporary, ignore_errors=True)
    # Only now does the store hear that the application holds it.
    msh.ack(entry.id)
    return Taken(entry.id, entry.message_id, target, Outcome.TAKEN)


def prepare_folder(folder: Path) -> None:
    """Create ``folder`` if needed; :class:`ConfigurationError` (one line) when it cannot be a folder."""
    if folder.exists() and not folder.is_dir():
        raise ConfigurationError(f"--take {folder}: that is a file, not a folder; give a folder (created if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(f"--take {folder}: cannot create the folder: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigurationError(f"--take {folder}: the folder is not writable; give a folder this user can write")


def take_inbox(msh: Msh, folder: Path, report: Callable[[Taken], object] | None = None) -> list[Taken]:
    """Take every message waiting for the application (new, or fetched but not acknowledged) into
    ``folder``; ``report`` is called with each outcome as it happens. Refused entries stay in the inbox."""
    prepare_folder(folder)
    results: list[Taken] = []
    skipped: set[int] = set()
    while True:
        waiting = [
            e
            for state in (InboxState.NEW, InboxState.DELIVERED_TO_APP)
            for e in msh.inbox(state, limit=_BATCH + len(skipped))
            if e.id not in skipped
        ]
        if not waiting:
            return results
        for entry in sorted(waiting, key=lambda e: (e.received_at, e.id))[:_BATCH]:
            result = take_message(msh, entry, folder)
            if result.outcome is Outcome.REFUSED:
                skipped.add(entry.id)
            results.append(result)
            if report is not None:
                report(result)
