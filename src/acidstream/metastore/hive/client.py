"""``HiveMetastoreClient``: acidstream's :class:`~acidstream.txn.manager.TxnManager` over a Hive Metastore.

Each call is the thrift call Hive's own clients make for it, in their order (``HiveStreamingConnection``,
``TransactionBatch``, ``DbTxnManager``): ``open_txns`` then ``allocate_table_write_ids`` then ``lock`` for a
batch; ``add_dynamic_partitions`` and ``add_write_notification_log`` before ``commit_txn``; ``abort_txn`` per
txn; ``get_open_txns`` and ``get_valid_write_ids`` for a snapshot. So streaming and mutation transactions run
unchanged against a Hive 4 metastore, and Hive's readers, compactor and replication see them as Hive's own.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from hive_metastore import ttypes

from acidstream.acid.partitions import make_part_name, parse_part_name
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import (
    AlreadyExistsException,
    InvalidObjectException,
    LockTimeoutException,
    MetaException,
    MetastoreUnavailable,
    NoSuchTxnException,
    TransactionError,
    TxnAbortedException,
)
from acidstream.metastore.catalog import split_name
from acidstream.metastore.hive.snapshots import read_txn_list_string, valid_txn_list, valid_write_id_list
from acidstream.metastore.hive.tables import file_uri, table_from_thrift
from acidstream.metastore.hive.transport import ThriftConnection
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import (
    HeartbeatTxnRangeResponse,
    LockComponent,
    LockLevel,
    LockResponse,
    LockState,
    LockType,
    OperationType,
    Partition,
    Table,
    TableWrite,
    TxnState,
    WrittenFile,
)

_LOCK_TYPES = {
    LockType.SHARED_READ: ttypes.LockType.SHARED_READ,
    LockType.SHARED_WRITE: ttypes.LockType.SHARED_WRITE,
    LockType.EXCLUSIVE: ttypes.LockType.EXCLUSIVE,
}
_LOCK_LEVELS = {
    LockLevel.DB: ttypes.LockLevel.DB,
    LockLevel.TABLE: ttypes.LockLevel.TABLE,
    LockLevel.PARTITION: ttypes.LockLevel.PARTITION,
}
_OPERATIONS = {
    OperationType.SELECT: ttypes.DataOperationType.SELECT,
    OperationType.INSERT: ttypes.DataOperationType.INSERT,
    OperationType.UPDATE: ttypes.DataOperationType.UPDATE,
    OperationType.DELETE: ttypes.DataOperationType.DELETE,
}
_LOCK_STATES = {
    ttypes.LockState.ACQUIRED: LockState.ACQUIRED,
    ttypes.LockState.WAITING: LockState.WAITING,
    ttypes.LockState.NOT_ACQUIRED: LockState.NOT_ACQUIRED,
    ttypes.LockState.ABORT: LockState.ABORT,
}
#: What ``HiveMetaStoreClient`` declares (its ``VERSION``): without it the metastore refuses to describe an
#: insert-only table at all, and we would not name the table as not full-ACID.
_CAPABILITIES = ttypes.ClientCapabilities(values=[ttypes.ClientCapability.INSERT_ONLY_TABLES])
_TIME_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "": 1.0}
#: Hive's default ``metastore.txn.timeout``.
DEFAULT_TXN_TIMEOUT = 300.0


class HiveMetastoreClient:
    """Transactions, write ids, locks, heartbeats and snapshots on a Hive Metastore (``thrift://host:port``).

    Thread-safe: calls are serialised on one connection, so a heartbeat thread may share the client.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        socket_timeout: float = 600.0,
        txn_timeout: float | None = None,
        lock_wait_timeout: float = 10.0,
    ) -> None:
        self.connection = ThriftConnection(
            url, connect_timeout=connect_timeout, socket_timeout=socket_timeout
        )
        self.lock_wait_timeout = lock_wait_timeout
        self._txn_timeout = txn_timeout
        self._tables: dict[int, set[str]] = {}  # txn id → tables it has write ids on (for commit key/value)
        self._guard = threading.Lock()

    @property
    def url(self) -> str:
        return self.connection.url

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> HiveMetastoreClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, name: str, *args: Any, idempotent: bool = True) -> Any:
        return self.connection.call(name, lambda c: getattr(c, name)(*args), idempotent=idempotent)

    @property
    def txn_timeout(self) -> float:
        """Seconds a txn lives without a heartbeat: the metastore's ``metastore.txn.timeout`` unless given."""
        if self._txn_timeout is None:
            text = self._call("get_config_value", "metastore.txn.timeout", f"{DEFAULT_TXN_TIMEOUT:g}s")
            self._txn_timeout = _seconds(text)
        return self._txn_timeout

    # --- tables --------------------------------------------------------------------------------------------

    def get_table(self, table_name: str) -> Table:
        """The table's definition; :class:`InvalidObjectException` naming it unless it is full-ACID ORC."""
        db, name = split_name(table_name)
        request = ttypes.GetTableRequest(dbName=db, tblName=name, capabilities=_CAPABILITIES)
        result = self._call("get_table_req", request)
        return table_from_thrift(result.table)

    def table(self, table_name: str) -> Table:
        """:meth:`get_table` under the name a streaming connection asks a metastore for its table by."""
        return self.get_table(table_name)

    def add_partition(
        self, table_name: str, values: Sequence[str | None], *, if_not_exists: bool = True
    ) -> Partition:
        """Create a partition (``append_partition``, with the table's location scheme); an existing one is
        returned when ``if_not_exists``, as Hive's streaming client swallows ``AlreadyExistsException``."""
        db, name = split_name(table_name)
        vals = ["" if v is None else v for v in values]
        try:
            part = self._call("append_partition", db, name, vals, idempotent=False)
        except AlreadyExistsException:
            if not if_not_exists:
                raise
            part = self._call("get_partition", db, name, vals)
        keys = [k.name for k in self.get_table(table_name).partition_keys]
        return Partition(
            f"{db}.{name}", tuple(part.values), make_part_name(keys, part.values), file_uri(part.sd.location)
        )

    # --- transactions --------------------------------------------------------------------------------------

    def open_txns(
        self, n: int = 1, *, user: str | None = None, host: str | None = None, agent_info: str | None = None
    ) -> list[int]:
        default_user, default_host = client_identity()
        request = ttypes.OpenTxnRequest(
            num_txns=n, user=user or default_user or "", hostname=host or default_host, agentInfo=agent_info
        )
        return list(self._call("open_txns", request, idempotent=False).txn_ids)

    def allocate_table_write_ids(self, txn_ids: Sequence[int], table_name: str) -> list[tuple[int, int]]:
        db, name = split_name(table_name)
        request = ttypes.AllocateTableWriteIdsRequest(dbName=db, tableName=name, txnIds=list(txn_ids))
        answer = self._call("allocate_table_write_ids", request, idempotent=False)
        pairs = {t.txnId: t.writeId for t in answer.txnToWriteIds}
        with self._guard:
            for txn in txn_ids:
                self._tables.setdefault(txn, set()).add(f"{db}.{name}")
        return [(t, pairs[t]) for t in txn_ids]

    def open_txns_with_write_ids(
        self,
        n: int,
        table_name: str,
        *,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> list[tuple[int, int]]:
        """``open_txns`` then ``allocate_table_write_ids``; the txns are aborted if the second fails."""
        txns = self.open_txns(n, user=user, host=host, agent_info=agent_info)
        try:
            return self.allocate_table_write_ids(txns, table_name)
        except BaseException:
            with contextlib.suppress(Exception):  # the allocation's failure is what the caller needs to see
                self.abort_txns(txns)
            raise

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
        """A streaming batch's open as ``HiveStreamingConnection`` does it: ``open_txns``,
        ``allocate_table_write_ids``, then a no-wait ``lock`` for the first txn."""
        pairs = self.open_txns_with_write_ids(n, table_name, user=user, host=host, agent_info=agent_info)
        try:
            response = self.lock(
                components, txn_id=pairs[0][0], agent_info=agent_info, user=user, host=host, wait=False
            )
        except BaseException:
            with contextlib.suppress(Exception):
                self.abort_txns([t for t, _ in pairs])
            raise
        return pairs, response

    def commit_txn(
        self,
        txn_id: int,
        *,
        key: str | None = None,
        value: str | None = None,
        writes: Sequence[TableWrite] = (),
    ) -> None:
        """Register the writes (``add_dynamic_partitions``, ``add_write_notification_log`` per partition with
        files), then ``commit_txn``. A commit whose answer was lost is settled by asking the txn's state:
        committed is success, aborted raises :class:`TransactionError`."""
        for write in writes:
            self._register(txn_id, write)
        request = ttypes.CommitTxnRequest(
            txnid=txn_id,
            keyValue=self._key_value(txn_id, key, value, writes),
            # acidstream's updates and deletes take SHARED_WRITE locks, not Hive 4's EXCL_WRITE: the metastore
            # must then check write conflicts at commit, as for Hive with hive.txn.xlock.write=false
            exclWriteEnabled=False,
        )
        try:
            self._call("commit_txn", request, idempotent=False)
        except MetastoreUnavailable:
            state = self.get_txn_state(txn_id)  # reconnects; raises MetastoreUnavailable if it cannot
            if state is TxnState.COMMITTED:
                pass
            elif state is TxnState.OPEN:  # the request never arrived
                self._call("commit_txn", request, idempotent=False)
            else:
                raise TransactionError(
                    f"the answer to committing txnid:{txn_id} was lost and the Hive Metastore at {self.url} "
                    f"says it is {state.name.lower()}"
                ) from None
        with self._guard:
            self._tables.pop(txn_id, None)

    def _register(self, txn_id: int, write: TableWrite) -> None:
        db, name = split_name(write.table)
        by_operation: dict[OperationType, list[str]] = {}
        for partition, operation in write.components.items():
            if partition is not None:  # an unpartitioned table's component came with its lock
                by_operation.setdefault(operation, []).append(partition)
        for operation, names in by_operation.items():
            request = ttypes.AddDynamicPartitions(
                txnid=txn_id,
                writeid=write.write_id,
                dbname=db,
                tablename=name,
                partitionnames=sorted(names),
                operationType=_OPERATIONS[operation],
            )
            self._call("add_dynamic_partitions", request, idempotent=False)
        for partition, files in write.files.items():
            if not files:
                continue
            paths = [f.path if isinstance(f, WrittenFile) else f for f in files]
            request = ttypes.WriteNotificationLogRequest(
                txnId=txn_id,
                writeId=write.write_id,
                db=db,
                table=name,
                fileInfo=ttypes.InsertEventRequestData(replace=False, filesAdded=paths),
                partitionVals=list(parse_part_name(partition).values()) if partition else None,
            )
            self._call("add_write_notification_log", request, idempotent=False)

    def _key_value(
        self, txn_id: int, key: str | None, value: str | None, writes: Sequence[TableWrite]
    ) -> ttypes.CommitTxnKeyValue | None:
        """Hive stores a commit's key/value as a parameter of one table (by id), the one the txn wrote, and
        only updates it (``CommitTxnFunction.updateKeyValueAssociatedWithTxn``): the table must have it."""
        if key is None and value is None:
            return None
        if key is None or value is None:
            raise InvalidObjectException("commit key and value must be given together")
        with self._guard:
            tables = set(self._tables.get(txn_id, ())) | {w.table.lower() for w in writes}
        if len(tables) != 1:
            raise InvalidObjectException(
                f"Hive stores a commit's key {key!r} with the one table txnid:{txn_id} wrote; it wrote "
                f"{sorted(tables) or 'none'}"
            )
        table = self.get_table(tables.pop())
        if key not in table.properties:  # Hive updates the parameter, and fails the commit if it is missing
            raise InvalidObjectException(
                f"Hive stores a commit's key as an existing parameter of the table: {table.full_name} has no "
                f"{key!r} (set it first: ALTER TABLE {table.full_name} SET TBLPROPERTIES ('{key}'='...'))"
            )
        return ttypes.CommitTxnKeyValue(tableId=table.table_id, key=key, value=value)

    def abort_txns(self, txn_ids: Sequence[int]) -> None:
        """``abort_txn`` for each, in order, as Hive's streaming client does (aborting an aborted txn is
        fine; a committed or unknown one raises :class:`NoSuchTxnException`)."""
        for txn in txn_ids:
            self._call("abort_txn", ttypes.AbortTxnRequest(txnid=txn))
            with self._guard:
                self._tables.pop(txn, None)

    def heartbeat_txn_range(self, lo: int, hi: int) -> HeartbeatTxnRangeResponse:
        answer = self._call("heartbeat_txn_range", ttypes.HeartbeatTxnRangeRequest(min=lo, max=hi))
        return HeartbeatTxnRangeResponse(sorted(answer.aborted or ()), sorted(answer.nosuch or ()))

    def get_txn_state(self, txn_id: int) -> TxnState:
        """From ``get_open_txns_info``: listed → open or aborted; at or below the high-water mark and not
        listed → committed (Hive keeps aborted txns listed until their writes are cleaned); above → unknown."""
        answer = self._call("get_open_txns_info")
        for info in answer.open_txns or ():
            if info.id == txn_id:
                return TxnState.OPEN if info.state == ttypes.TxnState.OPEN else TxnState.ABORTED
        return TxnState.COMMITTED if 0 < txn_id <= answer.txn_high_water_mark else TxnState.UNKNOWN

    # --- snapshots -----------------------------------------------------------------------------------------

    def snapshot(self) -> ValidTxnList:
        """Now, as Hive's readers take it: ``get_open_txns`` made into a ``ValidReadTxnList``."""
        return valid_txn_list(self._call("get_open_txns"))

    def get_valid_write_ids(
        self, table_name: str, txn_id: int | None = None, *, snapshot: ValidTxnList | None = None
    ) -> ValidWriteIdList:
        """The table's valid write ids now, or at ``snapshot``; with ``txn_id`` (which must be open) its own
        write id is an open exception."""
        db, name = split_name(table_name)
        if txn_id is not None:
            state = self.get_txn_state(txn_id)
            if state is TxnState.ABORTED:
                raise TxnAbortedException(f"Transaction txnid:{txn_id} already aborted")
            if state is not TxnState.OPEN:
                raise NoSuchTxnException(f"Transaction txnid:{txn_id} is not open ({state.name.lower()})")
        txns = str(snapshot) if snapshot is not None else read_txn_list_string(self._call("get_open_txns"))
        request = ttypes.GetValidWriteIdsRequest(fullTableNames=[f"{db}.{name}"], validTxnList=txns)
        answer = self._call("get_valid_write_ids", request)
        return valid_write_id_list(answer.tblValidWriteIds[0])

    # --- locks ---------------------------------------------------------------------------------------------

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
        """Request all components at once; with ``wait``, poll ``check_lock`` with backoff while WAITING, and
        after ``timeout`` remove the waiting lock and raise :class:`LockTimeoutException` (``DbLockManager``)."""
        default_user, default_host = client_identity()
        request = ttypes.LockRequest(
            component=[_lock_component(c) for c in components],
            txnid=txn_id,
            user=user or default_user or "",
            hostname=host or default_host,
            agentInfo=agent_info,
        )
        answer = self._call("lock", request, idempotent=False)
        state = _LOCK_STATES[answer.state]
        if state is not LockState.WAITING or not wait:
            return LockResponse(answer.lockid, state)
        limit = self.lock_wait_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        pause = 0.05
        while time.monotonic() < deadline:
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 1.0)
            check = ttypes.CheckLockRequest(lockid=answer.lockid, txnid=txn_id)
            state = _LOCK_STATES[self._call("check_lock", check).state]
            if state is not LockState.WAITING:
                return LockResponse(answer.lockid, state)
        with contextlib.suppress(MetaException):  # gone already: its txn ended
            self._call("unlock", ttypes.UnlockRequest(lockid=answer.lockid))
        raise LockTimeoutException(f"lock {answer.lockid} not acquired within {limit:g}s at {self.url}")


def _lock_component(component: LockComponent) -> ttypes.LockComponent:
    """Hive's component; a table's is transactional (acidstream's tables all are), so the metastore records
    what the txn writes, for write conflicts and the compactor, as ``DbTxnManager`` marks it."""
    return ttypes.LockComponent(
        type=_LOCK_TYPES[component.type],
        level=_LOCK_LEVELS[component.level],
        dbname=component.db,
        tablename=component.table,
        partitionname=component.partition,
        operationType=_OPERATIONS.get(component.operation, ttypes.DataOperationType.UNSET),
        isTransactional=component.table is not None,
        isDynamicPartitionWrite=component.is_dynamic_partition_write,
    )


def _seconds(text: str) -> float:
    """A Hadoop time value (``300s``, ``5m``, ``300``) in seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if match is None or match[2] not in _TIME_UNITS:
        raise MetaException(f"metastore.txn.timeout is not a time: {text!r}")
    return float(match[1]) * _TIME_UNITS[match[2]]
