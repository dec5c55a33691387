"""PySpark integration: the only package that imports pyspark.

``register(spark)`` makes ``format("acidstream")`` available (reads, ``mode("append")`` batch writes and a
streaming sink); :func:`read_table` reads bulk data with Spark's JVM ORC reader; :func:`compact` compacts a table
with one Spark task per (partition, bucket); :func:`merge`, :func:`update` and :func:`delete` mutate a table by
key or condition in one transaction, Spark tasks writing the mutations; :func:`session` builds a local SparkSession configured the way these
need.
"""

from __future__ import annotations

from acidstream.spark.compact import compact
from acidstream.spark.datasource import register, register_views
from acidstream.spark.mutate import delete, merge, update
from acidstream.spark.read import read_table
from acidstream.spark.session import session

__all__ = ["compact", "delete", "merge", "read_table", "register", "register_views", "session", "update"]
