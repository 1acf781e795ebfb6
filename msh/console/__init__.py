"""The web console (issue 22): a dashboard, the messages with their history and payloads, the inbox, the
agreements, the routing table and the settings, with the operator's actions (resend, release, reject,
acknowledge) as CSRF-protected forms. Server-rendered HTML (Jinja2 templates) and one stylesheet, no
JavaScript, nothing fetched from elsewhere; served on the admin port behind its authentication
(:func:`build_console` gives the ASGI application to mount)."""

from msh.console.app import build_console

__all__ = ["build_console"]
