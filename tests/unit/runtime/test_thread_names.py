"""The operating system's names of the MSH's own threads (msh.threadnames): what ``top -H`` and /proc show."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest

from msh.runtime.core import Lifecycle
from msh.store import MemoryStore
from msh.store.writer import GroupCommitWriter
from msh.threadnames import OS_NAME_BYTES, name_os_thread, os_thread_name

WAIT = 10.0  # seconds: a bound on joining a thread, never reached when things work

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names in /proc are Linux's")


def _comm() -> str:
    """The calling thread's name as Linux keeps it."""
    return Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text(encoding="utf-8").rstrip("\n")


def test_a_name_is_cut_to_what_linux_keeps_on_a_character_boundary() -> None:
    assert os_thread_name("msh-writer") == "msh-writer"
    assert os_thread_name("x" * 20) == "x" * OS_NAME_BYTES
    # 14 ASCII bytes and a two-byte character: the character would end past byte 15, so it is left out.
    assert os_thread_name("a" * 14 + "é") == "a" * 14
    assert len(os_thread_name("é" * 10).encode("utf-8")) == 14


@linux
def test_a_thread_names_itself_by_its_python_name_or_the_name_given() -> None:
    seen: list[str] = []

    def own() -> None:
        name_os_thread()
        seen.append(_comm())
        name_os_thread("another-name-that-is-long")
        seen.append(_comm())

    thread = threading.Thread(target=own, name="msh-test-thread")
    thread.start()
    thread.join(WAIT)
    assert seen == ["msh-test-thread", "another-name-th"]


@linux
def test_the_store_writer_thread_carries_its_name() -> None:
    writer = GroupCommitWriter(MemoryStore(), name="msh-writer")
    try:
        assert writer.call(lambda tx: _comm()) == "msh-writer"
    finally:
        writer.close(timeout=WAIT)


@linux
def test_the_work_pool_threads_carry_their_names() -> None:
    async def main() -> str:
        life = Lifecycle(offload=True)
        life.begin()
        try:
            return await life.off_loop(_comm)
        finally:
            life.end()

    assert asyncio.run(main()).startswith("msh-work_")
