"""An MSH served for real (sockets, uvicorn, its runtime) on an event loop of its own in a background
thread, for tests and benchmarks that exercise the I/O itself; the logic is tested on the test network
(:mod:`msh.testing.network`) instead.

    with serving_in_thread(settings, msh) as port:
        ...  # POST to http(s)://127.0.0.1:<port><settings.server.path>
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from msh.runtime.config import Settings
from msh.runtime.msh import Msh
from msh.runtime.serving import bind, serve

__all__ = ["serving_in_thread"]


@contextlib.contextmanager
def serving_in_thread(settings: Settings, msh: Msh, *, port: int | None = None, timeout: float = 20.0) -> Iterator[int]:
    """Serve ``msh`` with ``settings`` on 127.0.0.1 (``port``, default: any free port) until the block
    ends; yields the port. Start and stop are bounded by ``timeout`` seconds (``AssertionError`` past
    it); the MSH is stopped, not closed (its store stays open for the caller to read)."""
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    up = threading.Event()
    ports: list[int] = []
    failure: list[BaseException] = []
    sock = bind("127.0.0.1", settings.server.port if port is None else port)

    def ready(bound: int) -> None:
        ports.append(bound)
        up.set()

    def run() -> None:
        try:
            loop.run_until_complete(serve(settings, msh, sock=sock, ready=ready, stop=stop))
        except BaseException as exc:  # reported to the caller's thread
            failure.append(exc)
            up.set()

    thread = threading.Thread(target=run, name="msh-served", daemon=True)
    thread.start()
    try:
        assert up.wait(timeout), "the MSH did not start listening in time"
        assert not failure, f"the MSH failed to start: {failure[0]!r}"
        yield ports[0]
    finally:
        if thread.is_alive():
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        alive = thread.is_alive()
        if not alive:
            loop.close()
        with contextlib.suppress(OSError):
            sock.close()
        assert not alive, "the MSH did not stop in time"
