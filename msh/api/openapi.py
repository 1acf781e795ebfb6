"""``python -m msh.api.openapi FILE``: write the OpenAPI 3.1 document of the REST interface (with the
default ``api.path``) to FILE, or print it; the committed copy is ``schemas/msh-api.openapi.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["document", "main"]


def document() -> dict[str, Any]:
    """The document, as ``{api.path}/openapi.json`` serves it with the default settings."""
    from fastapi import FastAPI

    from msh.api import rest_batches, rest_inbox, rest_messages, rest_services
    from msh.api.app import openapi_document
    from msh.runtime.config.api import ApiSettings

    prefix = ApiSettings().path.rstrip("/")
    app = FastAPI()
    for router in (rest_services.router, rest_messages.router, rest_inbox.router, rest_batches.router):
        app.include_router(router, prefix=prefix)
    return openapi_document(app)


def main(argv: list[str] | None = None) -> int:
    """Write (or print) the document; 0."""
    args = sys.argv[1:] if argv is None else argv
    text = json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
    if args:
        Path(args[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
