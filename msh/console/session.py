"""The console's session: a CSRF token and the flash messages, in one signed cookie (no server-side state).

Every page gets a session cookie holding a random CSRF token (``secrets.token_urlsafe``) and the flash
messages waiting to be shown, signed with HMAC-SHA256 under a key made when the console is built (a cookie of
an earlier run simply starts a new session). The cookie is ``HttpOnly`` and ``SameSite=Strict`` (a form
posted from another site carries no cookie at all), ``Secure`` when the console is served over HTTPS. Each
form carries the token in a hidden field; :meth:`Session.check` compares it in constant time with the
cookie's and also refuses a request whose ``Origin`` names another host.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Final, Literal

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["COOKIE", "CsrfRefused", "Flash", "Level", "Session", "SessionKeys"]

COOKIE: Final = "msh_console"
_MAX_FLASHES: Final = 5
_MAX_FLASH_TEXT: Final = 600

Level = Literal["ok", "refused"]


class CsrfRefused(Exception):
    """A state-changing request without the session's CSRF token (or from another origin)."""


@dataclass(frozen=True, slots=True)
class Flash:
    """A message shown once, on the next page: ``ok`` (done) or ``refused`` (nothing changed)."""

    level: Level
    text: str


@dataclass
class Session:
    """One browser's CSRF token and pending flash messages."""

    csrf: str
    flashes: list[Flash] = field(default_factory=list)
    changed: bool = False

    def flash(self, level: Level, text: str) -> None:
        """Keep ``text`` to be shown on the next page."""
        self.flashes = [*self.flashes, Flash(level, text[:_MAX_FLASH_TEXT])][-_MAX_FLASHES:]
        self.changed = True

    def take_flashes(self) -> list[Flash]:
        """The pending flash messages, now shown (removed from the session)."""
        taken, self.flashes = self.flashes, []
        if taken:
            self.changed = True
        return taken

    def check(self, request: Request, token: object) -> None:
        """Refuse (:class:`CsrfRefused`) a form whose token is not this session's, or sent from another origin."""
        origin = request.headers.get("origin")
        host = request.headers.get("host")
        if origin and origin != "null" and host and origin.split("://", 1)[-1] != host:
            raise CsrfRefused(f"the form was sent from {origin}, not from this console")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.csrf.encode()):
            raise CsrfRefused("the form's security token is missing or out of date; reload the page and try again")


class SessionKeys:
    """Signs and reads the session cookie (the key lives as long as the console)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _sign(self, body: bytes) -> str:
        return hmac.new(self._key, body, hashlib.sha256).hexdigest()

    def load(self, request: Request) -> Session:
        """The request's session, or a new one (no cookie, a cookie not signed by us, or one not readable)."""
        raw = request.cookies.get(COOKIE, "")
        body_text, _, signature = raw.rpartition(".")
        try:
            body = base64.urlsafe_b64decode(body_text.encode())
        except ValueError:
            body = b""
        if body and hmac.compare_digest(signature, self._sign(body)):
            try:
                data = json.loads(body)
                flashes = [
                    Flash(f["level"], str(f["text"]))
                    for f in data.get("flashes", [])
                    if f["level"] in ("ok", "refused")
                ]
                return Session(str(data["csrf"]), flashes)
            except (ValueError, KeyError, TypeError):
                pass
        return Session(secrets.token_urlsafe(32), changed=True)

    def save(self, request: Request, response: Response, session: Session) -> None:
        """Write the session cookie on ``response`` when the session changed."""
        if not session.changed:
            return
        data = {"csrf": session.csrf, "flashes": [{"level": f.level, "text": f.text} for f in session.flashes]}
        body = json.dumps(data, separators=(",", ":")).encode()
        value = base64.urlsafe_b64encode(body).decode() + "." + self._sign(body)
        response.set_cookie(
            COOKIE,
            value,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=request.scope.get("root_path") or "/",
        )
