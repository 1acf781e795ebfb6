"""The Spark session of the analytics jobs: local mode by default, any cluster with ``master``.

Nothing is downloaded at run time (no ``spark.jars.packages``): the jobs use only what the pyspark
package ships. The web UI is off, times are UTC, and the shuffle is sized for a small machine unless the
caller says otherwise. The JVMs collect garbage with the throughput collector (``_GC``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from msh.analytics.needs import spark_missing
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "spark_session"]

DEFAULT_MASTER = "local[2]"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
# The throughput collector: the report's JVM does batch work, and pauses cost it nothing that matters;
# the report of the 10-million-event benchmark journal (scripts/bench_analytics.py) ran in 53-55 s with it
# against 63-66 s with the default G1 (same machine, one process each).
_GC = "-XX:+UseParallelGC"


def spark_session(
    master: str | None = None,
    *,
    app: str = "msh-analytics",
    shuffle_partitions: int = 8,
    driver_memory: str = "2g",
) -> SparkSession:
    """A Spark session on ``master`` (default ``local[2]``); :class:`ConfigurationError` saying what is
    missing when pyspark or Java is not there."""
    missing = spark_missing()
    if missing is not None:
        raise ConfigurationError(f"Spark cannot run here: {missing}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # The Python workers run this interpreter (its packages: the project, lxml, xmlsec), not the first python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()} {_GC}")
        .config("spark.executor.extraJavaOptions", _GC)
    )
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # the JVM did not start or the master cannot be reached
        raise ConfigurationError(
            f"Spark did not start on master {master or DEFAULT_MASTER!r}: {str(exc).splitlines()[0]}; "
            "check --master (local[N], spark://HOST:PORT, yarn, k8s://...) and that Java 17 is installed"
        ) from None
    session.sparkContext.setLogLevel("FATAL")
    return session
