"""The inputs fuzzing starts from: messages, raw HTTP captures and agreements from ``samples/``,
``../shared/interop`` when present, and messages built here as party A composes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["PROJECT_ROOT", "Seed", "seeds"]

PROJECT_ROOT: Final = Path(__file__).resolve().parents[3]
"""The project's folder (``samples/`` is below it, ``../shared`` beside it)."""
_SHARED: Final = PROJECT_ROOT.parent / "shared"


@dataclass(frozen=True, slots=True)
class Seed:
    """A starting input: where it comes from, its bytes and (messages) its Content-Type."""

    origin: str
    data: bytes
    content_type: str = ""


_CACHE: dict[str, list[Seed]] = {}


def _split_capture(data: bytes) -> tuple[str, bytes] | None:
    from msh.ebms.message import split_http_message

    try:
        split = split_http_message(data)
    except Exception:
        return None
    if split is None or "content-type" not in split[0]:
        return None
    return split[0]["content-type"], split[1]


def seeds(kind: str) -> list[Seed]:
    """The seeds of a kind: ``message`` (Content-Type and body), ``capture`` (raw HTTP) or ``agreement``."""
    if kind in _CACHE:
        return _CACHE[kind]
    found: list[Seed] = []
    samples = PROJECT_ROOT / "samples"
    if kind in ("message", "capture"):
        files = sorted((samples / "messages").glob("*"))
        if (_SHARED / "interop" / "messages").is_dir():
            files += sorted(p for p in (_SHARED / "interop" / "messages").rglob("*") if p.is_file())
        for path in files:
            data = path.read_bytes()[: 1 << 20]
            if kind == "capture":
                if data.startswith((b"POST ", b"HTTP/1.")):
                    found.append(Seed(str(path), data))
                continue
            split = _split_capture(data)
            if split is not None:
                found.append(Seed(str(path), split[1], split[0]))
            elif data.lstrip().startswith(b"<"):
                found.append(Seed(str(path), data, 'text/xml; charset="UTF-8"'))
        if kind == "message":
            found.extend(_built_messages())
        else:
            found.extend(Seed(s.origin + " (as a capture)", _as_capture(s)) for s in _built_messages())
    elif kind == "agreement":
        files = sorted((samples / "cpas").glob("*.xml"))
        if (_SHARED / "interop" / "cpas").is_dir():
            files += sorted((_SHARED / "interop" / "cpas").glob("*.xml"))
        found = [Seed(str(p), p.read_bytes()) for p in files]
    else:
        raise ValueError(f"no seeds of kind {kind!r}")
    _CACHE[kind] = found
    return found


def _as_capture(seed: Seed) -> bytes:
    head = f'POST /msh HTTP/1.1\r\nHost: b\r\nContent-Type: {seed.content_type}\r\nSOAPAction: "ebXML"\r\n'
    return head.encode("latin-1") + f"Content-Length: {len(seed.data)}\r\n\r\n".encode() + seed.data


def _built_messages() -> list[Seed]:
    """Valid messages from A to B under the sample agreement, as A composes them."""
    from datetime import UTC, datetime

    from cpa.loader import load
    from cpa.registry import CpaRegistry
    from cpa.resolve import Exchange
    from msh.ebms.message import build_message
    from msh.runtime.compose import Payload, Submission, compose

    agreement = load(PROJECT_ROOT / "samples" / "cpas" / "demo-a-b.xml")
    registry = CpaRegistry([agreement])
    party_type = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
    a, b = ("123456789", party_type), ("987654321", party_type)
    now = datetime.now(UTC)
    built = []
    for n, payloads in enumerate(((b"<order n='1'/>",), (b"<a/>", bytes(range(256)) * 8), ())):
        params = registry.resolve(agreement.cpaid, Exchange(a, b, "urn:example:services:ordering", "NewOrder"), now=now)
        submission = Submission(
            b, "urn:example:services:ordering", "NewOrder", tuple(Payload(p, "application/xml") for p in payloads)
        )
        composed = compose(
            params,
            submission,
            message_id=f"fuzz-{n}@party-a.example",
            now=now,
            conversation_id=f"conv-{n}",
            content_id_domain="party-a.example",
        )
        content_type, body = build_message(composed.envelope, composed.attachments)
        built.append(Seed(f"built message {n}", body, content_type))
    return built
