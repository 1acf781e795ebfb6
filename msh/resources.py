"""Where the project's own data files (``schemas/``) live."""

from __future__ import annotations

from pathlib import Path

from msh.errors import ConfigurationError

__all__ = ["SCHEMAS_DIR", "schema_path"]

# The project is run from its checkout (``pip install -e .``); schemas/ sits beside msh/.
SCHEMAS_DIR = Path(__file__).resolve().parent.parent / "schemas"


def schema_path(name: str) -> Path:
    """Path of the project's schema ``name`` (e.g. ``msg-header-2_0.xsd``); says what to do if absent."""
    path = SCHEMAS_DIR / name
    if not path.is_file():
        raise ConfigurationError(
            f"schema {name} not found in {SCHEMAS_DIR}; install the MSH from its source checkout "
            "(pip install -e .) so that schemas/ sits beside msh/"
        )
    return path
