"""``MetastoreClient``: acidstream's own metastore backend, every call over SQL, each one DB transaction.

It touches no files and runs no DDL text: :class:`acidstream.metastore.facade.MetastoreFacade`, the façade every other
layer holds, adds those above it (Hive DDL, table handles that know their metastore, removing a dropped table's
files through the storage boundary).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

import pyarrow.fs as pafs
from sqlalchemy import Connection, inspect, select
from sqlalchemy.engine import make_url

from acidstream.acid.partitions import make_part_name
from acidstream.acid.types import Column
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import (
    AlreadyExistsException,
    CommitOutcomeUnknown,
    MetastoreUrlError,
    NoSuchObjectException,
    reading_from,
)
from acidstream.metastore.backend import Capability
from acidstream.metastore.identity import client_identity
from acidstream.metastore.lockwait import wait_for_lock
from acidstream.metastore.models import (
    CompactionInfo,
    CompletedComponent,
    HeartbeatTxnRangeResponse,
    LockComponent,
    LockInfo,
    LockResponse,
    LockState,
    NotificationEvent,
    OperationType,
    Partition,
    PotentialCompaction,
    Publication,
    ReaderRegistration,
    TableDefinition,
    TableWrite,
    TxnInfo,
    TxnStatus,
    WrittenFile,
)
from acidstream.metastore.names import split_name
from acidstream.metastore.sql import (
    catalog,
    compaction,
    followers,
    locks,
    notifications,
    once,
    readers,
    replication,
    snapshots,
    txns,
)
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms
from acidstream.metastore.sql.engine import DEFAULT_WAIT_TIMEOUT, CommitInDoubt, Database
from acidstream.storage import table_filesystem

R = TypeVar("R")

#: Seconds a txn of this client lives without a heartbeat, unless ``open`` is told otherwise (Hive's default).
DEFAULT_TXN_TIMEOUT = 300.0
#: Seconds a reader registration outlives its last heartbeat (see ``MetastoreClient.reader_lease``).
READER_LEASE = 30.0
#: Housekeeping piggy-backed on normal calls runs at most this often (and at least 4x per txn timeout).
MAX_HOUSEKEEPING_INTERVAL = 60.0


def _require_vacant(location: str, table: str) -> None:
    """A new table's directory holds nothing: files there are another metastore's table over the same warehouse
    (or what a dropped table left), which the new table would read as its own and its writers collide with."""
    fs, path = table_filesystem(location)
    with reading_from(location):
        found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    if found:
        raise AlreadyExistsException(
            f"the directory of new table {table}, {location}, is not empty (it holds {found[0].base_name}"
            f"{f' and {len(found) - 1} more' if len(found) > 1 else ''}): another metastore's table over this "
            "warehouse, or files a dropped table left. Give each metastore its own warehouse, or remove them"
        )


class MetastoreClient:
    """Catalog, transactions, write ids, locks, compaction queue, readers and notification log over
    SQLite/PostgreSQL: every backend protocol, no capability missing."""

    missing: ClassVar[frozenset[Capability]] = frozenset()
    backend_name: ClassVar[str] = "acidstream's SQL metastore"

    def __init__(self, db: Database, warehouse: str, txn_timeout: float, lock_wait_timeout: float) -> None:
        self._db = db
        self.warehouse = warehouse
        self.txn_timeout = txn_timeout
        self.lock_wait_timeout = lock_wait_timeout
        self._housekeeping_interval = min(txn_timeout / 4, MAX_HOUSEKEEPING_INTERVAL)
        self._next_housekeeping = time.monotonic() + self._housekeeping_interval
        self._housekeeping_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        url: str,
        *,
        warehouse: str | os.PathLike[str] | None,
        txn_timeout: float | None = None,
        lock_wait_timeout: float = 10.0,
        db_wait_timeout: float | None = None,
        create: bool = True,
    ) -> Self:
        """Open (creating or checking the schema version of) the metastore database at ``url``; new tables'
        files go under ``warehouse``. ``txn_timeout``: how long this client's txns live without a heartbeat
        (default 300 s). ``create=False`` opens an existing metastore only: :class:`NoSuchObjectException`
        naming ``url`` (nothing created) when the database has no acidstream schema or its SQLite file is missing.

        ``db_wait_timeout``: the longest one call waits for the database in all (another process's write lock
        on SQLite, retries after lost connections) before failing with ``MetastoreUnavailable``; by default a
        tenth of ``txn_timeout`` within [1, 30] s, so that a client waiting on it cannot outlive its txns.
        """
        if warehouse is None:
            raise MetastoreUrlError(
                f"{url}: acidstream's metastore needs warehouse=... (where table files go)"
            )
        if txn_timeout is None:
            txn_timeout = DEFAULT_TXN_TIMEOUT
        if db_wait_timeout is None:
            db_wait_timeout = min(DEFAULT_WAIT_TIMEOUT, max(1.0, txn_timeout / 10))
        if not create and not _sqlite_file_exists(url):
            raise NoSuchObjectException(f"no metastore at {url}: the file does not exist")
        db = Database(url, db_wait_timeout)
        wh = os.fspath(warehouse)
        if "://" not in wh:  # locations are stored: relative ones would resolve against each reader's cwd
            wh = os.path.abspath(wh)

        def init(conn: Connection) -> None:
            if not create and not inspect(conn).has_table(s.schema_version.name):
                raise NoSuchObjectException(f"no metastore at {url}: the database has no acidstream schema")
            s.ensure_schema(conn, now_ms())
            catalog.create_database(conn, wh, catalog.DEFAULT_DB, if_not_exists=True)

        try:
            db.write(init)
        except BaseException:
            db.dispose()
            raise
        return cls(db, wh, txn_timeout, lock_wait_timeout)

    def close(self) -> None:
        self._db.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        return self._db.url

    @property
    def reader_lease(self) -> float:
        """How long a reader registration of this client outlives its last heartbeat: ``READER_LEASE``, or the
        txn timeout when that is shorter. Short, so that a crashed reader holds the cleaner back briefly."""
        return min(READER_LEASE, self.txn_timeout)

    @property
    def _timeout_ms(self) -> int:
        """``txn_timeout`` as recorded with this client's txns, txn-less locks and reader registrations: each
        is timed out by its own, whoever runs the housekeeping."""
        return int(self.txn_timeout * 1000)

    @property
    def dialect(self) -> str:
        return self._db.dialect

    @property
    def db_wait_timeout(self) -> float:
        """The longest one call waits for the database in all (see :meth:`connect`)."""
        return self._db.wait_timeout

    # --- plumbing -------------------------------------------------------------------------------------------

    def _write(self, fn: Callable[[Connection], R], *, durable: bool = False) -> R:
        """``durable``: on disk when this returns (a txn's commit), see ``Database.write``."""
        return self._db.write(fn, durable=durable)

    def _read(self, fn: Callable[[Connection], R]) -> R:
        return self._db.read(fn)

    def _write_once(
        self,
        fn: Callable[[Connection], R],
        encode: Callable[[R], Any] = lambda value: value,
        decode: Callable[[Connection, Any], R] = lambda _conn, value: value,
    ) -> R:
        """``_write`` of a change that must happen once although the answer to its commit may be lost: see
        :mod:`acidstream.metastore.sql.once` (a JSON-able result needs no ``encode``/``decode``)."""
        if self.dialect == "sqlite":  # answers in-process: none is ever lost
            return self._write(fn)
        return self._write(once.once(fn, encode, decode))

    def _housekeep_if_due(self) -> None:
        """Abort timed-out txns as a side effect of normal use, so no daemon is needed for correctness."""
        if time.monotonic() < self._next_housekeeping:
            return
        with self._housekeeping_lock:
            if time.monotonic() < self._next_housekeeping:
                return
            self._next_housekeeping = time.monotonic() + self._housekeeping_interval
        self.perform_timeouts()

    # --- catalog ----------------------------------------------------------------------------------------------

    def create_database(self, name: str, if_not_exists: bool = False, comment: str | None = None) -> None:
        self._write(
            lambda c: catalog.create_database(
                c, self.warehouse, name, if_not_exists=if_not_exists, comment=comment
            )
        )

    def drop_database(self, name: str, cascade: bool = False, if_exists: bool = False) -> list[str]:
        """Drop a database (with ``cascade`` its tables); the dropped tables' locations."""
        return self._write(lambda c: catalog.drop_database(c, name, cascade=cascade, if_exists=if_exists))

    def list_databases(self) -> list[str]:
        return self._read(catalog.list_databases)

    def create_table(
        self,
        db: str,
        name: str,
        columns: Sequence[Column],
        *,
        partition_keys: Sequence[Column] = (),
        bucket_columns: Sequence[str] = (),
        num_buckets: int = 0,
        properties: Mapping[str, str] | None = None,
        if_not_exists: bool = False,
    ) -> TableDefinition:
        if not (if_not_exists and name.lower() in self.list_tables(db)):
            _require_vacant(catalog.table_location(self.warehouse, db, name.lower()), f"{db}.{name}")
        self._write(
            lambda c: catalog.create_table(
                c,
                self.warehouse,
                db,
                name,
                columns,
                partition_keys=partition_keys,
                bucket_columns=bucket_columns,
                num_buckets=num_buckets,
                properties=properties,
                if_not_exists=if_not_exists,
            )
        )
        return self.table(f"{db}.{name}")

    def table(self, table_name: str) -> TableDefinition:
        db, name = split_name(table_name)
        return TableDefinition(**self._read(lambda c: catalog.load_table(c, db, name)))

    def list_tables(self, db: str = catalog.DEFAULT_DB) -> list[str]:
        db = db.lower()

        def run(c: Connection) -> list[str]:
            catalog.require_database(c, db)
            return catalog.list_tables(c, db)

        return self._read(run)

    def drop_table(self, table_name: str, if_exists: bool = False) -> list[str]:
        """Drop the table from the catalog; its location (empty if it did not exist)."""
        db, name = split_name(table_name)
        return self._write(lambda c: catalog.drop_table(c, db, name, if_exists=if_exists))

    def alter_table_properties(self, table_name: str, properties: Mapping[str, str]) -> None:
        db, name = split_name(table_name)
        self._write(lambda c: catalog.alter_table_properties(c, db, name, properties))

    def alter_table_columns(
        self, table_name: str, columns: Sequence[Column], *, cascade: bool = False
    ) -> None:
        """``cascade`` changes nothing more: this metastore keeps no columns per partition."""
        db, name = split_name(table_name)
        self._write(lambda c: catalog.alter_table_columns(c, db, name, columns))

    def add_partition(
        self, table_name: str, values: Sequence[str | None], *, if_not_exists: bool = True
    ) -> Partition:
        db, name = split_name(table_name)
        return self._write(lambda c: catalog.add_partition(c, db, name, values, if_not_exists=if_not_exists))

    def get_partition(self, table_name: str, values: Sequence[str | None]) -> Partition | None:
        db, name = split_name(table_name)
        return self._read(lambda c: catalog.get_partition(c, db, name, values))

    def list_partitions(self, table_name: str) -> list[Partition]:
        db, name = split_name(table_name)
        return self._read(lambda c: catalog.list_partitions(c, db, name))

    def drop_partition(self, table_name: str, values: Sequence[str]) -> None:
        db, name = split_name(table_name)
        self._write(lambda c: catalog.drop_partition(c, db, name, values))

    # --- transactions -------------------------------------------------------------------------------------------

    def open_txns(
        self, n: int = 1, *, user: str | None = None, host: str | None = None, agent_info: str | None = None
    ) -> list[int]:
        self._housekeep_if_due()
        user, host = _identify(user, host)
        timeout_ms = self._timeout_ms
        return self._write_once(
            lambda c: txns.open_txns(c, n, user=user, host=host, agent_info=agent_info, timeout_ms=timeout_ms)
        )

    def allocate_table_write_ids(self, txn_ids: Sequence[int], table_name: str) -> list[tuple[int, int]]:
        db, name = split_name(table_name)
        return self._write(lambda c: txns.allocate_table_write_ids(c, txn_ids, db, name))

    def open_txns_with_write_ids(
        self,
        n: int,
        table_name: str,
        *,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> list[tuple[int, int]]:
        """``open_txns(n)`` then ``allocate_table_write_ids`` in one round trip: (txn id, write id) pairs."""
        self._housekeep_if_due()
        db, name = split_name(table_name)
        user, host = _identify(user, host)
        timeout_ms = self._timeout_ms
        return self._write_once(
            lambda c: txns.open_txns_with_write_ids(
                c, n, db, name, user=user, host=host, agent_info=agent_info, timeout_ms=timeout_ms
            ),
            decode=_pairs,
        )

    def open_txns_with_write_ids_and_lock(
        self,
        n: int,
        table_name: str,
        components: Sequence[LockComponent],
        *,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> tuple[list[tuple[int, int]], LockResponse]:
        """Streaming's batch open: ``open_txns_with_write_ids`` plus a no-wait ``lock`` for the first txn.

        SQLite serialises writers anyway, so there it is one DB transaction. PostgreSQL runs the two in turn:
        the open's ``NEXT_TXN_ID`` row lock, which every opener waits for, is not held across the lock request.
        Either way a lock request that raises leaves no txn of the batch open.
        """
        self._housekeep_if_due()
        db, name = split_name(table_name)
        user, host = _identify(user, host)

        timeout_ms = self._timeout_ms

        def open_batch(c: Connection) -> list[tuple[int, int]]:
            return txns.open_txns_with_write_ids(
                c, n, db, name, user=user, host=host, agent_info=agent_info, timeout_ms=timeout_ms
            )

        def lock_first(
            c: Connection, txn_id: int, opened_with: tuple[str, str, int] | None = None
        ) -> tuple[int, LockState, str | None]:
            return locks.request(
                c,
                components,
                txn_id=txn_id,
                user=user,
                host=host,
                agent_info=agent_info,
                opened_with=opened_with,
            )

        if self.dialect == "sqlite":

            def both(c: Connection) -> tuple[list[tuple[int, int]], tuple[int, LockState, str | None]]:
                pairs = open_batch(c)
                return pairs, lock_first(c, pairs[0][0], (db, name, pairs[0][1]))

            pairs, (lock_id, state, _blocker) = self._write(both)
        else:
            pairs = self._write_once(open_batch, decode=_pairs)
            try:
                lock_id, state, _blocker = self._write(lambda c: lock_first(c, pairs[0][0]))
            except BaseException:
                with contextlib.suppress(Exception):  # the lock's failure is what the caller needs to see
                    self._write(lambda c: txns.abort_txns(c, [t for t, _ in pairs]))
                raise
        return pairs, LockResponse(lock_id, state)

    def commit_txn(
        self,
        txn_id: int,
        *,
        key: str | None = None,
        value: str | None = None,
        writes: Sequence[TableWrite] = (),
    ) -> None:
        """Commit; ``writes`` (per table: partitions written with their operation, files written) are
        recorded first, in the same DB transaction, as ``add_dynamic_partitions``/``add_write_notification``
        would. A write conflict aborts the txn and raises :class:`WriteConflictException`.

        A COMMIT whose answer was lost is sent again on a new connection (committing a committed txn does
        nothing); if the database cannot be reached again within the wait timeout, the outcome is unknown:
        :class:`CommitOutcomeUnknown`, never a retryable error for a commit that may have happened."""
        try:
            conflict = self._write(
                lambda c: txns.commit_txn(c, txn_id, key, value, writes=writes), durable=True
            )
        except CommitInDoubt as exc:
            shown = make_url(self.url).render_as_string(hide_password=True)
            why = f"the metastore database was not reached again within {self._db.wait_timeout:g}s: {exc}"
            raise CommitOutcomeUnknown(txn_id, shown, why) from exc
        if conflict is not None:
            raise conflict

    def abort_txn(self, txn_id: int) -> None:
        self.abort_txns([txn_id])

    def abort_txns(self, txn_ids: Sequence[int]) -> None:
        self._write(lambda c: txns.abort_txns(c, txn_ids))

    def heartbeat(self, txn_id: int) -> None:
        self._write(lambda c: txns.heartbeat(c, txn_id))

    def heartbeat_txn_range(self, lo: int, hi: int) -> HeartbeatTxnRangeResponse:
        return self._write(lambda c: txns.heartbeat_txn_range(c, lo, hi))

    def get_latest_txnid_in_conflict(self, txn_id: int, table_name: str) -> int:
        """The latest txn that committed an update or delete of ``table_name`` after ``txn_id`` started (0:
        none): ``txn_id``'s own update or delete there would fail its commit with a write conflict."""
        db, name = split_name(table_name)
        return self._read(lambda c: txns.latest_txn_id_in_conflict(c, txn_id, db, name))

    def replace_txn(self, txn_id: int, table_name: str, *, agent_info: str | None = None) -> tuple[int, int]:
        """A new txn with a write id on ``table_name`` that holds open txn ``txn_id``'s locks, which is aborted
        (see ``txns.replace_txn``): (txn id, write id)."""
        db, name = split_name(table_name)
        user, host = _identify(None, None)
        timeout_ms = self._timeout_ms
        return self._write_once(
            lambda c: txns.replace_txn(
                c, txn_id, db, name, user=user, host=host, agent_info=agent_info, timeout_ms=timeout_ms
            ),
            decode=lambda _c, pair: (pair[0], pair[1]),
        )

    def get_open_txns(self) -> ValidTxnList:
        return self._read(txns.get_open_txns)

    def get_valid_write_ids(
        self, table_name: str, txn_id: int | None = None, *, snapshot: ValidTxnList | None = None
    ) -> ValidWriteIdList:
        """The table's snapshot: now, or at ``snapshot`` (see :meth:`snapshot`); with ``txn_id`` (which must be
        open) its own write id is an open exception."""
        self._housekeep_if_due()
        db, name = split_name(table_name)

        def run(c: Connection) -> ValidWriteIdList:
            if txn_id is not None:
                txns.require_open(c, txn_id)
            if snapshot is not None:
                return snapshots.valid_write_ids_at(c, db, name, snapshot)
            return txns.get_valid_write_ids(c, db, name)

        return self._read(run)

    def snapshot(self) -> ValidTxnList:
        """One point in time for every table: scans of several tables given it see the same commits."""
        return self.get_open_txns()

    def get_txn_state(self, txn_id: int) -> TxnStatus:
        return self._read(lambda c: txns.get_txn_state(c, txn_id))

    def show_txns(self) -> list[TxnInfo]:
        return self._read(txns.show_txns)

    def get_write_id(self, txn_id: int, table_name: str) -> int | None:
        db, name = split_name(table_name)
        return self._read(lambda c: txns.get_write_id(c, txn_id, db, name))

    def add_dynamic_partitions(
        self,
        txn_id: int,
        write_id: int,
        table_name: str,
        partition_names: Sequence[str],
        operation: OperationType = OperationType.INSERT,
    ) -> None:
        db, name = split_name(table_name)
        self._write(
            lambda c: txns.add_dynamic_partitions(c, txn_id, write_id, db, name, partition_names, operation)
        )

    def add_write_notification(
        self,
        txn_id: int,
        write_id: int,
        table_name: str,
        partition_name: str | None,
        files: Sequence[str | WrittenFile],
    ) -> None:
        """An ACID_WRITE event (files a txn wrote, by path or described for replicas); its id is given when a
        reader publishes it."""
        db, name = split_name(table_name)
        self._write(
            lambda c: txns.add_write_notification(c, txn_id, write_id, db, name, partition_name, files)
        )

    def perform_timeouts(self) -> list[int]:
        """One housekeeper pass: abort txns silent for longer than their own timeout (returns their ids) and forget
        reader registrations silent for longer than their lease; ``txn_timeout`` serves rows that recorded none."""
        timeout_ms = self._timeout_ms

        def run(c: Connection) -> list[int]:
            readers.purge(c, timeout_ms)
            once.purge(c)
            return txns.perform_timeouts(c, timeout_ms)

        return self._write(run)

    def completed_components(self, table_name: str, since_txn: int = 0) -> list[CompletedComponent]:
        db, name = split_name(table_name)
        return self._read(lambda c: txns.completed_components(c, db, name, since_txn))

    # --- locks ---------------------------------------------------------------------------------------------------

    def lock(
        self,
        components: Sequence[LockComponent],
        *,
        txn_id: int | None = None,
        agent_info: str | None = None,
        user: str | None = None,
        host: str | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> LockResponse:
        """Request all components at once; with ``wait`` poll until acquired or ``timeout`` (then release)."""
        self._housekeep_if_due()
        user, host = _identify(user, host)

        timeout_ms = self._timeout_ms
        lock_id, state, _blocker = self._write_once(
            lambda c: locks.request(
                c,
                components,
                txn_id=txn_id,
                user=user,
                host=host,
                agent_info=agent_info,
                timeout_ms=timeout_ms,
            ),
            encode=lambda got: [got[0], got[1].value, got[2]],
            decode=lambda _c, got: (got[0], LockState(got[1]), got[2]),
        )
        if state is not LockState.WAITING or not wait:
            return LockResponse(lock_id, state)

        def withdraw() -> bool:
            """Remove the request if still waiting; whether it was granted between the last check and now."""
            self._write(lambda c: locks.unlock(c, lock_id, waiting_only=True))
            return self._lock_exists(lock_id)

        return wait_for_lock(
            lock_id,
            lambda: self._write(lambda c: locks.check(c, lock_id)),
            withdraw,
            self.lock_wait_timeout if timeout is None else timeout,
            first_pause=0.005,
            max_pause=0.25,
        )

    def _lock_exists(self, lock_id: int) -> bool:
        return self._read(
            lambda c: (
                c.execute(
                    select(s.hive_locks.c.hl_lock_ext_id).where(s.hive_locks.c.hl_lock_ext_id == lock_id)
                ).first()
                is not None
            )
        )

    def check_lock(self, lock_id: int) -> LockState:
        return self._write(lambda c: locks.check(c, lock_id))[0]

    def unlock(self, lock_id: int) -> None:
        self._write(lambda c: locks.unlock(c, lock_id))

    def heartbeat_lock(self, lock_id: int) -> None:
        """Keep a lock taken without a txn alive (txn locks live as long as their txn)."""
        self._write(lambda c: locks.heartbeat(c, lock_id))

    def show_locks(self, table_name: str | None = None) -> list[LockInfo]:
        if table_name is None:
            return self._read(locks.show_locks)
        db, name = split_name(table_name)
        return self._read(lambda c: locks.show_locks(c, db, name))

    # --- compaction ------------------------------------------------------------------------------------------------

    def compact(
        self,
        table_name: str,
        partition: str | Mapping[str, Any] | None = None,
        kind: str = "major",
        *,
        initiator_id: str | None = None,
    ) -> int:
        """Queue a ``major``/``minor`` compaction of a table or (required for partitioned tables) one partition,
        given as ``"k=v/k2=v2"`` or ``{"k": v}``; returns the request id (an initiated or working request for
        the same target is returned instead of a second one)."""
        db, name = split_name(table_name)
        part = _partition_name(partition)
        if initiator_id is None:
            _, host = _identify(None, None)
            initiator_id = f"{host}-manual"
        return self._write(
            lambda c: compaction.enqueue(c, db, name, part, kind.lower(), initiator_id=initiator_id)
        )

    def get_compaction(self, compaction_id: int) -> CompactionInfo:
        return self._read(lambda c: compaction.get(c, compaction_id))

    def show_compactions(self) -> list[CompactionInfo]:
        return self._read(compaction.show)

    def find_next_compaction(self, worker_id: str, compaction_id: int | None = None) -> CompactionInfo | None:
        """Claim the oldest initiated request (or ``compaction_id``) for ``worker_id``: it becomes working and
        gets a compactor txn (``CompactionInfo.txn_id``) that the worker must heartbeat."""
        user, host = _identify(None, None)
        return self._write_once(
            lambda c: compaction.claim(
                c, worker_id, cq_id=compaction_id, user=user, host=host, timeout_ms=self._timeout_ms
            ),
            encode=lambda info: None if info is None else info.id,
            decode=lambda c, cq_id: None if cq_id is None else compaction.get(c, cq_id),
        )

    def update_compaction(
        self, compaction_id: int, txn_id: int, *, highest_write_id: int, meta: Mapping[str, Any]
    ) -> None:
        self._write(
            lambda c: compaction.update_work(
                c, compaction_id, txn_id, highest_write_id=highest_write_id, meta=meta
            )
        )

    def begin_publish(self, compaction_id: int, txn_id: int, meta: Mapping[str, Any]) -> int:
        return self._write(lambda c: compaction.begin_publish(c, compaction_id, txn_id, meta))

    def mark_compacted(self, compaction_id: int, txn_id: int | None = None) -> None:
        """``txn_id``: the worker's compactor txn, which must still own the entry (None: recovery)."""
        self._write(lambda c: compaction.mark_compacted(c, compaction_id, txn_id))

    def mark_refused(self, compaction_id: int, message: str, txn_id: int | None = None) -> None:
        self._write(lambda c: compaction.mark_refused(c, compaction_id, message, txn_id))

    def mark_failed(self, compaction_id: int, message: str, txn_id: int | None = None) -> None:
        self._write(lambda c: compaction.mark_failed(c, compaction_id, message, txn_id))

    def revert_compaction(self, compaction_id: int, message: str, max_attempts: int) -> str:
        return self._write(lambda c: compaction.revert(c, compaction_id, message, max_attempts))

    def find_abandoned_compactions(self) -> list[CompactionInfo]:
        return self._read(compaction.find_abandoned)

    def find_ready_to_clean(self, retention: float) -> list[CompactionInfo]:
        """Published compactions at least ``retention`` s old that no registered reader can still need."""
        return self._read(
            lambda c: compaction.find_ready_to_clean(c, int(retention * 1000), self._timeout_ms)
        )

    def claim_cleaning(self, compaction_id: int) -> bool:
        """Take a ready request for cleaning (False: another cleaner has it); the claim lapses after
        ``txn_timeout``."""
        return self._write(lambda c: compaction.claim_cleaning(c, compaction_id, self._timeout_ms))

    def blocking_readers(self, compaction_id: int) -> list[int]:
        return self._read(lambda c: compaction.blocking_readers(c, compaction_id, self._timeout_ms))

    def mark_cleaned(
        self, compaction_id: int, forget_write_ids: Sequence[int] = (), removed: Sequence[str] = ()
    ) -> None:
        self._write(lambda c: compaction.mark_cleaned(c, compaction_id, forget_write_ids, removed))

    def find_potential_compactions(self, aborted_threshold: int) -> list[PotentialCompaction]:
        return self._read(lambda c: compaction.find_potential(c, aborted_threshold))

    def too_many_failed_compactions(
        self, table_name: str, partition: str | None, threshold: int, retry_after: float
    ) -> bool:
        db, name = split_name(table_name)
        return self._read(
            lambda c: compaction.too_many_failures(c, db, name, partition, threshold, int(retry_after * 1000))
        )

    def record_compaction_not_initiated(
        self, table_name: str, partition: str | None, message: str, *, initiator_id: str | None = None
    ) -> int:
        db, name = split_name(table_name)
        return self._write(
            lambda c: compaction.record_not_initiated(
                c, db, name, partition, message, initiator_id=initiator_id
            )
        )

    def purge_compaction_history(self) -> int:
        return self._write(compaction.purge_history)

    # --- snapshot readers --------------------------------------------------------------------------------------------

    def register_reader(
        self, table_name: str, agent_info: str | None = None, *, snapshot: ValidTxnList | None = None
    ) -> ReaderRegistration:
        """Register a scan of ``table_name`` and take its snapshot (or derive the table's from ``snapshot``, see
        :meth:`snapshot`), in one DB transaction.

        Until :meth:`unregister_reader` (or ``txn_timeout`` without :meth:`heartbeat_readers`) no compaction
        published after this registration has its replaced files deleted, so the scan can read every file its
        listing found.
        """
        self._housekeep_if_due()
        db, name = split_name(table_name)
        user, host = _identify(None, None)

        def registered(c: Connection, reader_id: int) -> ReaderRegistration:
            at = snapshot if snapshot is not None else txns.get_open_txns(c)
            return ReaderRegistration(reader_id, snapshots.valid_write_ids_at(c, db, name, at), at)

        def run(c: Connection) -> ReaderRegistration:
            reader_id = readers.register(
                c,
                db,
                name,
                user=user,
                host=host,
                agent_info=agent_info,
                lease_ms=int(self.reader_lease * 1000),
            )
            return registered(c, reader_id)

        # a replay takes its snapshot anew: later than the registration, which is what a reader needs
        return self._write_once(run, encode=lambda registration: registration.reader_id, decode=registered)

    def heartbeat_readers(self, reader_ids: Sequence[int], *, lease: float | None = None) -> list[int]:
        """Keep registrations alive (for ``lease`` seconds from now on, if given, else their own lease);
        returns those that had already expired."""
        lease_ms = None if lease is None else int(lease * 1000)
        return self._write(lambda c: readers.heartbeat(c, reader_ids, lease_ms))

    def unregister_readers(self, agent_info: str) -> int:
        """End the registrations made with ``agent_info`` (e.g. a Spark job's reads, tagged with the
        ``readerTag`` option, once the job is done); how many there were."""
        return self._write(lambda c: readers.unregister_by_agent(c, agent_info))

    def unregister_reader(self, reader_id: int) -> None:
        self._write(lambda c: readers.unregister(c, [reader_id]))

    def active_readers(self, table_name: str | None = None) -> list[tuple[int, str, str]]:
        """(reader id, db, table) of the live registrations, oldest first."""
        if table_name is None:
            return self._read(readers.active)
        db, name = split_name(table_name)
        return self._read(lambda c: readers.active(c, db, name))

    def unfinished_publications(self, table_name: str, baseline: int) -> list[Publication]:
        """Compactions of ``table_name`` whose output may have been moving into place during a directory listing
        made after ``baseline`` (``ReaderRegistration.baseline``): the listing must ignore their outputs."""
        db, name = split_name(table_name)
        return self._read(lambda c: compaction.unfinished_publications(c, db, name, baseline))

    # --- replication (see ``metastore.replication``) -------------------------------------------------------------------

    def repl_apply(
        self,
        policy: str,
        source: str,
        event_id: int,
        event_time: int,
        ops: Sequence[replication.ReplOp],
        *,
        bootstrap: bool = False,
    ) -> list[str]:
        """On a replica: apply one source event's operations and record it as applied, in one DB transaction;
        the locations of the tables it dropped."""
        return self._write(
            lambda c: replication.apply(
                c, self.warehouse, policy, source, event_id, event_time, ops, bootstrap=bootstrap
            )
        )

    def repl_state(self, policy: str) -> replication.ReplState | None:
        return self._read(lambda c: replication.state(c, policy))

    def repl_states(self) -> list[replication.ReplState]:
        return self._read(replication.states)

    def repl_file_state(self, path: str) -> tuple[int, int] | None:
        return self._read(lambda c: replication.file_state(c, path))

    def repl_target_txns(self, policy: str, src_txn_ids: Sequence[int]) -> dict[int, int]:
        return self._read(lambda c: replication.target_txns(c, policy, src_txn_ids))

    def repl_write_id_txns(self, table_name: str, write_ids: Sequence[int]) -> dict[int, int]:
        """On a source: the txn that holds each of ``table_name``'s ``write_ids``."""
        db, name = split_name(table_name)
        return self._read(lambda c: replication.write_id_txns(c, db, name, write_ids))

    def repl_follower_progress(self, name: str, event_id: int, lease: float) -> None:
        """On a source: follower ``name`` applied every event up to ``event_id``; until ``lease`` seconds pass
        without another call, the cleaner keeps what it may still copy."""
        self._write(lambda c: followers.follower_progress(c, name, event_id, int(lease * 1000)))

    def repl_followers(self) -> list[tuple[str, int, int, int]]:
        return self._read(followers.followers)

    def repl_drop_follower(self, name: str) -> bool:
        return self._write(lambda c: followers.drop_follower(c, name))

    # --- notifications ----------------------------------------------------------------------------------------------

    def notifications(self, after_event_id: int = 0, limit: int = 1000) -> list[NotificationEvent]:
        """Events with ids above ``after_event_id``; publishes committed events first (see ``notifications``)."""
        if self._read(notifications.has_unpublished):
            self._write(lambda c: notifications.publish(c, limit))
        return self._read(lambda c: notifications.events(c, after_event_id, limit))

    def current_notification_event_id(self) -> int:
        if self._read(notifications.has_unpublished):
            self._write(notifications.publish)
        return self._read(notifications.current_event_id)

    def recorded_lengths(self, table_name: str, partition: str | None, low: int, high: int) -> dict[str, int]:
        """The lengths committed txns of write ids ``low..high`` recorded for their files in ``partition``, per
        ``delta_x_y/bucket_n`` (see ``notifications.recorded_lengths``): a file has at least that many bytes."""
        db, name = split_name(table_name)
        return self._read(lambda c: notifications.recorded_lengths(c, db, name, partition, low, high))


def _partition_name(partition: str | Mapping[str, Any] | None) -> str | None:
    """A partition given as ``{"k": v}`` as its name ``k=v`` (keys in the mapping's order; the queue checks
    them against the table's); a name passes through."""
    if partition is None or isinstance(partition, str):
        return partition
    return make_part_name(list(partition), [None if v is None else str(v) for v in partition.values()])


def _identify(user: str | None, host: str | None) -> tuple[str | None, str]:
    default_user, default_host = client_identity()
    return (user if user is not None else default_user), (host if host is not None else default_host)


def _pairs(_conn: Connection, value: Any) -> list[tuple[int, int]]:
    """(txn id, write id) pairs back from JSON."""
    return [(t, w) for t, w in value]


def _sqlite_file_exists(url: str) -> bool:
    """False for a ``sqlite:///path`` URL whose file is missing (opening it would create it); True otherwise."""
    prefix = "sqlite:///"
    return not url.startswith(prefix) or os.path.isfile(url[len(prefix) :].split("?", 1)[0])
