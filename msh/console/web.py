"""What every page handler of the console works with: the MSH, the templates, the session keys, and the
helpers that render a page (with the session's CSRF token and flash messages) or redirect after an action."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from msh.console.session import Session, SessionKeys
from msh.runtime.config import Settings
from msh.runtime.msh import Msh
from msh.store.api import Transaction
from msh.store.inbox_status import inbox_status

__all__ = ["HERE", "Console", "ago", "when"]

HERE: Final = Path(__file__).resolve().parent
_T = TypeVar("_T")


def when(moment: datetime | None) -> str:
    """A time as the console shows it: UTC, to the second."""
    return "—" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(delta: timedelta | None) -> str:
    """A duration in words a person reads at a glance (``3 h 4 min``, ``12 s``)."""
    if delta is None:
        return "—"
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{delta.total_seconds():.3g} s" if seconds < 10 else f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h {minutes % 60} min" if hours < 48 else f"{hours // 24} d {hours % 24} h"


def _seconds(value: float | None) -> str:
    return "—" if value is None else ago(timedelta(seconds=value))


@dataclass
class Console:
    """The console of one MSH."""

    msh: Msh
    settings: Settings
    keys: SessionKeys
    env: Environment

    @classmethod
    def build(cls, msh: Msh, settings: Settings) -> Console:
        env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
        env.globals["inbox_status"] = inbox_status
        env.filters.update(when=when, ago=ago, seconds=_seconds, quote=lambda v: quote(str(v), safe=""))
        return cls(msh, settings, SessionKeys(), env)

    def now(self) -> datetime:
        return self.msh.clock()

    async def read(self, fn: Callable[[Transaction], _T]) -> _T:
        """``fn`` in a read-only transaction, off the event loop."""
        return await self.msh.read(fn)

    def session(self, request: Request) -> Session:
        found = request.scope.get("msh.console.session")
        if not isinstance(found, Session):
            found = self.keys.load(request)
            request.scope["msh.console.session"] = found
        return found

    @staticmethod
    def base(request: Request) -> str:
        """The path the console is mounted at ("" at the root)."""
        return str(request.scope.get("root_path", "")).rstrip("/")

    def render(self, request: Request, template: str, *, status: int = 200, **context: Any) -> Response:
        session = self.session(request)
        page = self.env.get_template(template).render(
            base=self.base(request),
            csrf=session.csrf,
            flashes=session.take_flashes(),
            party=self.settings.identity.party_id,
            path=request.url.path,
            **context,
        )
        response = HTMLResponse(page, status_code=status)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Content-Security-Policy"] = (
            "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'"
        )
        response.headers["X-Content-Type-Options"] = "nosniff"
        self.keys.save(request, response, session)
        return response

    def redirect(self, request: Request, to: str, **query: str) -> Response:
        """303 See Other to ``to`` (a path under the console), saving the session (its flash messages)."""
        target = self.base(request) + to + (("?" + urlencode(query)) if query else "")
        response = RedirectResponse(target, status_code=303)
        self.keys.save(request, response, self.session(request))
        return response
