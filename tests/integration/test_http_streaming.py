"""The HTTP transport streams a :class:`~msh.transport.port.BodySource` with its Content-Length, and gives up
on a body that stops moving or moves too slowly (sending.progress_timeout, sending.min_rate), against a plain
asyncio server on 127.0.0.1 that reads as slowly as each test says."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from msh.transport.http import HttpTransport
from msh.transport.port import BodySource, Request, TransportFailure

MiB = 1024 * 1024
Reader = Callable[[asyncio.StreamReader, int], Awaitable[bytes]]


class Pattern(io.RawIOBase):
    """``size`` bytes produced as read; counts how many streams were opened over it."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left, 64 * 1024)
        buffer[:n] = b"p" * n
        self.left -= n
        return n


async def serve(read_body: Reader) -> tuple[asyncio.Server, int, dict[str, str]]:
    seen: dict[str, str] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        headers = dict(line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:] if ": " in line)
        seen.update({k.lower(): v for k, v in headers.items()})
        body = await read_body(reader, int(seen.get("content-length", "0")))
        seen["sha256"] = hashlib.sha256(body).hexdigest()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


def transport(progress: float = 5.0, min_rate: int = 1) -> HttpTransport:
    return HttpTransport(
        timeout=timedelta(seconds=5),
        connect_timeout=timedelta(seconds=2),
        progress_timeout=timedelta(seconds=progress),
        min_rate=min_rate,
    )


async def read_all(reader: asyncio.StreamReader, size: int) -> bytes:
    return await reader.readexactly(size)


def test_a_body_source_goes_out_whole_with_its_content_length() -> None:
    async def scenario() -> dict[str, str]:
        server, port, seen = await serve(read_all)
        client = transport()
        size = 8 * MiB + 3
        opened: list[Pattern] = []

        def open_body() -> Pattern:
            opened.append(Pattern(size))
            return opened[-1]

        source = BodySource(size, open_body)  # type: ignore[arg-type]
        try:
            for _ in range(2):  # a transmission and a resend: the source is opened again
                response = await client.send(Request(f"http://127.0.0.1:{port}/msh", "text/plain", source))
                assert response.status == 200 and response.body == b"ok"
        finally:
            await client.close()
            server.close()
        assert len(opened) == 2 and all(p.left == 0 for p in opened)
        return seen

    seen = asyncio.run(scenario())
    assert seen["content-length"] == str(8 * MiB + 3)
    assert "transfer-encoding" not in seen
    assert seen["sha256"] == hashlib.sha256(b"p" * (8 * MiB + 3)).hexdigest()


def test_a_body_that_stops_moving_is_given_up() -> None:
    given_up = asyncio.Event()

    async def never_read(reader: asyncio.StreamReader, size: int) -> bytes:
        await given_up.wait()  # reads nothing until the client has given up
        return b""

    async def scenario() -> str:
        server, port, _ = await serve(never_read)
        client = transport(progress=1.0)
        try:
            with pytest.raises(TransportFailure) as failed:
                await client.send(
                    Request(
                        f"http://127.0.0.1:{port}/msh", "text/plain", BodySource(256 * MiB, lambda: Pattern(256 * MiB))
                    )  # type: ignore[arg-type,return-value]
                )
        finally:
            given_up.set()
            await client.close()
            server.close()
        assert failed.value.transmitted
        return failed.value.reason

    reason = asyncio.run(scenario())
    assert reason.startswith("no progress for 1 s after ") and "of 268435456 bytes of the body" in reason


def test_a_body_slower_than_the_minimum_rate_is_given_up() -> None:
    async def trickle(reader: asyncio.StreamReader, size: int) -> bytes:
        got = b""
        while len(got) < size:
            got += await reader.read(16 * 1024)
            await asyncio.sleep(0.05)  # about 320 KiB/s at most
        return got

    async def scenario() -> str:
        server, port, _ = await serve(trickle)
        client = transport(progress=1.0, min_rate=64 * MiB)
        try:
            with pytest.raises(TransportFailure) as failed:
                await client.send(
                    Request(
                        f"http://127.0.0.1:{port}/msh", "text/plain", BodySource(64 * MiB, lambda: Pattern(64 * MiB))
                    )  # type: ignore[arg-type,return-value]
                )
        finally:
            await client.close()
            server.close()
        return failed.value.reason

    reason = asyncio.run(scenario())
    assert "under the minimum of 67108864 (sending.min_rate)" in reason


class Damaged(Pattern):
    """A stored body whose reading fails after ``good`` bytes (a damaged body file)."""

    def __init__(self, size: int, good: int) -> None:
        super().__init__(size)
        self.good = good

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.good <= 0:
            raise OSError("blob file x.blob is damaged: its SHA-256 is not the one recorded")
        n = super().readinto(buffer[: self.good])
        self.good -= n
        return n


def test_a_body_that_cannot_be_read_is_a_transport_failure_naming_why() -> None:
    async def scenario() -> tuple[TransportFailure, TransportFailure]:
        server, port, _ = await serve(read_all)
        client = transport()
        url = f"http://127.0.0.1:{port}/msh"

        def missing() -> Pattern:
            raise OSError("blob file y.blob is missing")

        try:
            with pytest.raises(TransportFailure) as unopened:
                await client.send(Request(url, "text/plain", BodySource(4 * MiB, missing)))  # type: ignore[arg-type]
            with pytest.raises(TransportFailure) as broken:
                await client.send(
                    Request(url, "text/plain", BodySource(4 * MiB, lambda: Damaged(4 * MiB, MiB)))  # type: ignore[arg-type,return-value]
                )
        finally:
            await client.close()
            server.close()
        return unopened.value, broken.value

    unopened, broken = asyncio.run(scenario())
    assert not unopened.transmitted and "could not be read: blob file y.blob is missing" in unopened.reason
    assert broken.transmitted and "could not be read: blob file x.blob is damaged" in broken.reason
