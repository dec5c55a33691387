"""The committing half of every Spark write: move what the tasks wrote into the table, register it, then
commit the transaction.

Runs in Spark's commit worker (a Python process on the driver host), with only the task messages to go on.
Each message is one attempt's, the attempt Spark took for its task; its files are moved from the attempt's own
hidden directory into the table (:mod:`acidstream.spark.task_write`), and then every attempt directory of the
write id goes: those of attempts Spark did not take (killed, lost with their executor, speculative copies
that lost) never reach the table. Partitions are created and reported before the commit, as Hive's streaming
commit does; a partition created for a transaction that then fails is empty, which readers handle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from acidstream.acid.attempts import remove_if_empty
from acidstream.errors import TransactionError
from acidstream.metastore.models import TableWrite
from acidstream.spark.task_write import ATTEMPTS_DIR, TaskResult, attempts_prefix
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
    """Commit ``txn_id`` with every partition and file in ``results`` (the attempts Spark took, one per task),
    moved into the table first; returns the rows committed."""
    from acidstream.storage import table_filesystem

    table = ms.table(table_name)
    fs, table_dir = table_filesystem(table.location)
    files: dict[str, list[str]] = {}
    values: dict[str, tuple[str, ...]] = {}
    rows = 0
    for result in results:
        rows += result.rows
        for vals, name, paths in result.partitions:
            values[name] = vals
            files.setdefault(name, []).extend(_publish(fs, table_dir, result.staged, paths))
    _remove_attempts(fs, table_dir, write_id)
    if partitioned:
        for name in sorted(values):
            ms.add_partition(table_name, list(values[name]), if_not_exists=True)
        if values:
            ms.add_dynamic_partitions(txn_id, write_id, table_name, sorted(values))
    for name in sorted(files):
        written = describe_closed(table.location, sorted(files[name]), fsync=table.fsync)
        ms.add_write_notification(txn_id, write_id, table_name, name or None, written)
    # the write names its table: a Hive Metastore keeps the key/value as a parameter of the table written
    ms.commit_txn(txn_id, key=key, value=value, writes=[TableWrite(table_name, write_id)])
    # again: a losing attempt may have written since; one that finishes later sees the txn over and deletes its own
    with contextlib.suppress(OSError):
        _remove_attempts(fs, table_dir, write_id)
        remove_if_empty(fs, f"{table_dir}/{ATTEMPTS_DIR}")
    return rows


def _publish(fs: pafs.FileSystem, table_dir: str, staged: str, paths: Sequence[str]) -> list[str]:
    """Move an attempt's files from its directory ``staged`` to the same place below the table's; their new
    paths. A rename on local disks and HDFS, a copy on S3."""
    moved = []
    for path in paths:
        if not path.startswith(f"{staged}/"):
            raise TransactionError(f"{path} is not below the task attempt's directory {staged}")
        target = f"{table_dir}{path[len(staged) :]}"
        fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        fs.move(path, target)
        moved.append(target)
    return moved


def remove_attempts(location: str, write_id: int) -> None:
    """Delete what the task attempts of ``write_id`` left in the table at ``location`` (a failed job's files,
    which no commit will move in, or a committed job's losers), and the attempts' directory once empty."""
    from acidstream.storage import table_filesystem

    fs, table_dir = table_filesystem(location)
    _remove_attempts(fs, table_dir, write_id)
    remove_if_empty(fs, f"{table_dir}/{ATTEMPTS_DIR}")


def _remove_attempts(fs: pafs.FileSystem, table_dir: str, write_id: int) -> None:
    """Delete the directories of every attempt of ``write_id``'s tasks (what the others' left, and the moved
    ones' emptied directories); other writes' attempts stay."""
    prefix = attempts_prefix(table_dir, write_id)
    listing = fs.get_file_info(pafs.FileSelector(f"{table_dir}/{ATTEMPTS_DIR}", allow_not_found=True))
    for info in listing:
        if info.type == pafs.FileType.Directory and info.path.startswith(prefix):
            fs.delete_dir(info.path)
