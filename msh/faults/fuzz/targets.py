"""The doors of the MSH a fuzz input is fed to: the codec in strict and lenient mode, raw-capture reading,
the agreement loader and the ASGI endpoint (party B's MSH on a memory store, called in process).

Each :class:`Target` runs one input and classifies what happened as an
:class:`~msh.faults.fuzz.outcomes.Outcome`, counting its work with
:class:`~msh.faults.fuzz.counting.OperationCounter` where it can; :func:`targets` builds and warms them up.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from msh.faults.fuzz.counting import OPS_FIXED, OPS_PER_BYTE, OperationCounter
from msh.faults.fuzz.mutator import Mutator
from msh.faults.fuzz.outcomes import Outcome, undocumented
from msh.faults.fuzz.seeds import PROJECT_ROOT, seeds

__all__ = ["Target", "targets"]


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
            return undocumented(exc, counter.ops)
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
        return undocumented(exc, counter.ops)
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
        return undocumented(exc, counter.ops)
    return Outcome("loaded", True, counter.ops)


class _EndpointHarness:
    """Party B's MSH on a memory store, its ASGI endpoint called in process on a loop of its own."""

    def __init__(self) -> None:
        import tomllib

        from msh.runtime.config import settings_from_mapping
        from msh.runtime.msh import Msh
        from msh.transport.asgi import Endpoint

        config = PROJECT_ROOT / "samples" / "config" / "party-b.toml"
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
            return undocumented(exc, None)
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
