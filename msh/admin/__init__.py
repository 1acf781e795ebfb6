"""The admin port (``[admin]``): ``/health``, ``/ready``, ``/metrics`` and the web console, for operators and
monitoring, on its own address and port (docs/operating.md).

:func:`~msh.admin.app.build_admin_app` makes the ASGI application, :class:`~msh.admin.server.AdminServer`
serves it beside ``msh serve``'s endpoint; :mod:`~msh.admin.metrics` and :mod:`~msh.admin.readiness` hold
what the endpoints say.
"""

from msh.admin.app import build_admin_app, load_operators
from msh.admin.metrics import METRICS, MshMetrics

__all__ = ["METRICS", "MshMetrics", "build_admin_app", "load_operators"]
