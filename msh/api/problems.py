"""Errors as RFC 9457 (formerly 7807) problem details: ``application/problem+json`` with type, title,
status and detail; every refusal of the application interfaces goes through :class:`Problem`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["PROBLEM_TYPE", "Problem", "problem_response"]

PROBLEM_TYPE: Final = "application/problem+json"
_BASE: Final = "https://pymsh.invalid/problems/"  # not dereferenceable: the slug names the kind of problem


class Problem(Exception):
    """A refusal: HTTP ``status``, a ``slug`` naming its kind, a one-line ``detail``, extra ``headers``."""

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.title = title
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def body(self, instance: str | None = None) -> dict[str, object]:
        """The problem document."""
        doc: dict[str, object] = {
            "type": _BASE + self.slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if instance is not None:
            doc["instance"] = instance
        doc.update(self.extra)
        return doc

    def response(self, instance: str | None = None) -> Response:
        """The HTTP response carrying the problem."""
        return problem_response(self.status, self.body(instance), self.headers)


def problem_response(status: int, body: Mapping[str, object], headers: Mapping[str, str] | None = None) -> Response:
    """A ``application/problem+json`` response."""
    return Response(
        json.dumps(body, ensure_ascii=False).encode("utf-8"),
        status_code=status,
        headers=dict(headers or {}),
        media_type=PROBLEM_TYPE,
    )


async def problem_handler(request: Request, exc: Exception) -> Response:
    """The exception handler of :class:`Problem` (registered by :func:`msh.api.app.create_app`)."""
    assert isinstance(exc, Problem)
    return exc.response(request.url.path)
