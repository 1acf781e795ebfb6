"""Reading the sample settings files the way a user reads them: a setting left off on purpose is shown
commented out in its place (``# name = value``) and counts as shown."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

_SHOWN = re.compile(r"^# (?=[a-z_]+ = )", re.MULTILINE)


def shown_settings(path: Path) -> dict[str, Any]:
    """The TOML of ``path`` with its commented-out settings taken as written."""
    return tomllib.loads(_SHOWN.sub("", path.read_text(encoding="utf-8")))
