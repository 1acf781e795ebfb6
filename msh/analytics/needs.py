"""What the analytics commands need installed, said in one line when it is missing."""

from __future__ import annotations

import importlib.util
import os
import shutil

from msh.errors import ConfigurationError

__all__ = ["java_missing", "require", "spark_missing"]

_INSTALL = "install the analytics extra: pip install 'pymsh[analytics]' (or scripts/_env.sh dev,analytics)"


def require(*modules: str) -> None:
    """:class:`ConfigurationError` naming the first of ``modules`` that cannot be imported."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise ConfigurationError(f"the Python package {module!r} is not installed; {_INSTALL}")


def java_missing() -> str | None:
    """Why Spark cannot start here for want of Java (None when a ``java`` is found)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return None
    if shutil.which("java") is not None:
        return None
    return (
        "no Java runtime found (Spark needs Java 17): install one "
        "(e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
    )


def spark_missing() -> str | None:
    """Why a Spark job cannot run here (pyspark or Java missing), or None."""
    for module in ("pyspark", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            return f"the Python package {module!r} is not installed; {_INSTALL}"
    return java_missing()
