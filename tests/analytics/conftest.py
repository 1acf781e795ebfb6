"""Fixtures of the analytics tests: one Spark session per test run (local[2], small shuffles, no UI),
a small generated journal and the report over it, made once and shared.

The Spark tests skip with the reason when pyspark, pyarrow or Java is missing."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from msh.analytics.needs import spark_missing

pytest.importorskip("pyarrow", reason="the analytics extra (pyarrow) is not installed")

SPARK_MISSING = spark_missing()
PYARROW_MISSING = importlib.util.find_spec("pyarrow") is None
if PYARROW_MISSING:
    # The test modules import pyarrow; test_needs.py says why they were left out.
    collect_ignore_glob = ["test_[!n]*.py"]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The test run's one Spark session."""
    if SPARK_MISSING is not None:
        pytest.skip(f"Spark cannot run here: {SPARK_MISSING}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from msh.analytics.session import spark_session

    session = spark_session("local[2]", shuffle_partitions=2, driver_memory="1g")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small generated journal: hub, 6 partners (one behind the intermediary), 4 days, 3 faults per case."""
    from msh.analytics.generate import generate_journal

    folder = tmp_path_factory.mktemp("journal") / "j"
    generate_journal(6000, folder, seed=7, partners=6, days=4, faults_per_case=3)
    return folder


@pytest.fixture(scope="session")
def report(spark: Any, journal: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The report over :func:`journal`."""
    from msh.analytics.report import run_report

    return run_report(spark, [journal], tmp_path_factory.mktemp("report") / "r")
