"""The private Dovecot of :mod:`msh.faults.dovecot` as a pytest fixture: a test that needs it is skipped,
saying why, where none can run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from msh.faults.dovecot import PASSWORD, USER, Dovecot, DovecotUnavailable
from msh.faults.dovecot import private_dovecot as _private_dovecot

__all__ = ["PASSWORD", "USER", "Dovecot", "dovecot", "private_dovecot"]


@contextlib.contextmanager
def private_dovecot(certificate: Path | None = None, private_key: Path | None = None) -> Iterator[Dovecot]:
    """:func:`msh.faults.dovecot.private_dovecot`, skipping the test with the reason where it cannot run."""
    try:
        with _private_dovecot(certificate, private_key) as server:
            yield server
    except DovecotUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    """A private Dovecot for one test."""
    with private_dovecot() as server:
        yield server
