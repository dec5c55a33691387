"""The committing half of every Spark write: register what the tasks wrote, then commit the transaction.

Runs in Spark's commit worker (a Python process on the driver host), with only the
task messages to go on. Partitions are created and reported before the commit, as Hive's streaming commit
does; a partition created for a transaction that then fails is empty, which readers handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from acidstream.metastore.models import TableWrite
from acidstream.spark.task_write import TaskResult, statement_dirs
from acidstream.txn.written import describe_closed

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade


def commit_write(
    ms: MetastoreFacade,
    table_name: str,
    txn_id: int,
    write_id: int,
    results: Sequence[TaskResult],
    *,
    partitioned: bool,
    key: str | None = None,
    value: str | None = None,
) -> int:
    """Commit ``txn_id`` with every partition and file in ``results``; returns the rows committed.

    ``results`` are the successful attempts' reports: when some task was retried, delta dirs of this write
    id that none of them reported (left by killed attempts) are deleted first.
    """
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
    if any(r.attempt > 0 for r in results):
        _remove_unreported(
            ms, table_name, write_id, {(n, r.statement_id) for r in results for _, n, _ in r.partitions}
        )
    table = ms.table(table_name)
    for name in sorted(files):
        written = describe_closed(table.location, sorted(files[name]), fsync=table.fsync)
        ms.add_write_notification(txn_id, write_id, table_name, name or None, written)
    # the write names its table: a Hive Metastore keeps the key/value as a parameter of the table written
    ms.commit_txn(txn_id, key=key, value=value, writes=[TableWrite(table_name, write_id)])
    return rows


def _remove_unreported(
    ms: MetastoreFacade, table_name: str, write_id: int, reported: set[tuple[str, int]]
) -> None:
    """After task retries: delete this write id's delta dirs that no successful attempt reported.

    A killed attempt may have written partitions its successful retry did not (non-deterministic input);
    those files carry the committed write id and would become visible. Cost: one listing per partition.
    """
    from acidstream.storage import table_filesystem

    table = ms.table(table_name)
    fs, table_dir = table_filesystem(table.location)
    for name, statement_id, path in statement_dirs(fs, table_dir, len(table.partition_keys), write_id):
        if (name, statement_id) not in reported:
            fs.delete_dir(path)
