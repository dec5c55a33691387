"""The committing half of every Spark write: register what the tasks wrote, then commit the transaction.

Runs in Spark's commit worker (a Python process on the driver host, pyspark-notes.md §1), with only the
task messages to go on. Partitions are created and reported before the commit, as Hive's streaming commit
does; a partition created for a transaction that then fails is empty, which readers handle.
"""

from __future__ import annotations

from collections.abc import Iterable

from acidstream.metastore import Metastore
from acidstream.spark.task_write import TaskResult


def commit_write(
    ms: Metastore,
    table_name: str,
    txn_id: int,
    write_id: int,
    results: Iterable[TaskResult],
    *,
    partitioned: bool,
    key: str | None = None,
    value: str | None = None,
) -> int:
    """Commit ``txn_id`` with every partition and file in ``results``; returns the rows committed."""
    files: dict[str, list[str]] = {}
    values: dict[str, tuple[str, ...]] = {}
    rows = 0
    for result in results:
        rows += result.rows
        for vals, name, paths in result.partitions:
            values[name] = vals
            files.setdefault(name, []).extend(paths)
    if partitioned:
        for name in sorted(values):
            ms.add_partition(table_name, list(values[name]), if_not_exists=True)
        if values:
            ms.add_dynamic_partitions(txn_id, write_id, table_name, sorted(values))
    for name in sorted(files):
        ms.add_write_notification(txn_id, write_id, table_name, name or None, sorted(files[name]))
    ms.commit_txn(txn_id, key=key, value=value)
    return rows
