"""``MetastoreFacade``: the façade every other layer holds, over one backend (:mod:`acidstream.metastore.backend`).

``MetastoreFacade.connect(url)`` opens the backend the URL's scheme names (:mod:`acidstream.metastore.location`):
acidstream's SQL metastore (:class:`~acidstream.metastore.sql.client.MetastoreClient`, ``sqlite://`` or
``postgresql://``) or a Hive Metastore (:class:`~acidstream.metastore.hive.client.HiveMetastoreClient`,
``thrift://``, the ``hive`` extra), and holds it as :attr:`MetastoreFacade.backend`. The calls of the backend
protocols pass through unchanged (typed by their protocol, run by the backend); the façade adds what sits above
them: Hive DDL (:meth:`MetastoreFacade.execute`), table handles that know their metastore, the storage boundary (a
location checked before a table is created, a dropped table's files deleted once the drop is committed: a
failed drop keeps its data) and the capabilities a backend declares it lacks. What only one backend has is
reached through :attr:`MetastoreFacade.backend`, never through the façade.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from acidstream.acid.types import Column
from acidstream.errors import LockTimeoutException
from acidstream.metastore import models
from acidstream.metastore.backend import (
    Backend,
    Capability,
    Catalog,
    CompactionQueue,
    NotificationLog,
    ReaderRegistry,
    ReplicaState,
    Transactions,
)
from acidstream.metastore.ddl import run
from acidstream.metastore.location import open_backend
from acidstream.storage import check_location, delete_locations

if TYPE_CHECKING:
    from acidstream.metastore.replops import ReplOp

P = ParamSpec("P")
R = TypeVar("R")


class _Call(Generic[P, R]):
    """A backend call the façade passes on unchanged: typed by its protocol's declaration, run by the backend.
    The bound method is kept on the instance at first use, so later calls cost what a method call costs."""

    def __init__(self, declared: Callable[Concatenate[Any, P], R]) -> None:
        self.name = declared.__name__

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...

    @overload
    def __get__(self, obj: MetastoreFacade, owner: type) -> Callable[P, R]: ...

    def __get__(self, obj: MetastoreFacade | None, owner: type) -> Self | Callable[P, R]:
        if obj is None:
            return self
        bound: Callable[P, R] = getattr(obj.backend, self.name)
        obj.__dict__[self.name] = bound
        return bound


@dataclass(frozen=True)
class TableHandle(models.TableDefinition):
    """A table handle: the definition and the metastore it came from; upper layers subclass it
    (``MetastoreFacade.table_class``) to add reading/writing methods."""

    metastore: MetastoreFacade | None = field(default=None, compare=False, repr=False)


class MetastoreFacade:
    """Catalog, transactions, write ids, locks, compaction queue, readers and notifications over one backend,
    with Hive DDL and table handles. Build it with :meth:`connect`."""

    table_class: ClassVar[type[TableHandle]] = TableHandle

    def __init__(self, backend: Backend) -> None:
        #: The backend this façade runs its calls on; what only one backend has is reached here.
        self.backend = backend

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        warehouse: str | os.PathLike[str] | None = None,
        txn_timeout: float | None = None,
        lock_wait_timeout: float = 10.0,
        **options: Any,
    ) -> Self:
        """Open the metastore at ``url``: ``sqlite:///path``, ``postgresql://...`` (acidstream's own; needs
        ``warehouse``, where new tables' files go) or ``thrift://host:9083`` (a Hive Metastore; its tables and
        databases carry their locations, ``warehouse`` defaults to its ``metastore.warehouse.dir``).

        ``txn_timeout``: for acidstream's metastore, how long this client's txns live without a heartbeat
        (default 300 s); for Hive's, the server's ``metastore.txn.timeout`` unless given. ``options`` go to the
        backend: ``db_wait_timeout`` (acidstream's: how long a call waits for its database in all);
        ``connect_timeout`` (connecting and the version check, 10 s), ``socket_timeout`` (any other call, 600 s)
        and ``settle_timeout`` (how long a commit whose answer was lost is asked again, 60 s) for Hive's;
        ``create=False`` to open an existing metastore only (acidstream's: ``NoSuchObjectException`` naming ``url``
        when there is none, nothing created; a Hive Metastore that answers exists).
        """
        return cls(
            open_backend(
                url,
                warehouse=None if warehouse is None else os.fspath(warehouse),
                txn_timeout=txn_timeout,
                lock_wait_timeout=lock_wait_timeout,
                **options,
            )
        )

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what the backend is ------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.backend.url

    @property
    def warehouse(self) -> str:
        """Where new databases' (and, on acidstream's metastore, new tables') files go."""
        return self.backend.warehouse

    @property
    def backend_name(self) -> str:
        """The backend, as messages name it."""
        return self.backend.backend_name

    @property
    def db_wait_timeout(self) -> float:
        """The longest one call waits for the metastore before it raises ``MetastoreUnavailable``."""
        return self.backend.db_wait_timeout

    @property
    def txn_timeout(self) -> float:
        """How long a txn lives without a heartbeat."""
        return self.backend.txn_timeout

    @property
    def lock_wait_timeout(self) -> float:
        """How long :meth:`lock` waits for a lock by default."""
        return self.backend.lock_wait_timeout

    @lock_wait_timeout.setter
    def lock_wait_timeout(self, seconds: float) -> None:
        self.backend.lock_wait_timeout = seconds

    @property
    def reader_lease(self) -> float:
        """How long a reader registration outlives its last heartbeat."""
        return self.backend.reader_lease

    # --- capabilities ------------------------------------------------------------------------------------------

    @property
    def missing(self) -> frozenset[Capability]:
        """What the backend lacks (see :class:`Capability`)."""
        return self.backend.missing

    def supports(self, capability: Capability) -> bool:
        return capability not in self.backend.missing

    # --- the backend's calls, unchanged ---------------------------------------------------------------------------

    create_database = _Call(Catalog.create_database)
    list_databases = _Call(Catalog.list_databases)
    list_tables = _Call(Catalog.list_tables)
    alter_table_properties = _Call(Catalog.alter_table_properties)
    alter_table_columns = _Call(Catalog.alter_table_columns)
    add_partition = _Call(Catalog.add_partition)
    get_partition = _Call(Catalog.get_partition)
    list_partitions = _Call(Catalog.list_partitions)
    drop_partition = _Call(Catalog.drop_partition)

    open_txns = _Call(Transactions.open_txns)
    allocate_table_write_ids = _Call(Transactions.allocate_table_write_ids)
    open_txns_with_write_ids = _Call(Transactions.open_txns_with_write_ids)
    open_txns_with_write_ids_and_lock = _Call(Transactions.open_txns_with_write_ids_and_lock)
    commit_txn = _Call(Transactions.commit_txn)
    abort_txn = _Call(Transactions.abort_txn)
    abort_txns = _Call(Transactions.abort_txns)
    heartbeat = _Call(Transactions.heartbeat)
    heartbeat_txn_range = _Call(Transactions.heartbeat_txn_range)
    get_latest_txnid_in_conflict = _Call(Transactions.get_latest_txnid_in_conflict)
    replace_txn = _Call(Transactions.replace_txn)
    get_open_txns = _Call(Transactions.get_open_txns)
    get_valid_write_ids = _Call(Transactions.get_valid_write_ids)
    snapshot = _Call(Transactions.snapshot)
    get_txn_state = _Call(Transactions.get_txn_state)
    show_txns = _Call(Transactions.show_txns)
    add_dynamic_partitions = _Call(Transactions.add_dynamic_partitions)
    add_write_notification = _Call(Transactions.add_write_notification)
    perform_timeouts = _Call(Transactions.perform_timeouts)
    lock = _Call(Transactions.lock)
    unlock = _Call(Transactions.unlock)
    show_locks = _Call(Transactions.show_locks)

    get_compaction = _Call(CompactionQueue.get_compaction)
    show_compactions = _Call(CompactionQueue.show_compactions)
    find_next_compaction = _Call(CompactionQueue.find_next_compaction)
    update_compaction = _Call(CompactionQueue.update_compaction)
    begin_publish = _Call(CompactionQueue.begin_publish)
    mark_compacted = _Call(CompactionQueue.mark_compacted)
    mark_refused = _Call(CompactionQueue.mark_refused)
    mark_failed = _Call(CompactionQueue.mark_failed)
    revert_compaction = _Call(CompactionQueue.revert_compaction)
    find_abandoned_compactions = _Call(CompactionQueue.find_abandoned_compactions)
    find_ready_to_clean = _Call(CompactionQueue.find_ready_to_clean)
    claim_cleaning = _Call(CompactionQueue.claim_cleaning)
    blocking_readers = _Call(CompactionQueue.blocking_readers)
    mark_cleaned = _Call(CompactionQueue.mark_cleaned)
    find_potential_compactions = _Call(CompactionQueue.find_potential_compactions)
    too_many_failed_compactions = _Call(CompactionQueue.too_many_failed_compactions)
    record_compaction_not_initiated = _Call(CompactionQueue.record_compaction_not_initiated)
    purge_compaction_history = _Call(CompactionQueue.purge_compaction_history)
    unfinished_publications = _Call(CompactionQueue.unfinished_publications)

    register_reader = _Call(ReaderRegistry.register_reader)
    heartbeat_readers = _Call(ReaderRegistry.heartbeat_readers)
    unregister_readers = _Call(ReaderRegistry.unregister_readers)
    unregister_reader = _Call(ReaderRegistry.unregister_reader)
    active_readers = _Call(ReaderRegistry.active_readers)

    notifications = _Call(NotificationLog.notifications)
    current_notification_event_id = _Call(NotificationLog.current_notification_event_id)
    recorded_lengths = _Call(NotificationLog.recorded_lengths)
    repl_write_id_txns = _Call(NotificationLog.repl_write_id_txns)
    repl_follower_progress = _Call(NotificationLog.repl_follower_progress)
    repl_followers = _Call(NotificationLog.repl_followers)
    repl_drop_follower = _Call(NotificationLog.repl_drop_follower)

    repl_state = _Call(ReplicaState.repl_state)
    repl_states = _Call(ReplicaState.repl_states)
    repl_file_state = _Call(ReplicaState.repl_file_state)
    repl_target_txns = _Call(ReplicaState.repl_target_txns)

    # --- above the backend calls ----------------------------------------------------------------------------------

    def execute(self, sql: str) -> list[tuple[Any, ...]] | None:
        """Run one statement of the Hive DDL subset; SHOW/DESCRIBE return rows, others None."""
        return run(self, sql)

    def table(self, table_name: str) -> TableHandle:
        """The table's handle: its definition and this metastore."""
        definition = self.backend.table(table_name)
        return self.table_class(**definition.field_values(), metastore=self)

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
    ) -> TableHandle:
        """Create the table (see ``Catalog.create_table``) once the warehouse's storage answers."""
        check_location(self.warehouse)
        self.backend.create_table(
            db,
            name,
            columns,
            partition_keys=partition_keys,
            bucket_columns=bucket_columns,
            num_buckets=num_buckets,
            properties=properties,
            if_not_exists=if_not_exists,
        )
        return self.table(f"{db}.{name}")

    def compact(
        self,
        table_name: str,
        partition: str | Mapping[str, Any] | None = None,
        kind: str = "major",
        *,
        wait: bool = False,
        initiator_id: str | None = None,
    ) -> int:
        """Queue a ``major``/``minor`` compaction of a table or (required for partitioned tables) one partition,
        given as ``"k=v/k2=v2"`` or ``{"k": v}``; returns the request id (an initiated or working request for
        the same target is returned instead of a second one). ``wait``: return once it is done (see
        :meth:`wait_for_compaction`)."""
        compaction_id = self.backend.compact(table_name, partition, kind, initiator_id=initiator_id)
        if wait:
            self.wait_for_compaction(compaction_id)
        return compaction_id

    def wait_for_compaction(self, compaction_id: int, timeout: float | None = None) -> models.CompactionInfo:
        """Poll until request ``compaction_id`` is no longer initiated or working (compactor workers do the
        work: ``acidstream.catalog.Metastore`` runs it in this process instead); raises
        :class:`LockTimeoutException` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.05
        while True:
            info = self.get_compaction(compaction_id)
            if info.state not in ("initiated", "working"):
                return info
            if deadline is not None and time.monotonic() >= deadline:
                raise LockTimeoutException(
                    f"compaction {compaction_id} still {info.state} after {timeout:g}s"
                )
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def drop_table(self, table_name: str, if_exists: bool = False) -> list[str]:
        """Drop the table and delete its files (as Hive does for managed tables)."""
        dropped = self.backend.drop_table(table_name, if_exists)
        delete_locations(dropped)
        return dropped

    def drop_database(self, name: str, cascade: bool = False, if_exists: bool = False) -> list[str]:
        """Drop a database; with ``cascade`` its tables and their files too."""
        dropped = self.backend.drop_database(name, cascade, if_exists)
        delete_locations(dropped)
        return dropped

    def repl_apply(
        self,
        policy: str,
        source: str,
        event_id: int,
        event_time: int,
        ops: Sequence[ReplOp],
        *,
        bootstrap: bool = False,
    ) -> list[str]:
        """On a replica: apply one source event (see ``ReplicaState.repl_apply``), then delete the files of
        the tables it dropped."""
        dropped = self.backend.repl_apply(policy, source, event_id, event_time, ops, bootstrap=bootstrap)
        delete_locations(dropped)
        return dropped
