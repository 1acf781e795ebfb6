"""The Spark session of the analytics jobs: local mode by default, any cluster with ``master``.

Nothing is downloaded at run time (no ``spark.jars.packages``): the jobs use only what the pyspark
package ships. The web UI is off, times are UTC, and the shuffle is sized for a small machine unless the
caller says otherwise. The JVMs collect garbage with the throughput collector (``_GC``).

Quiet by default: Spark logs only fatal errors (``log4j2.properties``, level ``fatal``), and the start-up
lines every run would print otherwise (the JVM's ``WARNING: Using incubator modules`` for the module
Spark's launcher adds, Spark's ``Setting default log level`` notice, py4j's warnings) are left out: the JVM's
standard error comes through a pipe that drops them and passes on everything else (:func:`noise`). With a
``log_level`` other than ``fatal`` nothing is left out and Spark logs at that level.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

from msh.analytics.needs import spark_missing
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "LOG_LEVELS", "noise", "spark_session"]

DEFAULT_MASTER = "local[2]"
LOG_LEVELS: Final = ("fatal", "error", "warn", "info", "debug")
"""Spark's log levels (log4j's names), quietest first; ``fatal`` is the default."""
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
# The throughput collector: the report's JVM does batch work, and pauses cost it nothing that matters;
# the report of the 10-million-event benchmark journal (scripts/bench_analytics.py) ran in 53-55 s with it
# against 63-66 s with the default G1 (same machine, one process each).
_GC = "-XX:+UseParallelGC"
_NOISE: Final = (
    # The JDK's own warnings (an incubator module in use, a restricted or deprecated method called): about
    # how Spark's launcher starts the JVM, nothing an operator can act on.
    b"WARNING: ",
    # Spark's notices about its shell's log level (pyspark starts its JVM as a shell).
    b"Setting default log level to",
    b"To adjust logging level use sc.setLogLevel",
    b"Using Spark's default log4j profile",
)


def noise(line: bytes) -> bool:
    """Whether a line the JVM wrote on standard error is start-up noise (left out at the default level)."""
    return line.lstrip().startswith(_NOISE)


def _relay(stream: IO[bytes]) -> None:
    """Pass the JVM's standard error on to ours, without the noise, until the JVM closes it."""
    for line in iter(stream.readline, b""):
        if not noise(line):
            sys.stderr.write(line.decode("utf-8", errors="replace"))
            sys.stderr.flush()


def _context(conf: SparkConf, quiet: bool) -> SparkContext:
    """The process's Spark context: its JVM started with ``conf``, its standard error filtered when ``quiet``
    (and when this process starts the JVM: a second session reuses the first one's)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if not quiet or SparkContext._gateway is not None:
        return SparkContext.getOrCreate(conf)
    # The pipe is read from before the JVM starts: what it says while starting (a failure to start too)
    # comes through, and a full pipe never stops it.
    read_end, write_end = os.pipe()
    reader = os.fdopen(read_end, "rb")
    threading.Thread(target=_relay, args=(reader,), name="spark-stderr", daemon=True).start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_end})  # type: ignore[no-untyped-call]
    finally:
        os.close(write_end)  # the JVM (and the Python workers it starts) hold the pipe's only writing end
    return SparkContext(conf=conf, gateway=gateway)


def _conf(master: str, app: str, shuffle_partitions: int, driver_memory: str, log_level: str) -> SparkConf:
    from pyspark import SparkConf

    level = f"-Dmsh.spark.log.level={log_level}"
    return (
        SparkConf()
        .setMaster(master)
        .setAppName(app)
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .set("spark.driver.memory", driver_memory)
        .set("spark.sql.execution.arrow.pyspark.enabled", "true")
        .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()} {level} {_GC}")
        .set("spark.executor.extraJavaOptions", _GC)
    )


def spark_session(
    master: str | None = None,
    *,
    app: str = "msh-analytics",
    shuffle_partitions: int = 8,
    driver_memory: str = "2g",
    log_level: str = "fatal",
) -> SparkSession:
    """A Spark session on ``master`` (default ``local[2]``), Spark logging at ``log_level`` (one of
    :data:`LOG_LEVELS`; module docs); :class:`ConfigurationError` saying what is missing when pyspark or
    Java is not there."""
    if log_level not in LOG_LEVELS:
        raise ConfigurationError(f"Spark log level {log_level!r} is not one of {', '.join(LOG_LEVELS)}")
    missing = spark_missing()
    if missing is not None:
        raise ConfigurationError(f"Spark cannot run here: {missing}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # The Python workers run this interpreter (its packages: the project, lxml, xmlsec), not the first python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    quiet = log_level == "fatal"
    # py4j's own Python logging (its connection warnings) follows the same level.
    logging.getLogger("py4j").setLevel(logging.ERROR if quiet else logging.NOTSET)
    from pyspark.sql import SparkSession

    conf = _conf(master or DEFAULT_MASTER, app, shuffle_partitions, driver_memory, log_level)
    try:
        context = _context(conf, quiet)
        session = SparkSession.builder.getOrCreate()
    except Exception as exc:  # the JVM did not start or the master cannot be reached
        raise ConfigurationError(
            f"Spark did not start on master {master or DEFAULT_MASTER!r}: {str(exc).splitlines()[0]}; "
            "check --master (local[N], spark://HOST:PORT, yarn, k8s://...) and that Java 17 is installed"
        ) from None
    context.setLogLevel(log_level.upper())
    return session
