"""Layers import one way (docs/design.md §2): the engine and the agreement model, checks and registry do not bring
in the agreement loader, nor what only the loader needs (cryptography, signxml, xmlschema)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import cpa

LOADER_ONLY = ("cpa.loader", "cryptography", "signxml", "xmlschema")


@pytest.mark.parametrize(
    "module",
    ["msh.engine", "cpa", "cpa.model", "cpa.duration", "cpa.check", "cpa.resolve", "cpa.precedence", "cpa.registry"],
)
def test_importing_leaves_the_loader_out(module: str) -> None:
    # A fresh interpreter: this one has loaded everything already.
    code = f"import sys, {module}; print(' '.join(m for m in {LOADER_ONLY!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.split() == [], f"import {module} loads {result.stdout.strip()}"


def test_the_package_still_offers_every_name() -> None:
    for name in cpa.__all__:
        assert getattr(cpa, name) is not None, name
    assert cpa.load is importlib.import_module("cpa.loader").load
    # check and resolve are both functions and modules of the package: the package offers the functions.
    assert cpa.check is importlib.import_module("cpa.check").check
    assert cpa.resolve is importlib.import_module("cpa.resolve").resolve
    with pytest.raises(AttributeError):
        _ = cpa.no_such_name  # type: ignore[attr-defined]
