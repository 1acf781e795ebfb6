"""The running MSH: settings, the runtime that executes the engine's actions, the HTTP endpoint and client.

:class:`~msh.runtime.msh.Msh` is the application's Python API and the runtime; :mod:`msh.runtime.config`
reads the settings; :mod:`msh.runtime.serving` serves the endpoint (``msh serve``).
"""

from __future__ import annotations

from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, load_settings
from msh.runtime.msh import HttpReply, Msh, PingResult, ReceivedMessage, RemoteStatus

__all__ = [
    "HttpReply",
    "Msh",
    "Payload",
    "PingResult",
    "ReceivedMessage",
    "RemoteStatus",
    "Settings",
    "Submission",
    "load_settings",
]
