"""Waiting, bounded, for sent messages to reach a final status (tests with real processes)."""

from __future__ import annotations

import time

from msh.engine import OutboundStatus
from msh.runtime.msh import Msh


def wait_final(msh: Msh, ids: list[str], timeout: float) -> dict[str, OutboundStatus]:
    """The final status of each message of ``ids`` that reached one within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    final: dict[str, OutboundStatus] = {}
    while time.monotonic() < deadline and len(final) < len(ids):
        for m in ids:
            if m not in final:
                s = msh.status(m)
                if s is not None and s.state.status.final:
                    final[m] = s.state.status
        time.sleep(0.1)
    return final
