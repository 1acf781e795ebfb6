"""Delivery analytics: the journal as Parquet, the delivery report and reconciliation on Spark.

The layer of the analytics jobs (docs/design.md §2, §8): it reads the store's journal (through the store's
port, never the engine or the runtime) and writes Parquet (:mod:`msh.analytics.export`); the PySpark jobs
(:mod:`msh.analytics.report`, :mod:`msh.analytics.reconcile`, :mod:`msh.analytics.revalidate`) read those
files; :mod:`msh.analytics.generate` makes synthetic journals for tests and benchmarks. Nothing in the
engine or the runtime imports it (an import contract says so). pyarrow and pyspark come with the
``analytics`` extra (``pip install 'pymsh[analytics]'``); :func:`msh.analytics.needs.require` says so in
one line where they are missing.
"""
