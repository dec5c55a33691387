"""``MutatorClient`` and its ``Transaction``: the driver side of Hive's Streaming Mutation API
(``org.apache.hive.hcatalog.streaming.mutate.client``).

The client checks its tables, opens one long transaction with a write id per sink table, locks every table
(shared-write for sinks, shared-read for sources) and heartbeats it until it commits or aborts. Coordinators —
here or on workers, each with its own statement id — write the mutations; the commit then records what each
of them wrote (partitions and their operation, files), creates partitions they wrote but did not create, and
commits every table at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from acidstream.acid.writeids import ValidTxnList
from acidstream.errors import (
    AcidStreamError,
    ConnectionException,
    LockException,
    MetaException,
    NoSuchObjectException,
    TransactionError,
    TransactionException,
)
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import LockComponent, LockLevel, LockType, OperationType, TableWrite
from acidstream.mutate.ordering import PartitionValues
from acidstream.mutate.table import AcidTable, MutationSummary, TableType
from acidstream.txn import FailureListener, MetastoreTxn, TxnHeartbeat, TxnState
from acidstream.txn.written import describe_partitions

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade


class MutatorClient:
    """Manages mutation transactions over a set of tables; build it with :meth:`builder`."""

    def __init__(
        self,
        metastore: MetastoreFacade,
        tables: Sequence[AcidTable],
        *,
        owns_metastore: bool,
        lock_failure_listener: FailureListener | None,
        agent_info: str,
        lock_wait: float | None,
        heartbeat_interval: float | None,
        partition_conflicts: bool,
    ) -> None:
        self.metastore = metastore
        self._tables = list(tables)
        self._owns_metastore = owns_metastore
        self._listener = lock_failure_listener
        self.agent_info = agent_info
        self._lock_wait = lock_wait
        self._heartbeat_interval = heartbeat_interval
        self._partition_conflicts = partition_conflicts
        self._connected = False
        self._transaction: Transaction | None = None

    @staticmethod
    def builder() -> MutatorClientBuilder:
        return MutatorClientBuilder()

    def __enter__(self) -> MutatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        """Check every table (a sink must be a transactional, bucketed ACID table) and load its definition."""
        if self._connected:
            raise ConnectionException("Already connected.")
        for table in self._tables:
            try:
                definition = self.metastore.table(table.qualified_name)
            except NoSuchObjectException as exc:
                raise ConnectionException(f"Invalid table '{table.qualified_name}'") from exc
            except MetaException as exc:
                raise ConnectionException(f"Error communicating with the metastore: {exc}") from exc
            if table.table_type is TableType.SINK:
                if not definition.is_transactional:
                    raise ConnectionException(
                        f"Cannot stream to table that is not transactional: '{table.qualified_name}'."
                    )
                if definition.num_buckets <= 0:
                    raise ConnectionException(
                        f"Cannot stream to table that has not been bucketed: '{table.qualified_name}'."
                    )
            table.definition = definition.definition()
        self._connected = True

    def get_tables(self) -> list[AcidTable]:
        """The client's tables, in the order they were added (sinks carry the open txn's write id)."""
        if not self._connected:
            raise ConnectionException("Not connected - cannot interrogate tables.")
        return list(self._tables)

    def new_transaction(self) -> Transaction:
        """Open a txn and allocate a write id on every sink table (nothing stays open if that fails)."""
        if not self._connected:
            raise TransactionException("Not connected - cannot create transaction.")
        current = self._transaction
        if current is not None and current.state in (TxnState.INACTIVE, TxnState.OPEN):
            raise TransactionException(
                f"txnid:{current.transaction_id} is still {current.state.name}: commit or abort it first"
            )
        sinks = [t for t in self._tables if t.table_type is TableType.SINK]
        try:
            txn = MetastoreTxn.open(
                self.metastore, [t.qualified_name for t in sinks], agent_info=self.agent_info
            )
        except AcidStreamError as exc:
            raise TransactionException(f"Unable to open a transaction: {exc}") from exc
        for table in sinks:
            table.txn_id, table.write_id = txn.txn_id, txn.write_id(table.qualified_name)
            table.take_summaries()
        self._transaction = Transaction(self, txn)
        return self._transaction

    def close(self) -> None:
        """Stop heartbeats and release the metastore; an unfinished txn is aborted (idempotent)."""
        txn = self._transaction
        if txn is not None and txn.state in (TxnState.INACTIVE, TxnState.OPEN):
            with contextlib.suppress(AcidStreamError):
                txn.abort()
        if self._owns_metastore:
            self.metastore.close()
        self._connected = False

    # --- what a Transaction needs -----------------------------------------------------------------------

    def _lock_components(self) -> list[LockComponent]:
        """Hive's mutation lock: shared-write on each sink (operation UPDATE), shared-read on each source.

        With table-level conflicts (Hive's behaviour) a sink's UPDATE component is recorded now, so a txn
        conflicts with any other update of the table; with partition-level conflicts the components come
        from the coordinators' summaries at commit instead (a dynamic-partition write).
        """
        components = []
        for table in self._tables:
            sink = table.table_type is TableType.SINK
            components.append(
                LockComponent(
                    LockType.SHARED_WRITE if sink else LockType.SHARED_READ,
                    LockLevel.TABLE,
                    table.db,
                    table.name,
                    operation=OperationType.UPDATE if sink else OperationType.SELECT,
                    is_dynamic_partition_write=sink and self._partition_conflicts,
                )
            )
        return components


class Transaction:
    """A mutation txn over the client's tables: ``begin`` locks them, ``commit``/``abort`` end it (both tables
    or neither). Heartbeats run from ``begin`` until the end; a txn aborted under them (e.g. by a timeout)
    calls the client's lock failure listener and can then only be aborted."""

    def __init__(self, client: MutatorClient, txn: MetastoreTxn) -> None:
        self._client = client
        self._txn = txn
        self._heartbeat: TxnHeartbeat | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Transaction(txnid:{self.transaction_id}, {self.state.name})"

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """Commit on success (begun if needed), abort on an exception."""
        if exc_type is not None:
            with contextlib.suppress(AcidStreamError):
                self.abort()
            return
        if self.state is TxnState.INACTIVE:
            self.begin()
        self.commit()

    @property
    def transaction_id(self) -> int:
        return self._txn.txn_id

    @property
    def state(self) -> TxnState:
        return self._txn.state

    def snapshot(self) -> ValidTxnList:
        """The point in time the txn reads at (its ValidTxnList): read ROW__IDs with it."""
        return self._txn.snapshot()

    def begin(self) -> None:
        """Lock every table (waiting up to the lock timeout) and start heartbeats."""
        client = self._client
        if self._txn.state is not TxnState.INACTIVE:
            raise TransactionException(f"txnid:{self.transaction_id} cannot begin: it is {self.state.name}")
        try:
            self._txn.lock(client._lock_components(), wait=True, timeout=client._lock_wait)
        except TransactionError as exc:
            raise LockException(f"Could not acquire lock on tables: {exc}") from exc
        self._txn.begin()
        self._heartbeat = TxnHeartbeat(
            client.metastore,
            lambda: [self._txn],
            interval=client._heartbeat_interval,
            on_failure=client._listener,
            name=f"acidstream-mutation-heartbeat-{self.transaction_id}",
        )
        self._heartbeat.start()

    def commit(self, summaries: Sequence[MutationSummary] = ()) -> None:
        """Commit what every coordinator wrote: those of this process (closed on the client's AcidTables)
        plus ``summaries`` returned by coordinators elsewhere. Partitions they wrote but did not create are
        created first, so a reader never sees the commit without its partitions."""
        if self._txn.state is not TxnState.OPEN:
            raise TransactionException(f"txnid:{self.transaction_id} cannot commit: it is {self.state.name}")
        try:
            writes = self._writes(summaries)
            self._txn.commit(writes=writes)
        except TransactionError as exc:
            raise TransactionException(str(exc)) from exc
        finally:
            self._stop_heartbeat()

    def abort(self) -> None:
        """Abort: nothing any coordinator wrote becomes visible."""
        self._stop_heartbeat()
        self._txn.abort()

    def _writes(self, extra: Sequence[MutationSummary]) -> list[TableWrite]:
        writes = []
        for table in self._client._tables:
            if table.table_type is TableType.SINK:
                summaries = table.take_summaries() + [s for s in extra if s.table == table.qualified_name]
                write = table_write(self._client.metastore, table, summaries)
                if write is not None:
                    writes.append(write)
        return writes

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None


def table_write(
    metastore: MetastoreFacade,
    table: AcidTable,
    summaries: Sequence[MutationSummary],
    *,
    existing: Collection[PartitionValues] = (),
) -> TableWrite | None:
    """What a commit records for ``table`` from its coordinators' summaries (None if they wrote nothing):
    each partition with its strongest operation, and the files. Partitions they wrote, unless ``existing``
    (known to be in the metastore), are created here if missing, before the commit, so no reader sees the
    commit without them."""
    components: dict[str | None, OperationType] = {}
    files: dict[str | None, list[str]] = {}
    checksums: dict[str, tuple[int, int]] = {}
    for summary in summaries:
        if summary.write_id != table.write_id:
            raise TransactionException(
                f"a summary of {summary.table} has write id {summary.write_id}, this txn {table.write_id}: "
                "it belongs to another transaction"
            )
        for name, part in summary.partitions.items():
            key = name or None
            if key is not None and key not in components and part.values not in existing:
                metastore.add_partition(table.qualified_name, list(part.values))
            components[key] = _stronger(components.get(key), part.operation)
            files.setdefault(key, []).extend(part.files)
            checksums.update(part.checksums)
    if not components or table.write_id is None:
        return None
    described = describe_partitions(table.table.location, files, fsync=table.table.fsync, checksums=checksums)
    return TableWrite(table.qualified_name, table.write_id, components, described)


def _stronger(a: OperationType | None, b: OperationType) -> OperationType:
    """UPDATE over DELETE over INSERT: the component records the strongest operation of the partition."""
    order = [OperationType.INSERT, OperationType.DELETE, OperationType.UPDATE]
    return b if a is None or order.index(b) > order.index(a) else a


class MutatorClientBuilder:
    """Hive's ``MutatorClientBuilder`` with snake_case names."""

    def __init__(self) -> None:
        self._metastore: MetastoreFacade | str | None = None
        self._warehouse: str | None = None
        self._tables: dict[str, AcidTable] = {}
        self._listener: FailureListener | None = None
        self._agent_info: str | None = None
        self._lock_wait: float | None = None
        self._heartbeat_interval: float | None = None
        self._partition_conflicts = False

    def with_metastore(
        self, metastore: MetastoreFacade | str, warehouse: str | None = None
    ) -> MutatorClientBuilder:
        """A :class:`Metastore` or its URL (then ``warehouse`` says where table files live)."""
        self._metastore, self._warehouse = metastore, warehouse
        return self

    def add_sink_table(self, db: str, table: str, create_partitions: bool = False) -> MutatorClientBuilder:
        """A table receiving mutations; ``create_partitions`` lets coordinators create partitions they insert
        into (they then talk to the metastore), otherwise the commit creates them."""
        return self._add(AcidTable(db.lower(), table.lower(), TableType.SINK, create_partitions))

    def add_source_table(self, db: str, table: str) -> MutatorClientBuilder:
        """A table the job reads (shared-read lock for the txn's duration)."""
        return self._add(AcidTable(db.lower(), table.lower(), TableType.SOURCE))

    def _add(self, table: AcidTable) -> MutatorClientBuilder:
        if table.qualified_name in self._tables:
            raise ConnectionException(f"{table.qualified_name} was added twice")
        self._tables[table.qualified_name] = table
        return self

    def with_lock_failure_listener(self, listener: FailureListener) -> MutatorClientBuilder:
        """Called with (txn id, error) from the heartbeat thread when the txn is found aborted or gone."""
        self._listener = listener
        return self

    def with_agent_info(self, agent_info: str) -> MutatorClientBuilder:
        self._agent_info = agent_info
        return self

    def with_lock_wait(self, seconds: float) -> MutatorClientBuilder:
        """How long ``begin`` waits for the locks (default: the metastore's lock wait timeout)."""
        self._lock_wait = seconds
        return self

    def with_heartbeat_interval(self, seconds: float) -> MutatorClientBuilder:
        """Default: half the metastore's txn timeout."""
        self._heartbeat_interval = seconds
        return self

    def with_partition_level_conflicts(self, enabled: bool = True) -> MutatorClientBuilder:
        """Detect write conflicts per partition (from what coordinators wrote) instead of per table (Hive's
        lock component): concurrent mutations of different partitions then both commit."""
        self._partition_conflicts = enabled
        return self

    def build(self) -> MutatorClient:
        if self._metastore is None:
            raise ConnectionException("with_metastore(...) is required")
        if not self._tables:
            raise ConnectionException("add at least one table")
        metastore, owns = self._metastore, False
        if isinstance(metastore, str):
            if self._warehouse is None:
                raise ConnectionException(
                    "with_metastore(url) needs warehouse=... (where the table files live)"
                )
            from acidstream.metastore import MetastoreFacade

            metastore, owns = MetastoreFacade.connect(metastore, warehouse=self._warehouse), True
        user, host = client_identity()
        return MutatorClient(
            metastore,
            list(self._tables.values()),
            owns_metastore=owns,
            lock_failure_listener=self._listener,
            agent_info=self._agent_info or f"mutator:{user}@{host}",
            lock_wait=self._lock_wait,
            heartbeat_interval=self._heartbeat_interval,
            partition_conflicts=self._partition_conflicts,
        )
