"""What the analytics tests need: said as a skip reason where it is missing (the other test modules of this
folder are then not collected, see conftest.py)."""

from __future__ import annotations

import pytest

from msh.analytics.needs import java_missing, spark_missing
from tests.analytics.conftest import PYARROW_MISSING, SPARK_MISSING


@pytest.mark.skipif(PYARROW_MISSING, reason="the analytics extra (pyarrow) is not installed: analytics tests left out")
def test_pyarrow_is_there() -> None:
    import pyarrow

    assert pyarrow.__version__


@pytest.mark.skipif(SPARK_MISSING is not None, reason=f"Spark cannot run here: {SPARK_MISSING}")
def test_spark_can_run_here() -> None:
    assert spark_missing() is None and java_missing() is None
