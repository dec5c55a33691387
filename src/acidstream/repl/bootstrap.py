"""A bootstrap: the source's catalog, txn state and files at one consistent point (Hive's bootstrap REPL DUMP).

Transactions open when it starts are waited for (up to a timeout, as Hive's
``hive.repl.bootstrap.dump.open.txn.timeout``); those still open are carried as open, with their write ids, and
aborted ones as aborted, so a replica never shows a txn half-copied: its rows stay invisible until the source's
commit event arrives. The event id is read before the snapshot, so every event up to it is reflected in the
snapshot; events after it may be too, and the replica's operations tolerate repeating them.

Each table is registered as a reader with the snapshot while its files are listed and copied, so the cleaner
keeps files compactions replace meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from acidstream.acid.names import ParsedDelta, is_side_file, parse_dir_name
from acidstream.acid.selection import get_acid_state
from acidstream.acid.sidefile import logical_extent
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import AcidFormatError, AcidStreamError
from acidstream.metastore import replops as r
from acidstream.metastore.models import TableDefinition
from acidstream.repl.plan import BootstrapFile, BootstrapPlan
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)

#: Seconds a bootstrap waits for the txns open when it starts (Hive's default is 1 hour; ours is shorter).
DEFAULT_OPEN_TXN_TIMEOUT = 60.0
AGENT = "acidstream-repl bootstrap"


@contextmanager
def bootstrap_plan(
    ms: MetastoreFacade,
    *,
    open_txn_timeout: float = DEFAULT_OPEN_TXN_TIMEOUT,
    tables: list[str] | None = None,
) -> Iterator[BootstrapPlan]:
    """The plan of a bootstrap of ``ms`` (every table, or ``tables``); the source's cleaner keeps the plan's
    files until the ``with`` block ends (copy them inside it)."""
    _wait_for_open_txns(ms, open_txn_timeout)
    event_id = ms.current_notification_event_id()
    event_time = int(time.time() * 1000)
    snapshot = ms.snapshot()
    registrations: list[int] = []
    try:
        yield _plan(ms, event_id, event_time, snapshot, registrations, tables)
    finally:
        for reader_id in registrations:
            with contextlib.suppress(Exception):
                ms.unregister_reader(reader_id)


def _wait_for_open_txns(ms: MetastoreFacade, timeout: float) -> None:
    waiting = set(ms.get_open_txns().open_ids)
    deadline = time.monotonic() + timeout
    pause = 0.05
    while waiting and time.monotonic() < deadline:
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 1.0)
        waiting &= set(ms.get_open_txns().open_ids)
    if waiting:
        log.info("bootstrap: txns %s still open after %gs: carried as open", sorted(waiting), timeout)


def _plan(
    ms: MetastoreFacade,
    event_id: int,
    event_time: int,
    snapshot: ValidTxnList,
    registrations: list[int],
    only: list[str] | None,
) -> BootstrapPlan:
    catalog_ops: list[r.ReplOp] = []
    seeds: list[r.ReplOp] = []
    allocs: list[r.ReplOp] = []
    aborted_txns: set[int] = set()
    mapped_txns: set[int] = set(snapshot.open_ids)
    files: list[BootstrapFile] = []
    wanted = None if only is None else {t.lower() for t in only}
    for db in ms.list_databases():
        catalog_ops.append(r.CreateDatabase(db))
        for name in ms.list_tables(db):
            if wanted is not None and f"{db}.{name}" not in wanted:
                continue
            table = ms.table(f"{db}.{name}")
            catalog_ops.append(create_table_op(table))
            partitions = ms.list_partitions(table.full_name) if table.is_partitioned else []
            catalog_ops.extend(r.AddPartition(db, name, p.values) for p in partitions)
            if not table.is_transactional:
                continue
            registration = ms.register_reader(table.full_name, AGENT, snapshot=snapshot)
            registrations.append(registration.reader_id)
            write_ids = registration.write_ids
            committed = _highest_committed(write_ids)
            if committed:
                seeds.append(r.SeedWriteIds(db, name, committed))
            holders = ms.repl_write_id_txns(table.full_name, write_ids.exceptions)
            pairs = tuple(sorted((txn, wid) for wid, txn in holders.items()))
            if pairs:
                allocs.append(r.AllocWriteIds(db, name, pairs))
            for txn, wid in pairs:
                mapped_txns.add(txn)
                if write_ids.is_write_id_aborted(wid):
                    aborted_txns.add(txn)
            locations = [p.location for p in partitions] or [table.location]
            for location in locations:
                files.extend(partition_files(table, location, write_ids))
    ops = [
        *catalog_ops,
        *seeds,
        r.OpenTxns(tuple(sorted(mapped_txns))),
        *allocs,
        r.AbortTxns(tuple(sorted(aborted_txns))),
    ]
    return BootstrapPlan(
        ms.url, event_id, event_time, tuple(ops), tuple(files), tuple(sorted(snapshot.open_ids))
    )


def create_table_op(table: TableDefinition) -> r.CreateTable:
    return r.CreateTable(
        table.db,
        table.name,
        tuple((c.name, str(c.type)) for c in table.columns),
        tuple((c.name, str(c.type)) for c in table.partition_keys),
        tuple(table.bucket_columns),
        table.num_buckets,
        tuple(sorted(table.properties.items())),
    )


def _highest_committed(write_ids: ValidWriteIdList) -> int:
    w = write_ids.high_watermark
    exceptions = set(write_ids.exceptions)
    while w > 0 and w in exceptions:
        w -= 1
    return w


def partition_files(
    table: TableDefinition, location: str, write_ids: ValidWriteIdList | None
) -> list[BootstrapFile]:
    """Every file of the ACID directories of one partition (or unpartitioned table) that a reader at
    ``write_ids`` may need (None: all of them), at its readable length."""
    fs, path = table_filesystem(location)
    _, table_path = table_filesystem(table.location)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    skip: set[str] = set()
    if write_ids is not None:
        state = get_acid_state(fs, path, write_ids)
        prefix = path.rstrip("/") + "/"
        skip = {
            p[len(prefix) :].split("/", 1)[0] for p in state.obsolete + state.aborted if p.startswith(prefix)
        }
    out = []
    for entry in fs.get_file_info(pafs.FileSelector(path)):
        name = entry.base_name
        if entry.type != pafs.FileType.Directory or name in skip or name.startswith(("_", ".")):
            continue
        try:
            parsed = parse_dir_name(name)
        except AcidFormatError:
            continue
        if parsed is None:
            continue
        delta = parsed if isinstance(parsed, ParsedDelta) else None
        try:
            listing = fs.get_file_info(pafs.FileSelector(entry.path, recursive=True))
        except FileNotFoundError:
            continue  # cleaned meanwhile: it was obsolete
        for info in listing:
            base = info.base_name
            if info.type != pafs.FileType.File or is_side_file(base) or base.startswith("."):
                continue
            length, is_open = _readable_length(fs, info.path, delta, int(info.size or 0))
            out.append(
                BootstrapFile(
                    table.db,
                    table.name,
                    info.path[len(table_path.rstrip("/")) + 1 :],
                    info.path if "://" not in location else f"{location.split('://')[0]}://{info.path}",
                    length,
                    is_open,
                )
            )
    return out


def _readable_length(
    fs: pafs.FileSystem, path: str, delta: ParsedDelta | None, physical: int
) -> tuple[int, bool]:
    for _ in range(50):
        try:
            return logical_extent(fs, path, delta, physical)
        except (
            AcidStreamError
        ) as exc:  # SideFileNotReadable: a writer between making its side file and its first long
            if not exc.retryable:
                raise
            time.sleep(0.02)
    return logical_extent(fs, path, delta, physical)
