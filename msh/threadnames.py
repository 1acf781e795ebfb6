"""The operating system's name of each thread the MSH starts, so that ``top -H``, ``ps -L`` and /proc show it.

Python keeps a thread's name for itself (``threading.Thread.name``); Linux keeps its own, of at most 15
bytes, in ``/proc/<pid>/task/<tid>/comm``, and a new thread inherits its creator's (``python``). The MSH sets
it for the threads it starts itself (the store writer, the work pool), so an operator can see which of them
uses the CPU, and ``scripts/bench_exchange.py`` prints the CPU of each (docs/operating.md, "Threads").

Elsewhere than Linux, or where /proc cannot be written, nothing changes: the name is a convenience, never a
reason to stop.
"""

from __future__ import annotations

import threading

__all__ = ["OS_NAME_BYTES", "name_os_thread", "os_thread_name"]

OS_NAME_BYTES = 15
"""The longest name Linux keeps for a thread (TASK_COMM_LEN less its terminating NUL)."""


def os_thread_name(name: str) -> str:
    """``name`` as the operating system keeps it: at most :data:`OS_NAME_BYTES` bytes of UTF-8, cut on a
    character boundary."""
    data = name.encode("utf-8")[:OS_NAME_BYTES]
    return data.decode("utf-8", errors="ignore")


def name_os_thread(name: str | None = None) -> None:
    """Give the calling thread ``name`` (default: its Python name) as its operating-system name."""
    text = os_thread_name(threading.current_thread().name if name is None else name)
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w", encoding="utf-8") as comm:
            comm.write(text)
    except OSError:
        return  # not Linux, or /proc is not ours to write: the thread keeps the name it has
