"""The pid file of ``msh serve`` (``server.pid_file``) and the reload status file beside it.

``msh serve`` writes its process id to the pid file when it starts and removes it at its orderly stop
(:func:`write_pid_file`, :func:`remove_pid_file`); a pid file left by a process that no longer runs (a
SIGKILL) is stale and replaced. ``msh cpa add|remove|reload`` find the running server by it
(:func:`running_server`) and send it SIGHUP.

How a command learns the outcome of the server's reload: after each reload the server writes the reload
status file, ``<pid_file>.reload.json`` (:func:`status_path`), atomically (a temporary file renamed over it),
as JSON with camelCase keys: ``pid``, ``generation`` (1 for the first reload of that process, then 2, ...),
``ok``, ``at``, ``agreements`` (the CPAIds in force after it), ``added``, ``removed``, ``failedMessages``
(messages failed because their agreement was removed) and ``problem`` (why a failed reload changed
nothing, naming the file). The command reads the status first, signals, and waits (bounded) for a status of
that pid with a higher generation (:func:`wait_for_reload`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from msh.errors import ConfigurationError

__all__ = [
    "read_status",
    "refuse_if_running",
    "remove_pid_file",
    "running_server",
    "status_path",
    "wait_for_reload",
    "write_pid_file",
    "write_status",
]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def running_server(path: Path) -> int | None:
    """The pid of the ``msh serve`` process that wrote ``path`` and still runs; None: none runs."""
    pid = _read_pid(path)
    return pid if pid is not None and _alive(pid) else None


def refuse_if_running(path: Path) -> None:
    """:class:`ConfigurationError` when another live process holds ``path`` (another ``msh serve``)."""
    other = running_server(path)
    if other is not None and other != os.getpid():
        raise ConfigurationError(
            f"server.pid_file: {path} names process {other}, which is running: another msh serve runs with these "
            "settings; stop it first, or give this one another server.pid_file"
        )


def write_pid_file(path: Path) -> None:
    """Write this process's id to ``path``; refused when a live process holds it (another ``msh serve``)."""
    refuse_if_running(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(f"{os.getpid()}\n", encoding="ascii")
    os.replace(temporary, path)


def remove_pid_file(path: Path) -> None:
    """Remove ``path`` (and the reload status beside it) when it is this process's own (an orderly stop)."""
    if _read_pid(path) == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            status_path(path).unlink()


def status_path(pid_file: Path) -> Path:
    """The reload status file beside ``pid_file``."""
    return pid_file.with_name(pid_file.name + ".reload.json")


def write_status(pid_file: Path, status: dict[str, Any]) -> None:
    """Write the reload ``status`` beside ``pid_file``, atomically."""
    target = status_path(pid_file)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(status, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, target)


def read_status(pid_file: Path) -> dict[str, Any] | None:
    """The last reload status beside ``pid_file`` (None: none, or unreadable)."""
    try:
        data = json.loads(status_path(pid_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _generation(status: dict[str, Any] | None, pid: int) -> int:
    if status is None or status.get("pid") != pid:
        return 0
    value = status.get("generation")
    return value if isinstance(value, int) else 0


def wait_for_reload(pid_file: Path, pid: int, after: dict[str, Any] | None, timeout: float) -> dict[str, Any] | None:
    """The reload status server ``pid`` writes after the one seen before signalling (``after``), waiting up to
    ``timeout`` seconds (None: none came in time, or the server ended)."""
    seen = _generation(after, pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = read_status(pid_file)
        if _generation(status, pid) > seen:
            return status
        if not _alive(pid):
            return None
        time.sleep(0.05)
    return None
