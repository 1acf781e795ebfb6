"""Fault injection for the demo and the integration tests (a lossy network between two MSHs).

:mod:`msh.faults.proxy` is the lossy TCP proxy; :mod:`msh.faults.pair` starts two partners around it. The
proxy's names are loaded on first use, so that ``python -m msh.faults.proxy`` runs that module only once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from msh.faults.proxy import LossyProxy, ProxyStats, RunningProxy, run_in_thread

__all__ = ["LossyProxy", "ProxyStats", "RunningProxy", "run_in_thread"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from msh.faults import proxy

        return getattr(proxy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
