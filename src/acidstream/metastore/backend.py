"""What a metastore backend provides, as small protocols, and what it may lack, as capabilities.

:class:`~acidstream.metastore.facade.MetastoreFacade` is the façade every layer holds; a backend implements these
protocols under it: acidstream's SQL metastore (SQLite, PostgreSQL) implements them all, a Hive Metastore
(thrift) implements what Hive's metastore offers and declares the rest missing (:class:`Capability`). A call a
backend lacks raises :class:`~acidstream.errors.UnsupportedCapability` naming the capability and its fallback,
and callers that have a fallback ask :meth:`Metastore.supports` first instead of catching it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from acidstream.acid.types import Column
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import UnsupportedCapability
from acidstream.metastore.models import (
    CompactionInfo,
    HeartbeatTxnRangeResponse,
    LockComponent,
    LockInfo,
    LockResponse,
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

if TYPE_CHECKING:
    from acidstream.metastore.replops import ReplOp, ReplState


class Capability(enum.Enum):
    """A part of the metastore API that not every backend has; the value says what callers do without it."""

    #: Taking over a waiting txn's locks in a new txn (``replace_txn``). Without it a mutation whose snapshot
    #: went stale while it waited aborts and retries in a new txn, queueing for its locks again.
    TXN_REPLACEMENT = "a mutation that finds a newer conflicting commit aborts and retries in a new txn"
    #: A notification log fed by every commit: what replication's dumps and syncs read from a source.
    NOTIFICATIONS = "replicate from a warehouse whose metastore is acidstream's (SQLite or PostgreSQL)"
    #: Replica-side state (applied events, mapped txns, copied files): what a replication target records.
    REPLICA_STATE = "replicate into a warehouse whose metastore is acidstream's (SQLite or PostgreSQL)"
    #: The initiator's and cleaner's queue calls. Without them the metastore's own initiator and cleaner run
    #: (Hive: ``hive.compactor.initiator.on``, ``hive.compactor.cleaner.on``); workers still claim requests.
    COMPACTION_SERVICES = "the metastore's own initiator and cleaner schedule and clean compactions"
    #: Compaction output written aside and renamed into place when its txn commits, with a publication record
    #: the backend's readers and cleaner know. Without it the output is written in place and known by its txn
    #: alone (Hive's readers and cleaner would not see a rename under way).
    COMPACTION_RENAMES = "a compaction writes its output in place, visible by its txn once that commits"
    #: Timing out silent txns from the client side. Without it the metastore server does it itself.
    HOUSEKEEPING = "the metastore server times out silent txns and locks itself"


def unsupported(capability: Capability, call: str, backend_name: str) -> UnsupportedCapability:
    """The error for ``call`` on a backend that lacks ``capability``: it names both and the fallback."""
    return UnsupportedCapability(call, capability.name, backend_name, capability.value)


class Catalog(Protocol):
    """Databases, tables and partitions."""

    def create_database(self, name: str, if_not_exists: bool = False, comment: str | None = None) -> None: ...

    def drop_database(self, name: str, cascade: bool = False, if_exists: bool = False) -> list[str]: ...

    def list_databases(self) -> list[str]: ...

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
    ) -> TableDefinition: ...

    def table(self, table_name: str) -> TableDefinition: ...

    def list_tables(self, db: str = "default") -> list[str]: ...

    def drop_table(self, table_name: str, if_exists: bool = False) -> list[str]: ...

    def alter_table_properties(self, table_name: str, properties: Mapping[str, str]) -> None: ...

    def alter_table_columns(
        self, table_name: str, columns: Sequence[Column], *, cascade: bool = False
    ) -> None:
        """Make ``columns`` the table's data columns, refused as Hive refuses an incompatible change; with
        ``cascade``, every partition's columns too where the metastore keeps them per partition (Hive's)."""
        ...

    def add_partition(
        self, table_name: str, values: Sequence[str | None], *, if_not_exists: bool = True
    ) -> Partition: ...

    def get_partition(self, table_name: str, values: Sequence[str | None]) -> Partition | None: ...

    def list_partitions(self, table_name: str) -> list[Partition]: ...

    def drop_partition(self, table_name: str, values: Sequence[str]) -> None: ...


class Transactions(Protocol):
    """Transactions, write ids, locks, heartbeats and snapshots (Hive's ``IMetaStoreClient`` txn calls)."""

    lock_wait_timeout: float

    @property
    def txn_timeout(self) -> float: ...

    def open_txns(
        self, n: int = 1, *, user: str | None = None, host: str | None = None, agent_info: str | None = None
    ) -> list[int]: ...

    def allocate_table_write_ids(self, txn_ids: Sequence[int], table_name: str) -> list[tuple[int, int]]: ...

    def open_txns_with_write_ids(
        self,
        n: int,
        table_name: str,
        *,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> list[tuple[int, int]]: ...

    def open_txns_with_write_ids_and_lock(
        self,
        n: int,
        table_name: str,
        components: Sequence[LockComponent],
        *,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> tuple[list[tuple[int, int]], LockResponse]: ...

    def commit_txn(
        self,
        txn_id: int,
        *,
        key: str | None = None,
        value: str | None = None,
        writes: Sequence[TableWrite] = (),
    ) -> None: ...

    def abort_txn(self, txn_id: int) -> None: ...

    def abort_txns(self, txn_ids: Sequence[int]) -> None: ...

    def heartbeat(self, txn_id: int) -> None: ...

    def heartbeat_txn_range(self, lo: int, hi: int) -> HeartbeatTxnRangeResponse: ...

    def get_latest_txnid_in_conflict(self, txn_id: int, table_name: str) -> int: ...

    def replace_txn(
        self, txn_id: int, table_name: str, *, agent_info: str | None = None
    ) -> tuple[int, int]: ...

    def get_open_txns(self) -> ValidTxnList: ...

    def get_valid_write_ids(
        self, table_name: str, txn_id: int | None = None, *, snapshot: ValidTxnList | None = None
    ) -> ValidWriteIdList: ...

    def snapshot(self) -> ValidTxnList: ...

    def get_txn_state(self, txn_id: int) -> TxnStatus: ...

    def show_txns(self) -> list[TxnInfo]: ...

    def add_dynamic_partitions(
        self,
        txn_id: int,
        write_id: int,
        table_name: str,
        partition_names: Sequence[str],
        operation: OperationType = OperationType.INSERT,
    ) -> None: ...

    def add_write_notification(
        self,
        txn_id: int,
        write_id: int,
        table_name: str,
        partition_name: str | None,
        files: Sequence[str | WrittenFile],
    ) -> None: ...

    def perform_timeouts(self) -> list[int]: ...

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
    ) -> LockResponse: ...

    def unlock(self, lock_id: int) -> None: ...

    def show_locks(self, table_name: str | None = None) -> list[LockInfo]: ...


class CompactionQueue(Protocol):
    """Compaction requests: queued by users and the initiator, claimed and published by workers, then cleaned."""

    def compact(
        self,
        table_name: str,
        partition: str | Mapping[str, Any] | None = None,
        kind: str = "major",
        *,
        initiator_id: str | None = None,
    ) -> int: ...

    def get_compaction(self, compaction_id: int) -> CompactionInfo: ...

    def show_compactions(self) -> list[CompactionInfo]: ...

    def find_next_compaction(
        self, worker_id: str, compaction_id: int | None = None
    ) -> CompactionInfo | None: ...

    def update_compaction(
        self, compaction_id: int, txn_id: int, *, highest_write_id: int, meta: Mapping[str, Any]
    ) -> None: ...

    def begin_publish(self, compaction_id: int, txn_id: int, meta: Mapping[str, Any]) -> int: ...

    def mark_compacted(self, compaction_id: int, txn_id: int | None = None) -> None: ...

    def mark_refused(self, compaction_id: int, message: str, txn_id: int | None = None) -> None: ...

    def mark_failed(self, compaction_id: int, message: str, txn_id: int | None = None) -> None: ...

    def revert_compaction(self, compaction_id: int, message: str, max_attempts: int) -> str: ...

    def find_abandoned_compactions(self) -> list[CompactionInfo]: ...

    def find_ready_to_clean(self, retention: float) -> list[CompactionInfo]: ...

    def claim_cleaning(self, compaction_id: int) -> bool: ...

    def blocking_readers(self, compaction_id: int) -> list[int]: ...

    def mark_cleaned(
        self, compaction_id: int, forget_write_ids: Sequence[int] = (), removed: Sequence[str] = ()
    ) -> None: ...

    def find_potential_compactions(self, aborted_threshold: int) -> list[PotentialCompaction]: ...

    def too_many_failed_compactions(
        self, table_name: str, partition: str | None, threshold: int, retry_after: float
    ) -> bool: ...

    def record_compaction_not_initiated(
        self, table_name: str, partition: str | None, message: str, *, initiator_id: str | None = None
    ) -> int: ...

    def purge_compaction_history(self) -> int: ...

    def unfinished_publications(self, table_name: str, baseline: int) -> list[Publication]: ...


class ReaderRegistry(Protocol):
    """Snapshot readers the cleaner waits for: registrations on acidstream's metastore, open read-only txns on
    a Hive Metastore (as Hive's own queries read)."""

    @property
    def reader_lease(self) -> float: ...

    def register_reader(
        self, table_name: str, agent_info: str | None = None, *, snapshot: ValidTxnList | None = None
    ) -> ReaderRegistration: ...

    def heartbeat_readers(self, reader_ids: Sequence[int], *, lease: float | None = None) -> list[int]: ...

    def unregister_readers(self, agent_info: str) -> int: ...

    def unregister_reader(self, reader_id: int) -> None: ...

    def active_readers(self, table_name: str | None = None) -> list[tuple[int, str, str]]: ...


class NotificationLog(Protocol):
    """Committed events, in order, for replication (see :attr:`Capability.NOTIFICATIONS`)."""

    def notifications(self, after_event_id: int = 0, limit: int = 1000) -> list[NotificationEvent]: ...

    def current_notification_event_id(self) -> int: ...

    def recorded_lengths(
        self, table_name: str, partition: str | None, low: int, high: int
    ) -> dict[str, int]: ...

    def repl_write_id_txns(self, table_name: str, write_ids: Sequence[int]) -> dict[int, int]: ...

    def repl_follower_progress(self, name: str, event_id: int, lease: float) -> None: ...

    def repl_followers(self) -> list[tuple[str, int, int, int]]: ...

    def repl_drop_follower(self, name: str) -> bool: ...


class ReplicaState(Protocol):
    """What a replication target records (see :attr:`Capability.REPLICA_STATE`)."""

    def repl_apply(
        self,
        policy: str,
        source: str,
        event_id: int,
        event_time: int,
        ops: Sequence[ReplOp],
        *,
        bootstrap: bool = False,
    ) -> list[str]: ...

    def repl_state(self, policy: str) -> ReplState | None: ...

    def repl_states(self) -> list[ReplState]: ...

    def repl_file_state(self, path: str) -> tuple[int, int] | None: ...

    def repl_target_txns(self, policy: str, src_txn_ids: Sequence[int]) -> dict[int, int]: ...


class Backend(
    Catalog, Transactions, CompactionQueue, ReaderRegistry, NotificationLog, ReplicaState, Protocol
):
    """Everything a :class:`~acidstream.metastore.facade.MetastoreFacade` gets from its backend."""

    @property
    def warehouse(self) -> str:
        """Where new databases' (and, on acidstream's metastore, new tables') files go."""
        ...

    #: What the backend lacks (see :class:`Capability`).
    missing: ClassVar[frozenset[Capability]]
    #: The backend, as messages name it.
    backend_name: ClassVar[str]

    @property
    def url(self) -> str: ...

    @property
    def db_wait_timeout(self) -> float:
        """The longest one call waits for the metastore (another process's lock, reconnecting) before it
        raises ``MetastoreUnavailable``."""
        ...

    def close(self) -> None: ...
