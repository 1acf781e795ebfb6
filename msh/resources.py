"""Where the project's own data files (its XML schemas) are found.

The schemas are kept in the top-level ``schemas/`` folder of the checkout and installed as the data
package ``msh.schemas`` (``pyproject.toml`` maps one onto the other), so they are found the same way in
an editable install of the checkout and in a wheel installed on a server without the source tree:
through :mod:`importlib.resources`, never by a path relative to this file.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Final

from msh.errors import ConfigurationError

__all__ = ["SCHEMAS_PACKAGE", "schema_path", "schemas_dir"]

SCHEMAS_PACKAGE: Final = "msh.schemas"
"""The data package that holds the schemas (the ``schemas/`` folder of the checkout)."""


@cache
def schemas_dir() -> Path:
    """The folder of the installed schemas, as a real path (libxml2 and xmlschema resolve the schemas'
    ``xs:import`` locations relative to it)."""
    try:
        folder = resources.files(SCHEMAS_PACKAGE)
    except ModuleNotFoundError:
        raise ConfigurationError(
            f"the schemas package {SCHEMAS_PACKAGE} is not installed; reinstall the MSH "
            "(pip install pymsh-*.whl, or pip install -e . in the source checkout)"
        ) from None
    if not isinstance(folder, Path):
        raise ConfigurationError(
            f"the schemas package {SCHEMAS_PACKAGE} is inside an archive ({folder}); install the MSH as a "
            "wheel into a virtual environment (pip install), not as a zip file"
        )
    return folder


def schema_path(name: str) -> Path:
    """Path of the project's schema ``name`` (e.g. ``msg-header-2_0.xsd``); says what to do if absent."""
    path = schemas_dir() / name
    if not path.is_file():
        raise ConfigurationError(
            f"schema {name} not found in {path.parent}; the installation is incomplete: reinstall the MSH "
            "(pip install pymsh-*.whl, or pip install -e . in the source checkout)"
        )
    return path
