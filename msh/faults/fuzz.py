"""Mutation fuzzing of the MSH's doors: the codec, raw-capture reading, the agreement loader, the endpoint.

Each :class:`Target` takes one input and returns an :class:`Outcome`; an outcome is *documented* when it
is one the MSH promises (the project's own error types, or for the endpoint: 200/202 with an ebXML
message or nothing, 4xx, or 500 with a SOAP Fault) and its work stayed within a bound that grows linearly
with the input: ``ops <= OPS_FIXED + OPS_PER_BYTE * len(input)``, where ``ops`` counts the Python
function calls and the calls into C made while the target ran (:class:`OperationCounter`, the same on
every machine and in every run, unlike time). Anything else is a *finding*: an exception of another type
(a bug: the sender would get a bare error), or work beyond the bound (a quadratic path).

Inputs come from seeds (``samples/``, ``../shared/interop`` when present, and messages built here)
changed by :class:`Mutator`: byte-level changes (flips, inserted, deleted and repeated ranges, splices of
two seeds) and structure-aware ones (an element repeated thousands of times, many namespace declarations
or attributes, another encoding or charset, a DOCTYPE, deep nesting, a broken MIME boundary or transfer
encoding, an odd Content-Type). The test suite runs a quick profile of it through hypothesis
(``tests/property/test_fuzz.py``); ``scripts/fuzz.py --minutes N`` runs it longer and writes a minimal
reproducer (:func:`minimise`) for every new finding.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

__all__ = [
    "OPS_FIXED",
    "OPS_PER_BYTE",
    "Finding",
    "Mutator",
    "OperationCounter",
    "Outcome",
    "Seed",
    "Target",
    "fingerprint",
    "minimise",
    "seeds",
    "targets",
]

OPS_FIXED: Final = 20_000
"""The work any message may take, whatever its size (one-off work such as compiling the schemas is not
counted: :func:`targets` warms every target up before use)."""
OPS_PER_BYTE: Final = 20
"""The work each byte of an input may add. Seeds measure one or two operations per byte (counted as
:class:`OperationCounter` does); a quadratic path passes this bound for inputs of a few kilobytes.
Agreements get ten times the fixed part and three times the per-byte part: their schema errors are
explained by ``xmlschema``, which walks the whole document in Python (about 20 operations per byte)."""

_ROOT: Final = Path(__file__).resolve().parents[2]
_SHARED: Final = _ROOT.parent / "shared"


# --------------------------------------------------------------------------------------------- counting


class OperationCounter:
    """Counts the Python calls and executed lines (each loop iteration is a line event) on this thread
    while it is active.

    ``sys.settrace`` sees every function call and every line run, loop iterations included, so the count is
    a deterministic measure of work for the same input and code, unlike elapsed time; a loop inside one C
    call (libxml2) counts once, which is why :mod:`msh.safexml` bounds what libxml2 is given.
    """

    def __init__(self) -> None:
        self.ops = 0

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        self.ops += 1
        return self._trace

    @contextmanager
    def counting(self) -> Iterator[OperationCounter]:
        previous = sys.gettrace()
        sys.settrace(self._trace)
        try:
            yield self
        finally:
            sys.settrace(previous)


# ---------------------------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one input did: ``kind`` (e.g. ``accepted``, ``refused:MimeProblem``, ``http:500``), whether
    that is ``documented``, the work it took (``ops``; None where not counted) and, for an undocumented
    one, ``detail`` (the exception and where it was raised)."""

    kind: str
    documented: bool
    ops: int | None = None
    detail: str = ""
    signature: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    """An input whose outcome is not documented or whose work passed the bound."""

    target: str
    outcome: Outcome
    data: bytes
    extra: str = ""


def _signature(exc: BaseException) -> tuple[str, str]:
    """A stable name for a bug: the exception type and the innermost frame of the project's code."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/msh/" in f.filename or "/cpa/" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].name}" if ours else "?"
    detail = "".join(traceback.format_exception(exc))[-4000:]
    return f"{type(exc).__name__}@{where}", detail


def _undocumented(exc: BaseException, ops: int | None) -> Outcome:
    signature, detail = _signature(exc)
    return Outcome(f"exception:{type(exc).__name__}", False, ops, detail, signature)


# ----------------------------------------------------------------------------------------------- targets


@dataclass
class Target:
    """A door of the MSH: ``run(data, extra)`` feeds it one input (``extra``: the Content-Type for
    messages, otherwise unused) and classifies what happened."""

    name: str
    kind: str  # the kind of seed it takes: "message", "capture" or "agreement"
    run: Callable[[bytes, str], Outcome]
    close: Callable[[], None] = field(default=lambda: None)
    ops_fixed: int = OPS_FIXED
    ops_per_byte: int = OPS_PER_BYTE

    def within(self, outcome: Outcome, size: int) -> bool:
        """Whether ``outcome``'s work stayed within this target's linear bound for ``size`` input bytes."""
        return outcome.ops is None or outcome.ops <= self.ops_fixed + self.ops_per_byte * size

    def finding(self, outcome: Outcome, size: int) -> str | None:
        """The signature of the finding ``outcome`` is (None: it is documented and within the bound)."""
        if not outcome.documented:
            return outcome.signature or outcome.kind
        if not self.within(outcome, size):
            return "over-bound"
        return None


def _parse_target(mode_name: str) -> Callable[[bytes, str], Outcome]:
    from msh.ebms.message import ParseMode, parse_message
    from msh.errors import EbmsError

    mode = ParseMode(mode_name)

    def run(data: bytes, content_type: str) -> Outcome:
        counter = OperationCounter()
        try:
            with counter.counting():
                message = parse_message(data, content_type or None, mode=mode)
                message.close()
        except EbmsError as exc:
            return Outcome(f"refused:{exc.error_code.value}", True, counter.ops)
        except Exception as exc:
            return _undocumented(exc, counter.ops)
        return Outcome("accepted", True, counter.ops)

    return run


def _capture_target(data: bytes, _extra: str) -> Outcome:
    from msh.ebms.message import ParseMode, parse_message, split_http_message
    from msh.errors import EbmsError

    counter = OperationCounter()
    try:
        with counter.counting():
            split = split_http_message(data)
            if split is None:
                return Outcome("not-a-capture", True, counter.ops)
            headers, body = split
            parse_message(body, headers.get("content-type"), mode=ParseMode.LENIENT).close()
    except EbmsError as exc:
        return Outcome(f"refused:{exc.error_code.value}", True, counter.ops)
    except Exception as exc:
        return _undocumented(exc, counter.ops)
    return Outcome("accepted", True, counter.ops)


def _warm_agreement_loader() -> None:
    from cpa.schema import AGREEMENT_SCHEMA

    AGREEMENT_SCHEMA.explainer()  # the readable explanations of schema errors compile their schema on first use


def _agreement_target(data: bytes, _extra: str) -> Outcome:
    from cpa.errors import CpaError
    from cpa.loader import load

    counter = OperationCounter()
    try:
        with counter.counting():
            load(data)
    except CpaError:
        return Outcome("refused", True, counter.ops)
    except Exception as exc:
        return _undocumented(exc, counter.ops)
    return Outcome("loaded", True, counter.ops)


class _EndpointHarness:
    """Party B's MSH on a memory store, its ASGI endpoint called in process on a loop of its own."""

    def __init__(self) -> None:
        import tomllib

        from msh.runtime.config import settings_from_mapping
        from msh.runtime.msh import Msh
        from msh.transport.asgi import Endpoint

        config = _ROOT / "samples" / "config" / "party-b.toml"
        data = tomllib.loads(config.read_text(encoding="utf-8"))
        data["server"] = {**data["server"], "tls": False, "port": 0}
        data["store"] = {**data["store"], "url": "memory:"}
        settings = settings_from_mapping(data, base_dir=config.parent, source=str(config), env={})
        self.msh = Msh(settings)
        self.endpoint = Endpoint(self.msh, path=settings.server.path, max_body_bytes=settings.server.max_body_bytes)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-endpoint", daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.msh.start(), self.loop).result(30)

    def request(self, body: bytes, headers: Sequence[tuple[bytes, bytes]]) -> tuple[int, dict[str, str], bytes]:
        async def call() -> tuple[int, dict[str, str], bytes]:
            chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)] or [b""]
            events = [
                {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
                for i, chunk in enumerate(chunks)
            ]
            sent: list[MutableMapping[str, Any]] = []

            async def receive() -> MutableMapping[str, Any]:
                return events.pop(0) if events else {"type": "http.disconnect"}

            async def send(message: MutableMapping[str, Any]) -> None:
                sent.append(message)

            scope = {
                "type": "http",
                "method": "POST",
                "path": "/msh",
                "headers": list(headers),
                "client": ("127.0.0.1", 1),
            }
            await self.endpoint(scope, receive, send)
            start = next(m for m in sent if m["type"] == "http.response.start")
            answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
            return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, answer

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(120)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.msh.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.msh.close()


def _endpoint_target() -> Target:
    from msh.ebms.message import ParseMode, parse_message
    from msh.errors import EbmsError

    harness = _EndpointHarness()

    def run(data: bytes, content_type: str) -> Outcome:
        headers: list[tuple[bytes, bytes]] = [(b"soapaction", b'"ebXML"')]
        if content_type:
            headers.append((b"content-type", content_type.encode("latin-1", "replace")))
        try:
            status, response_headers, body = harness.request(data, headers)
        except Exception as exc:
            return _undocumented(exc, None)
        kind = f"http:{status}"
        if 400 <= status < 500:
            return Outcome(kind, True)
        if status in (200, 202, 500):
            if status == 202 and not body:
                return Outcome(kind, True)
            try:
                reply = parse_message(body, response_headers.get("content-type"), mode=ParseMode.LENIENT)
            except EbmsError as exc:
                return Outcome(kind, False, None, f"HTTP {status} with a body that is no ebXML message: {exc}", kind)
            try:
                fault = reply.envelope.fault
            finally:
                reply.close()
            if status == 500 and fault is None:
                return Outcome(kind, False, None, "HTTP 500 without a SOAP Fault", "500-without-fault")
            return Outcome(kind, True)
        return Outcome(kind, False, None, f"HTTP {status} is not an answer the endpoint documents", kind)

    return Target("endpoint", "message", run, harness.close)


def targets(names: Sequence[str] | None = None) -> list[Target]:
    """The targets (all, or those ``names``), each warmed up once so that one-off work (compiling the
    schemas) is not counted against the first input."""
    chosen = list(names or ("parse-strict", "parse-lenient", "capture", "agreement", "endpoint"))
    built: list[Target] = []
    for name in chosen:
        if name == "parse-strict":
            built.append(Target(name, "message", _parse_target("strict")))
        elif name == "parse-lenient":
            built.append(Target(name, "message", _parse_target("lenient")))
        elif name == "capture":
            built.append(Target(name, "capture", _capture_target))
        elif name == "agreement":
            _warm_agreement_loader()
            built.append(
                Target(name, "agreement", _agreement_target, ops_fixed=10 * OPS_FIXED, ops_per_byte=3 * OPS_PER_BYTE)
            )
        elif name == "endpoint":
            built.append(_endpoint_target())
        else:
            raise ValueError(
                f"no fuzz target {name!r}; the targets are parse-strict, parse-lenient, capture, agreement, endpoint"
            )
    warm = Mutator(random.Random(0))
    for target in built:
        pool = seeds(target.kind)
        for seed in pool[:2]:
            target.run(seed.data, seed.content_type)
        for seed in pool[:30]:  # the error paths too
            target.run(*warm.mutate(seed, pool))
    return built


# ------------------------------------------------------------------------------------------------- seeds


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
    samples = _ROOT / "samples"
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
    from msh.ebms.message import build_message
    from msh.runtime.compose import Payload, Submission, compose

    agreement = load(_ROOT / "samples" / "cpas" / "demo-a-b.xml")
    registry = CpaRegistry([agreement])
    party_type = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
    a, b = ("123456789", party_type), ("987654321", party_type)
    now = datetime.now(UTC)
    built = []
    for n, payloads in enumerate(((b"<order n='1'/>",), (b"<a/>", bytes(range(256)) * 8), ())):
        params = registry.resolve(
            agreement.cpaid,
            from_party=a,
            to_party=b,
            service="urn:example:services:ordering",
            action="NewOrder",
            now=now,
        )
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


# ---------------------------------------------------------------------------------------------- mutation


_TAG: Final = re.compile(rb"<([A-Za-z_][\w.:-]*)[^<>]*?/?>")
_CHARSET: Final = re.compile(rb"charset=\"?[\w.:-]+\"?", re.IGNORECASE)
_BOUNDARY_LINE: Final = re.compile(rb"\r?\n--[^\r\n]+")
_CONTENT_TYPES: Final = (
    "multipart/related",
    'multipart/related; boundary=""',
    'multipart/related; type="text/xml"; boundary="x"; start="<nope>"',
    "text/xml",
    'text/xml; charset="undefined"',
    'text/xml; charset="utf-16"',
    'text/xml; charset="punycode"',
    "application/soap+xml",
    "text/plain",
    "",
    "multipart/related; boundary=" + "b" * 5000,
    'text/xml; charset="\x00"',
)
_TEXT_VALUE: Final = re.compile(rb">([^<>]{1,200})</|=\"([^\"<>]{1,200})\"")
_VALUES: Final = (
    b"P99999999999999999999Y",
    b"PT99999999999999999999999S",
    b"-P1D",
    b"P1M",
    b"P0D",
    b"9" * 400,
    b"-1",
    b"0",
    b"1e309",
    b"NaN",
    b"99999-12-31T23:59:59Z",
    b"0000-01-01T00:00:00Z",
    b"2026-02-30T25:61:61Z",
    b"true1",
    b"",
    b" ",
    b"cid:",
    b"urn:oasis:names:tc:ebxml-msg:actor:nextMSH",
    b"http://schemas.xmlsoap.org/soap/actor/next",
    b"\xc3\x28",
)
_NOISE: Final = (
    b"<!DOCTYPE r SYSTEM 'file:///etc/passwd'>",
    b"<!ENTITY x 'y'>",
    b"&x;",
    b"\x00",
    b"\xff\xfe",
    b"]]>",
    b"<![CDATA[",
    b"xmlns=''",
    b' xmlns:rel="relative/uri"',
    b"--",
    b"\r\n\r\n",
    b"Content-Transfer-Encoding: base64\r\n",
    b"Content-Transfer-Encoding: quoted-printable\r\n",
    b"=\r\n",
    b"=ZZ",
    b"\xef\xbb\xbf",
    b"eb:version='9.9'",
    b"SOAP:actor='urn:nowhere'",
    b"<eb:Reference xlink:href='cid:nowhere'/>",
    b"PT1M",
    b"P999999999999999999Y",
    b"-P1D",
    b"9999-12-31T23:59:59Z",
    b"0001-01-01T00:00:00-14:00",
)


class Mutator:
    """Changes inputs at random, from a seeded random source (the same seed gives the same inputs)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def mutate(self, seed: Seed, others: Sequence[Seed], rounds: int | None = None) -> tuple[bytes, str]:
        """``seed`` changed 1 to 4 times (``rounds``), and its Content-Type now and then."""
        data, content_type = seed.data, seed.content_type
        for _ in range(rounds if rounds is not None else self.rng.randint(1, 4)):
            data = self.rng.choice(self._operators)(self, data, others)
        if seed.content_type and self.rng.random() < 0.1:
            content_type = self.rng.choice(_CONTENT_TYPES)
        return data, content_type

    # -- byte level

    def _flip(self, data: bytes, others: Sequence[Seed]) -> bytes:
        if not data:
            return b"\x00"
        buf = bytearray(data)
        for _ in range(self.rng.randint(1, 8)):
            i = self.rng.randrange(len(buf))
            buf[i] ^= 1 << self.rng.randrange(8)
        return bytes(buf)

    def _delete(self, data: bytes, others: Sequence[Seed]) -> bytes:
        if len(data) < 2:
            return data
        i = self.rng.randrange(len(data))
        return data[:i] + data[i + self.rng.randint(1, max(1, len(data) // 8)) :]

    def _insert(self, data: bytes, others: Sequence[Seed]) -> bytes:
        i = self.rng.randrange(len(data) + 1)
        chunk = self.rng.choice(_NOISE) if self.rng.random() < 0.7 else self.rng.randbytes(self.rng.randint(1, 32))
        return data[:i] + chunk + data[i:]

    def _repeat(self, data: bytes, others: Sequence[Seed]) -> bytes:
        if not data:
            return data
        i = self.rng.randrange(len(data))
        j = min(len(data), i + self.rng.randint(1, 64))
        return data[:j] + data[i:j] * self.rng.choice((2, 10, 100, 1000)) + data[j:]

    def _truncate(self, data: bytes, others: Sequence[Seed]) -> bytes:
        return data[: self.rng.randrange(len(data) + 1)]

    def _splice(self, data: bytes, others: Sequence[Seed]) -> bytes:
        other = self.rng.choice(others).data if others else data
        i, j = self.rng.randrange(len(data) + 1), self.rng.randrange(len(other) + 1)
        return data[:i] + other[j:]

    # -- structure aware

    def _repeat_element(self, data: bytes, others: Sequence[Seed]) -> bytes:
        tags = list(_TAG.finditer(data))
        if not tags:
            return data
        tag = self.rng.choice(tags)
        element = tag.group(0)
        if not element.endswith(b"/>"):
            element = element[:-1] + b"/>"
        count = self.rng.choice((10, 300, 3000))
        return data[: tag.end()] + element * count + data[tag.end() :]

    def _namespaces(self, data: bytes, others: Sequence[Seed]) -> bytes:
        tags = list(_TAG.finditer(data))
        if not tags:
            return data
        tag = self.rng.choice(tags)
        count = self.rng.choice((5, 300, 3000))
        declarations = b"".join(b' xmlns:z%d="urn:z:%d"' % (i, i) for i in range(count))
        at = tag.start() + 1 + len(tag.group(1))
        return data[:at] + declarations + data[at:]

    def _attributes(self, data: bytes, others: Sequence[Seed]) -> bytes:
        tags = list(_TAG.finditer(data))
        if not tags:
            return data
        tag = self.rng.choice(tags)
        count = self.rng.choice((5, 300, 5000))
        attributes = b"".join(b' a%d="v"' % i for i in range(count))
        at = tag.start() + 1 + len(tag.group(1))
        return data[:at] + attributes + data[at:]

    def _nest(self, data: bytes, others: Sequence[Seed]) -> bytes:
        tags = list(_TAG.finditer(data))
        if not tags:
            return data
        tag = self.rng.choice(tags)
        depth = self.rng.choice((50, 300, 3000))
        return data[: tag.end()] + b"<n>" * depth + b"</n>" * depth + data[tag.end() :]

    def _encoding(self, data: bytes, others: Sequence[Seed]) -> bytes:
        encoding = self.rng.choice(("utf-16", "utf-16-be", "utf-32", "utf-7", "latin-1", "cp500"))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        text = re.sub(r"encoding=['\"][^'\"]*['\"]", f"encoding='{encoding}'", text, count=1)
        try:
            return text.encode(encoding)
        except UnicodeEncodeError:
            return data

    def _charset(self, data: bytes, others: Sequence[Seed]) -> bytes:
        value = self.rng.choice((b"undefined", b"punycode", b"unicode_escape", b"utf-16", b"x\x00y", b"base64"))
        return _CHARSET.sub(b'charset="' + value + b'"', data, count=1)

    def _value(self, data: bytes, others: Sequence[Seed]) -> bytes:
        values = list(_TEXT_VALUE.finditer(data))
        if not values:
            return data
        value = self.rng.choice(values)
        group = 1 if value.group(1) is not None else 2
        return data[: value.start(group)] + self.rng.choice(_VALUES) + data[value.end(group) :]

    def _boundary(self, data: bytes, others: Sequence[Seed]) -> bytes:
        lines = list(_BOUNDARY_LINE.finditer(data))
        if not lines:
            return data
        line = self.rng.choice(lines)
        replacement = self.rng.choice((b"", b"\r\n--other", line.group(0) + b"--", line.group(0) * 3))
        return data[: line.start()] + replacement + data[line.end() :]

    _operators: Final = (
        _flip,
        _delete,
        _insert,
        _repeat,
        _truncate,
        _splice,
        _repeat_element,
        _namespaces,
        _attributes,
        _nest,
        _encoding,
        _charset,
        _value,
        _boundary,
    )


# -------------------------------------------------------------------------------------------- minimising


def minimise(
    target: Target, data: bytes, content_type: str, signature: str, *, budget: int = 2000, seconds: float = 120.0
) -> bytes:
    """A smaller input that still gives the finding ``signature`` (an exception's signature, or
    ``"over-bound"`` for work past the linear bound): ranges are cut away while the finding stays, halving
    their size down to single bytes, within ``budget`` runs of the target and about ``seconds``."""
    import time

    deadline = time.monotonic() + seconds

    def same(candidate: bytes) -> bool:
        return target.finding(target.run(candidate, content_type), len(candidate)) == signature

    runs = 0
    size = max(1, len(data) // 2)
    while size >= 1 and runs < budget and time.monotonic() < deadline:
        start = 0
        while start < len(data) and runs < budget and time.monotonic() < deadline:
            candidate = data[:start] + data[start + size :]
            runs += 1
            if candidate != data and same(candidate):
                data = candidate
            else:
                start += size
        size //= 2
    return data


def fingerprint(data: bytes) -> str:
    """A short name for an input (the start of its SHA-256)."""
    return hashlib.sha256(data).hexdigest()[:12]
