"""The ``[admin]`` settings: the operators' port (:mod:`msh.admin`), separate from the ebMS endpoint and the
application interfaces, with ``/health``, ``/ready``, ``/metrics`` and the web console; and the window in
which expiring certificates are warned about (:mod:`msh.runtime.certificates`, also when the port is off).

Operators authenticate exactly as applications do on the interfaces (``[api]``): a bearer token named by
``operators`` (``NAME=env:VARIABLE`` or ``NAME=file:PATH``, read when the MSH starts, never printed), or over
``tls`` a client certificate issued by ``client_ca`` whose subject CN names an operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import ClassVar

from msh.runtime.config import rules
from msh.runtime.config.api import CREDENTIALS_HINT, check_credentials
from msh.runtime.config.declaration import DURATION_HINT, Section, setting
from msh.runtime.config.values import PEM_FILES, TEXTS

__all__ = ["AdminSettings"]


@dataclass(frozen=True, slots=True)
class AdminSettings(Section):
    """The admin port served by ``msh serve`` when ``enabled`` (see the module docs and docs/operating.md)."""

    section: ClassVar[str] = "admin"

    enabled: bool = field(
        default=False, metadata=setting(meaning="serve `/health`, `/ready`, `/metrics` and the console")
    )
    host: str = field(
        default="127.0.0.1",
        metadata=setting(
            'write a host name or address, e.g. "127.0.0.1"', check=rules.host, meaning="the admin port's address"
        ),
    )
    port: int = field(
        default=8091,
        metadata=setting("write a port number 1-65535 (0: any free port)", check=rules.port, meaning="the admin port"),
    )
    operators: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            CREDENTIALS_HINT.format("ops", "MSH_OPS", "monitoring"),
            kind=TEXTS,
            check=check_credentials,  # type: ignore[arg-type]
            meaning="the operators and where each one's bearer token is (`NAME=env:VARIABLE`, `NAME=file:PATH`)",
        ),
    )
    tls: bool = field(
        default=False,
        metadata=setting(meaning="HTTPS with `tls.certificate` and `tls.private_key`"),
    )
    client_ca: tuple[Path, ...] = field(
        default=(),
        metadata=setting(
            'write a list of PEM certificate files, e.g. ["keys/ops-ca.pem"]',
            kind=PEM_FILES,
            meaning="with `admin.tls`: ask for client certificates issued by these; a certificate whose subject CN "
            "names an operator (any CN when `admin.operators` is empty) authenticates it",
        ),
    )
    open_probes: bool = field(
        default=False,
        metadata=setting(
            meaning="`/health` and `/ready` answer without authentication (for probes that send no credentials)"
        ),
    )
    stall_after: timedelta = field(
        default=timedelta(seconds=60),
        metadata=setting(
            DURATION_HINT.format("PT60S", 60),
            check=rules.positive,
            meaning="`/ready` says not ready when the store writer (busy) or the timer loop has not moved on for "
            "this long (longer than `timers.poll_interval`)",
        ),
    )
    certificate_warning: timedelta = field(
        default=timedelta(days=30),
        metadata=setting(
            DURATION_HINT.format("P30D", 2592000),
            check=rules.not_negative,
            meaning="our certificates and those the agreements name that expire within this are warned about at "
            "start and daily in the log (also with `admin.enabled` false; `PT0S`: only expired ones)",
        ),
    )
