"""The MSH's transports, one per URL scheme, made from the settings (docs/transports.md).

:func:`transports_from` is where each binding is wired: HTTP(S) always (ebMS2 Appendix B.2), and each
other binding when its settings section configures it. :mod:`msh.runtime.core` wraps the result in a
:class:`~msh.transport.schemes.SchemeTransport`, so the agreement's endpoint URL decides the binding of
every message and signal.
"""

from __future__ import annotations

from msh.runtime.config import Settings
from msh.transport.http import HttpTransport
from msh.transport.port import Transport
from msh.transport.schemes import SchemeTransport

__all__ = ["transports_from"]


def transports_from(settings: Settings) -> SchemeTransport:
    """The transport of each scheme the settings configure, and for the others what to configure."""
    s = settings.sending
    http = HttpTransport(
        timeout=s.http_timeout,
        connect_timeout=s.connect_timeout,
        max_in_flight=s.max_in_flight,
        progress_timeout=s.progress_timeout,
        min_rate=s.min_rate,
    )
    by_scheme: dict[str, Transport] = {"http": http, "https": http}
    missing: dict[str, str] = {}
    return SchemeTransport(by_scheme, missing=missing)
