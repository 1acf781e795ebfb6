"""The work folder of a demo: made in the temporary folder, removed after a successful run unless kept,
kept and named after a failed one (for its stores and logs)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["in_work_folder"]


def in_work_folder(prefix: str, run: Callable[[Path], int], *, keep: bool, contents: str) -> int:
    """Call ``run`` with a new folder named ``prefix…`` and return its exit status; the folder is removed
    when it returned 0 and ``keep`` is false, else a line names it and its ``contents``."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    status = 1
    try:
        status = run(work)
        return status
    finally:
        if status == 0 and not keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work folder kept: {work} ({contents})")
