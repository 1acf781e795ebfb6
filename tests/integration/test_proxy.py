"""The lossy TCP proxy (msh.faults.proxy): forwarding, losses, down, stop, thread hosting and the CLI.

Everything runs on 127.0.0.1 with ports chosen by the kernel; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest

from msh.faults import LossyProxy, ProxyStats, run_in_thread
from msh.faults.proxy import parse_address

HOST = "127.0.0.1"
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
    """Run one test coroutine, failing instead of hanging."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


class LineServer:
    """An HTTP-ish server: answers each request line ``X\\n`` with ``OK X\\n`` on the same connection."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        return HOST, int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> LineServer:
        self._server = await asyncio.start_server(self._handle, HOST, 0)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while (line := await self._request(reader, writer)).endswith(b"\n"):
                self.requests.append(line)
                writer.write(b"OK " + line)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def _request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """The next request line (shorter or without its newline when the client stopped)."""
        return await reader.readline()


class EchoServer(LineServer):
    """Echoes every byte back; passes a half-close on."""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.write_eof()
        except OSError:
            pass
        finally:
            writer.close()


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await asyncio.wait_for(writer.wait_closed(), 5)


async def exchange(port: int, request: bytes) -> bytes | None:
    """One request on a fresh connection: the answer line, or None when the connection died first."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(request)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 5)
        return line if line.endswith(b"\n") else None
    except OSError:
        return None
    finally:
        await close(writer)


async def dead(reader: asyncio.StreamReader) -> bool:
    """True when the connection is closed or reset without delivering any byte."""
    try:
        return await asyncio.wait_for(reader.read(1), 5) == b""
    except OSError:
        return True


async def with_proxy(
    server: LineServer, body: Callable[[LossyProxy], Awaitable[T]], **settings: Any
) -> tuple[T, ProxyStats]:
    await server.start()
    proxy = LossyProxy((HOST, 0), server.address, **settings)
    await proxy.start()
    try:
        return await body(proxy), proxy.stats()
    finally:
        await proxy.stop()
        await server.stop()


# -- forwarding ---------------------------------------------------------------------------------


def test_forwards_requests_and_responses_unchanged_on_keep_alive() -> None:
    server = LineServer()

    async def body(proxy: LossyProxy) -> list[bytes]:
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        answers = []
        for n in range(5):
            writer.write(b"request %d\n" % n)
            await writer.drain()
            answers.append(await asyncio.wait_for(reader.readline(), 5))
        await close(writer)
        return answers

    answers, stats = run(with_proxy(server, body))
    assert answers == [b"OK request %d\n" % n for n in range(5)]
    assert server.requests == [b"request %d\n" % n for n in range(5)]
    assert stats.connections == 1
    assert stats.requests_forwarded == stats.responses_forwarded == 5
    assert stats.requests_dropped == stats.responses_dropped == 0
    assert stats.bytes_up == sum(len(b"request %d\n" % n) for n in range(5))
    assert stats.bytes_down == sum(len(a) for a in answers)


@pytest.mark.parametrize("delay", [0.0, 0.001])
def test_forwards_five_megabytes_both_ways(delay: float) -> None:
    payload = os.urandom(5 * 1024 * 1024)
    server = EchoServer()

    async def body(proxy: LossyProxy) -> bytes:
        reader, writer = await asyncio.open_connection(HOST, proxy.port)

        async def send() -> None:
            for start in range(0, len(payload), 256 * 1024):
                writer.write(payload[start : start + 256 * 1024])
                await writer.drain()
            writer.write_eof()

        received, _ = await asyncio.gather(reader.read(), send())
        await close(writer)
        return received

    received, stats = run(with_proxy(server, body, delay=delay), timeout=60)
    assert hashlib.sha256(received).digest() == hashlib.sha256(payload).digest()
    assert stats.bytes_up == stats.bytes_down == len(payload)
    assert stats.requests_dropped == stats.responses_dropped == 0


# -- losses ----------------------------------------------------------------------------------------


def test_drop_requests_one_server_never_sees_data_and_client_is_cut_off() -> None:
    server = LineServer()

    async def body(proxy: LossyProxy) -> bool:
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        writer.write(b"lost\n")
        with contextlib.suppress(OSError):
            await writer.drain()
        cut = await dead(reader)
        await close(writer)
        return cut

    cut, stats = run(with_proxy(server, body, drop_requests=1.0))
    assert cut
    assert server.requests == []
    assert stats.requests_dropped == 1
    assert stats.requests_forwarded == stats.responses_forwarded == stats.responses_dropped == 0
    assert stats.bytes_up == stats.bytes_down == 0


def test_drop_responses_one_server_sees_request_but_client_gets_no_answer() -> None:
    server = LineServer()

    async def body(proxy: LossyProxy) -> bytes | None:
        return await exchange(proxy.port, b"processed\n")

    answer, stats = run(with_proxy(server, body, drop_responses=1.0))
    assert answer is None
    assert server.requests == [b"processed\n"]
    assert stats.requests_forwarded == 1
    assert stats.responses_dropped == 1
    assert stats.responses_forwarded == 0
    assert stats.bytes_down == 0


def test_drop_next_response_after_a_large_request_loses_that_answer_once() -> None:
    server = LineServer()
    large = b"L" * 5000 + b"\n"

    async def body(proxy: LossyProxy) -> list[bytes | None]:
        proxy.drop_next_response_after(4000)
        return [
            await exchange(proxy.port, b"small\n"),  # a small request (a handshake flight): answered
            await exchange(proxy.port, large),  # processed, its answer lost
            await exchange(proxy.port, large),  # once only
        ]

    answers, stats = run(with_proxy(server, body))
    assert answers == [b"OK small\n", None, b"OK " + large]
    assert server.requests == [b"small\n", large, large]
    assert (stats.responses_dropped, stats.responses_forwarded) == (1, 2)


class InterruptingServer(LineServer):
    """Speaks first in the middle of a request (as a TLS 1.3 server sends session tickets when it likes):
    ``NOTE\\n`` after the first bytes of each request, then ``OK X\\n`` once the line is complete."""

    async def _request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        first = await reader.read(1)
        if first:
            writer.write(b"NOTE\n")
            await writer.drain()
        return first + await reader.readline() if first else b""


def test_drop_next_response_after_counts_a_request_the_server_interrupted() -> None:
    server = InterruptingServer()
    large = b"L" * 5000 + b"\n"

    async def body(proxy: LossyProxy) -> tuple[bytes, bytes | None]:
        proxy.drop_next_response_after(4000)
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        try:
            writer.write(large[:3000])
            await writer.drain()
            note = await asyncio.wait_for(reader.readline(), 5)  # the server spoke: a message of its own
            writer.write(large[3000:])  # 3,001 more bytes: 6,001 on the connection, the answer is lost
            await writer.drain()
            try:
                answer = await asyncio.wait_for(reader.readline(), 5)
            except OSError:
                answer = b""
            return note, answer if answer.endswith(b"\n") else None
        finally:
            await close(writer)

    (note, answer), stats = run(with_proxy(server, body))
    assert (note, answer) == (b"NOTE\n", None)
    assert server.requests == [large]
    assert stats.responses_dropped == 1


def test_drop_next_response_after_counts_from_the_arming() -> None:
    server = LineServer()
    large = b"L" * 5000 + b"\n"

    async def body(proxy: LossyProxy) -> list[bytes | None]:
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        answers: list[bytes | None] = []
        try:
            for request, arm in ((large, False), (b"small\n", True), (large, False)):
                if arm:  # the large request before the arming does not count
                    proxy.drop_next_response_after(4000)
                writer.write(request)
                await writer.drain()
                try:
                    line = await asyncio.wait_for(reader.readline(), 5)
                except OSError:
                    line = b""
                answers.append(line if line.endswith(b"\n") else None)
        finally:
            await close(writer)
        return answers

    answers, stats = run(with_proxy(server, body))
    assert answers == [b"OK " + large, b"OK small\n", None]
    assert (stats.responses_dropped, stats.responses_forwarded) == (1, 2)


def test_drop_next_response_after_armed_again_keeps_the_counts() -> None:
    # A test that re-arms the loss while a request is on its way still loses that request's answer.
    server = LineServer()
    large = b"L" * 5000 + b"\n"

    async def body(proxy: LossyProxy) -> bytes | None:
        proxy.drop_next_response_after(4000)
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        try:
            writer.write(large[:3000])
            await writer.drain()
            await asyncio.sleep(0.05)  # bounded: lets the proxy pass the first part on before the re-arming
            proxy.drop_next_response_after(4000)
            writer.write(large[3000:])
            await writer.drain()
            try:
                answer = await asyncio.wait_for(reader.readline(), 5)
            except OSError:
                answer = b""
            return answer if answer.endswith(b"\n") else None
        finally:
            await close(writer)

    answer, stats = run(with_proxy(server, body))
    assert answer is None
    assert server.requests == [large]
    assert stats.responses_dropped == 1


def test_drop_next_response_after_needs_a_size() -> None:
    with pytest.raises(ValueError, match="request_bytes must be at least 1"):
        LossyProxy((HOST, 0), (HOST, 1)).drop_next_response_after(0)


def _lossy_run(seed: int, attempts: int) -> tuple[list[bytes | None], ProxyStats, int]:
    server = LineServer()

    async def body(proxy: LossyProxy) -> list[bytes | None]:
        return [await exchange(proxy.port, b"message %d\n" % n) for n in range(attempts)]

    answers, stats = run(with_proxy(server, body, drop_requests=0.5, drop_responses=0.5, seed=seed), timeout=60)
    return answers, stats, len(server.requests)


def test_seeded_losses_add_up_over_many_exchanges() -> None:
    attempts = 200
    answers, stats, delivered = _lossy_run(seed=2024, attempts=attempts)
    answered = sum(answer is not None for answer in answers)
    assert stats.connections == attempts
    assert stats.requests_dropped > 0
    assert stats.responses_dropped > 0
    assert answered > 0
    assert stats.requests_forwarded + stats.requests_dropped == attempts
    assert stats.responses_forwarded + stats.responses_dropped == stats.requests_forwarded
    assert delivered == stats.requests_forwarded
    assert answered == stats.responses_forwarded
    assert all(answer == b"OK message %d\n" % n for n, answer in enumerate(answers) if answer is not None)


def test_same_seed_loses_the_same_messages() -> None:
    first, first_stats, _ = _lossy_run(seed=7, attempts=40)
    second, second_stats, _ = _lossy_run(seed=7, attempts=40)
    assert first == second
    assert first_stats == second_stats


def test_loss_settings_change_at_run_time() -> None:
    server = LineServer()

    async def body(proxy: LossyProxy) -> list[bytes | None]:
        answers = [await exchange(proxy.port, b"a\n")]
        proxy.drop_requests = 1.0
        answers.append(await exchange(proxy.port, b"b\n"))
        proxy.drop_requests = 0.0
        answers.append(await exchange(proxy.port, b"c\n"))
        return answers

    answers, stats = run(with_proxy(server, body))
    assert answers == [b"OK a\n", None, b"OK c\n"]
    assert server.requests == [b"a\n", b"c\n"]
    assert (stats.requests_forwarded, stats.requests_dropped) == (2, 1)


@pytest.mark.parametrize("field", ["drop_requests", "drop_responses"])
@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan")])
def test_probabilities_are_validated(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        LossyProxy((HOST, 0), (HOST, 1), **{field: value})
    proxy = LossyProxy((HOST, 0), (HOST, 1))
    with pytest.raises(ValueError, match=field):
        setattr(proxy, field, value)


def test_delay_is_validated() -> None:
    with pytest.raises(ValueError, match="delay"):
        LossyProxy((HOST, 0), (HOST, 1), delay=-1)


def test_port_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = LossyProxy((HOST, 0), (HOST, 1)).port


# -- down, unreachable target, stop -------------------------------------------------------------------


def test_down_refuses_new_connections_aborts_open_ones_and_recovers() -> None:
    server = LineServer()

    async def body(proxy: LossyProxy) -> tuple[bool, bool, bytes | None]:
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        writer.write(b"before\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.readline(), 5) == b"OK before\n"
        proxy.down = True
        open_cut = await dead(reader)
        await close(writer)
        refused = await exchange(proxy.port, b"while down\n") is None
        proxy.down = False
        return open_cut, refused, await exchange(proxy.port, b"after\n")

    (open_cut, refused, after), stats = run(with_proxy(server, body))
    assert open_cut and refused
    assert after == b"OK after\n"
    assert server.requests == [b"before\n", b"after\n"]
    assert stats.connections_refused == 1
    assert stats.connections == 2


def test_unreachable_target_cuts_the_client_off() -> None:
    async def body() -> tuple[bool, ProxyStats]:
        with socket.socket() as placeholder:  # a port nobody listens on
            placeholder.bind((HOST, 0))
            target = placeholder.getsockname()
        async with LossyProxy((HOST, 0), target) as proxy:
            answer = await exchange(proxy.port, b"anyone?\n")
            return answer is None, proxy.stats()

    cut, stats = run(body())
    assert cut
    assert stats.target_failures == 1


def test_stop_closes_listener_and_open_connections() -> None:
    server = LineServer()

    async def body() -> None:
        await server.start()
        proxy = LossyProxy((HOST, 0), server.address)
        await proxy.start()
        port = proxy.port
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"hello\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.readline(), 5) == b"OK hello\n"
        await proxy.stop()
        assert await dead(reader)
        await close(writer)
        with pytest.raises(OSError):
            await asyncio.wait_for(asyncio.open_connection(HOST, port), 5)
        await proxy.stop()  # idempotent
        await server.stop()

    run(body())


def record_loop_reports() -> list[dict[str, Any]]:
    """Collect what the running loop would otherwise log ("Exception in callback ...", "Task exception was
    never retrieved" ...) instead of printing it to stderr."""
    reports: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: reports.append(context))
    return reports


async def settle() -> None:
    """Let callbacks scheduled by aborts and cancellations run, and report tasks freed unretrieved."""
    for _ in range(5):
        await asyncio.sleep(0)
    gc.collect()
    await asyncio.sleep(0.01)


def test_stop_with_busy_idle_and_fresh_connections_reports_nothing_to_the_loop() -> None:
    server = EchoServer()

    async def body() -> list[dict[str, Any]]:
        reports = record_loop_reports()
        await server.start()
        proxy = LossyProxy((HOST, 0), server.address)
        await proxy.start()
        # mid-transfer: the client keeps sending and never reads, so the pumps block in drain()
        busy_reader, busy_writer = await asyncio.open_connection(HOST, proxy.port)

        async def flood() -> None:
            with contextlib.suppress(OSError):
                while True:
                    busy_writer.write(b"x" * 65536)
                    await busy_writer.drain()

        flooding = asyncio.create_task(flood())
        idle_reader, idle_writer = await asyncio.open_connection(HOST, proxy.port)
        idle_writer.write(b"ping")
        await idle_writer.drain()
        assert await asyncio.wait_for(idle_reader.readexactly(4), 5) == b"ping"
        for _ in range(50):  # until the flood has filled the buffers on the way
            if proxy.stats().bytes_up >= 256 * 1024:
                break
            await asyncio.sleep(0.01)
        assert proxy.stats().bytes_up > 0
        # fresh: stop() comes right after the connect, while its handler is at most starting up
        fresh_reader, fresh_writer = await asyncio.open_connection(HOST, proxy.port)
        await asyncio.wait_for(proxy.stop(), 5)
        await asyncio.wait_for(flooding, 5)  # the flood ends on the reset
        for reader, writer in [(busy_reader, busy_writer), (idle_reader, idle_writer), (fresh_reader, fresh_writer)]:
            with contextlib.suppress(OSError):
                while await asyncio.wait_for(reader.read(65536), 5):
                    pass  # the echoes already on their way, then the reset
            await close(writer)
        await server.stop()
        await settle()
        return reports

    assert run(body()) == []


def test_down_and_dropped_messages_report_nothing_to_the_loop() -> None:
    server = LineServer()

    async def body(proxy: LossyProxy) -> list[dict[str, Any]]:
        reports = record_loop_reports()
        reader, writer = await asyncio.open_connection(HOST, proxy.port)
        writer.write(b"before\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.readline(), 5) == b"OK before\n"
        proxy.down = True
        assert await dead(reader)
        await close(writer)
        assert await exchange(proxy.port, b"while down\n") is None
        proxy.down = False
        proxy.drop_requests = 1.0
        assert await exchange(proxy.port, b"lost request\n") is None
        proxy.drop_requests, proxy.drop_responses = 0.0, 1.0
        assert await exchange(proxy.port, b"lost response\n") is None
        await settle()
        return reports

    reports, stats = run(with_proxy(server, body))
    assert reports == []
    assert (stats.connections_refused, stats.requests_dropped, stats.responses_dropped) == (1, 1, 1)


# -- thread hosting -----------------------------------------------------------------------------------


class _ThreadedLineServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _LineHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(OSError):
            for line in self.rfile:
                self.wfile.write(b"OK " + line)


def _sync_exchange(port: int, request: bytes) -> bytes | None:
    # A proxy that is down resets accepted connections at once; the reset can already reach connect().
    try:
        with socket.create_connection((HOST, port), timeout=5) as sock:
            sock.sendall(request)
            with sock.makefile("rb") as answers:
                line = answers.readline()
    except OSError:
        return None
    return line if line.endswith(b"\n") else None


def test_run_in_thread_serves_and_changes_settings_thread_safely() -> None:
    with _ThreadedLineServer((HOST, 0), _LineHandler) as server:
        serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        serving.start()
        try:
            with run_in_thread((HOST, 0), server.server_address[:2], seed=1) as running:
                assert running.proxy.port == running.port
                assert _sync_exchange(running.port, b"one\n") == b"OK one\n"
                running.set_loss(1.0, 0.0)
                assert _sync_exchange(running.port, b"two\n") is None
                running.set_loss(0.0, 1.0)
                assert _sync_exchange(running.port, b"three\n") is None
                running.set_loss(0.0, 0.0)
                running.set_down(True)
                assert _sync_exchange(running.port, b"four\n") is None
                running.set_down(False)
                assert _sync_exchange(running.port, b"five\n") == b"OK five\n"
                with pytest.raises(ValueError, match="drop_responses"):
                    running.set_loss(0.0, 2.0)
                stats = running.stats()
                thread = running._thread
                port = running.port
            assert thread is not None and not thread.is_alive()
            with pytest.raises(OSError), socket.create_connection((HOST, port), timeout=5):
                pass
        finally:
            server.shutdown()
    assert stats.requests_forwarded == 3
    assert stats.requests_dropped == 1
    assert stats.responses_forwarded == 2
    assert stats.responses_dropped == 1
    assert stats.connections_refused == 1


# -- command line ----------------------------------------------------------------------------------------


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:8082") == ("127.0.0.1", 8082)
    assert parse_address("8082") == ("127.0.0.1", 8082)
    assert parse_address("[::1]:8082") == ("::1", 8082)
    with pytest.raises(ValueError):
        parse_address("127.0.0.1:http")
    with pytest.raises(ValueError):
        parse_address("127.0.0.1:70000")


def test_cli_help_exits_zero() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "msh.faults.proxy", "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0
    assert "--drop-requests" in done.stdout
    assert "Warning" not in done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM handling is POSIX")
def test_cli_serves_and_prints_final_stats_on_sigterm() -> None:
    with socket.socket() as placeholder:
        placeholder.bind((HOST, 0))
        target = placeholder.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "msh.faults.proxy", "--listen", f"{HOST}:0", "--target", f"{HOST}:{target}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith(f"listening on {HOST}:")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=15)
    assert process.returncode == 0, err
    assert "final: connections=0" in out
