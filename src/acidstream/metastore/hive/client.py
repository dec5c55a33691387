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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

from hive_metastore import ttypes
from hive_metastore.ThriftHiveMetastore import Client

from acidstream.acid.partitions import parse_part_name
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import (
    CommitOutcomeUnknown,
    InvalidObjectException,
    MetaException,
    MetastoreUnavailable,
    MetastoreUrlError,
    NoSuchTxnException,
    TransactionError,
    TxnAbortedException,
)
from acidstream.metastore.backend import Capability, unsupported
from acidstream.metastore.hive.catalog import HiveCatalogCalls
from acidstream.metastore.hive.compactions import HiveCompactionQueue
from acidstream.metastore.hive.digest import DelegationToken
from acidstream.metastore.hive.readers import HiveReaderTxns
from acidstream.metastore.hive.sasl import KerberosSettings, PlainSettings
from acidstream.metastore.hive.snapshots import read_txn_list_string, valid_txn_list, valid_write_id_list
from acidstream.metastore.hive.tables import CLIENT_CAPABILITIES, file_uri, table_from_thrift
from acidstream.metastore.hive.tokens import HiveDelegationTokens
from acidstream.metastore.hive.transport import MetastoreUnreachable, ThriftConnection
from acidstream.metastore.identity import client_identity
from acidstream.metastore.lockwait import wait_for_lock
from acidstream.metastore.models import (
    HeartbeatTxnRangeResponse,
    LockComponent,
    LockInfo,
    LockLevel,
    LockResponse,
    LockState,
    LockType,
    NotificationEvent,
    OperationType,
    Publication,
    TableDefinition,
    TableWrite,
    TxnInfo,
    TxnStatus,
    WrittenFile,
)
from acidstream.metastore.names import split_name

if TYPE_CHECKING:
    from acidstream.metastore.replops import ReplOp, ReplState

_LOCK_TYPES = {
    LockType.SHARED_READ: ttypes.LockType.SHARED_READ,
    LockType.SHARED_WRITE: ttypes.LockType.SHARED_WRITE,
    LockType.EXCLUSIVE: ttypes.LockType.EXCLUSIVE,
}
#: Hive 4's lock types as ours (its ``EXCL_WRITE``/``EXCL_DROP`` are exclusive for whoever waits on them).
_SHOWN_LOCK_TYPES = {
    ttypes.LockType.SHARED_READ: LockType.SHARED_READ,
    ttypes.LockType.SHARED_WRITE: LockType.SHARED_WRITE,
    ttypes.LockType.EXCLUSIVE: LockType.EXCLUSIVE,
    **{
        getattr(ttypes.LockType, n): LockType.EXCLUSIVE
        for n in ("EXCL_WRITE", "EXCL_DROP")
        if hasattr(ttypes.LockType, n)
    },
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
_TIME_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "": 1.0}
#: The oldest Hive Metastore acidstream runs on: Hive 4's txn calls (``get_latest_txnid_in_conflict``, the
#: remote worker's ``find_next_compact2``) and its ``ShowCompactRequest`` are what the backend calls.
MIN_HIVE_VERSION = (4, 0)
#: Hive's default ``metastore.txn.timeout``.
DEFAULT_TXN_TIMEOUT = 300.0
#: Hive's default ``metastore.txn.max.open.batch``.
DEFAULT_MAX_OPEN_BATCH = 1000
#: Seconds a commit whose answer was lost is asked again, while the metastore does not answer (it restarts).
DEFAULT_SETTLE_TIMEOUT = 60.0


class HiveMetastoreClient(HiveCatalogCalls, HiveReaderTxns, HiveCompactionQueue, HiveDelegationTokens):
    """Catalog, transactions, write ids, locks, heartbeats, snapshots, readers and the compaction queue on a
    Hive Metastore (``thrift://host:port``); what Hive's metastore has no calls for is in :attr:`missing`.

    Thread-safe: calls from several threads (a writer's, its heartbeats, a lock requested ahead) each run on a
    socket of their own (see :class:`~acidstream.metastore.hive.transport.ThriftConnection`).
    """

    missing: ClassVar[frozenset[Capability]] = frozenset(
        {
            Capability.TXN_REPLACEMENT,
            Capability.NOTIFICATIONS,
            Capability.REPLICA_STATE,
            Capability.COMPACTION_SERVICES,
            Capability.COMPACTION_RENAMES,
            Capability.HOUSEKEEPING,
        }
    )
    backend_name: ClassVar[str] = "a Hive Metastore"

    def __init__(
        self,
        url: str,
        *,
        warehouse: str | None = None,
        connect_timeout: float = 10.0,
        socket_timeout: float = 600.0,
        txn_timeout: float | None = None,
        lock_wait_timeout: float = 10.0,
        settle_timeout: float = DEFAULT_SETTLE_TIMEOUT,
        kerberos: KerberosSettings | None = None,
        uri_selection: str = "random",
        token: DelegationToken | None = None,
        ssl_enabled: bool = False,
        ssl_ca_file: str | None = None,
        plain: PlainSettings | None = None,
    ) -> None:
        self.connection = ThriftConnection(
            url,
            connect_timeout=connect_timeout,
            socket_timeout=socket_timeout,
            kerberos=kerberos,
            uri_selection=uri_selection,
            token=token,
            ssl_enabled=ssl_enabled,
            ssl_ca_file=ssl_ca_file,
            plain=plain,
        )
        self.lock_wait_timeout = lock_wait_timeout
        self.settle_timeout = settle_timeout
        self._txn_timeout = txn_timeout
        self._max_open_batch: int | None = None
        self._warehouse = warehouse
        # txn id → table → the write id this client was allocated (a commit's writes are checked against it)
        self._tables: dict[int, dict[str, int]] = {}
        self._partitioning: dict[str, bool] = {}  # table → partitioned (see _partitioned)
        self._readers = {}
        self._dml_events_on: bool | None = None
        self._guard = threading.Lock()

    @classmethod
    def open(cls, url: str, *, warehouse: str | None = None, create: bool = True, **options: Any) -> Self:
        """Connect and check that a metastore answers (``MetastoreUnavailable`` naming ``url`` otherwise) and
        that it is a Hive release acidstream runs on (:data:`MIN_HIVE_VERSION`), before anything is written.
        (``create`` is the same either way: a Hive Metastore that answers exists, and is never created here.)
        Kerberos (SASL/GSSAPI) when ``kerberos=True`` or a ``kerberos_*`` option is given (see
        :meth:`KerberosSettings.from_options <acidstream.metastore.hive.sasl.KerberosSettings.from_options>`):
        refused credentials raise :class:`~acidstream.errors.AuthenticationError` here."""
        try:
            plain = PlainSettings.from_options(options)
            kerberos = KerberosSettings.from_options(options)
            token = options.pop("delegation_token", None)
            if isinstance(token, str):
                token = DelegationToken(token)
        except ValueError as exc:
            raise MetastoreUrlError(
                f"authentication settings for the Hive Metastore at {url}: {exc}"
            ) from None
        client = cls(url, warehouse=warehouse, kerberos=kerberos, token=token, plain=plain, **options)
        connection = client.connection
        try:
            # within the connect timeout: a port that accepts and never answers is no metastore to wait for
            version = connection.call(
                "getVersion", lambda c: c.getVersion(), idempotent=False, timeout=connection.connect_timeout
            )
            check_version(version, client.url)
        except BaseException:
            client.close()
            raise
        return client

    @property
    def url(self) -> str:
        return self.connection.url

    @property
    def warehouse(self) -> str:
        """Where the metastore puts new databases: its ``metastore.warehouse.dir`` unless given."""
        if self._warehouse is None:
            location = self._call("get_config_value", "metastore.warehouse.dir", "")
            self._warehouse = file_uri(location)
        return self._warehouse

    @property
    def db_wait_timeout(self) -> float:
        return self.connection.connect_timeout

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

    @property
    def max_open_batch(self) -> int:
        """The most txns one ``open_txns`` opens: the metastore's ``metastore.txn.max.open.batch``."""
        if self._max_open_batch is None:
            text = self._call("get_config_value", "metastore.txn.max.open.batch", str(DEFAULT_MAX_OPEN_BATCH))
            try:
                self._max_open_batch = int(text)
            except ValueError:
                raise MetaException(f"metastore.txn.max.open.batch is not a number: {text!r}") from None
        return self._max_open_batch

    # --- tables --------------------------------------------------------------------------------------------

    def get_table(self, table_name: str) -> TableDefinition:
        """The table's definition; :class:`InvalidObjectException` naming it unless it is full-ACID ORC."""
        db, name = split_name(table_name)
        request = ttypes.GetTableRequest(dbName=db, tblName=name, capabilities=CLIENT_CAPABILITIES)
        result = self._call("get_table_req", request)
        return table_from_thrift(result.table)

    def table(self, table_name: str) -> TableDefinition:
        """:meth:`get_table` under the name every layer asks a metastore for its table by."""
        return self.get_table(table_name)

    # --- transactions --------------------------------------------------------------------------------------

    def open_txns(
        self, n: int = 1, *, user: str | None = None, host: str | None = None, agent_info: str | None = None
    ) -> list[int]:
        default_user, default_host = client_identity()
        request = ttypes.OpenTxnRequest(
            num_txns=n, user=user or default_user or "", hostname=host or default_host, agentInfo=agent_info
        )
        return self._opened(request)

    def _opened(self, request: ttypes.OpenTxnRequest) -> list[int]:
        """``open_txns``: the ids in order (Hive answers them in any order), checked to be as many consecutive
        ids as asked for; if they are not, they are aborted and :class:`MetaException` says what came back. A
        number outside 1 .. the metastore's ``metastore.txn.max.open.batch`` is refused first, as acidstream's own
        metastore refuses it (Hive's would fail on 0 and open fewer than asked above its cap)."""
        cap = self.max_open_batch
        if not 1 <= request.num_txns <= cap:
            raise InvalidObjectException(f"can open 1..{cap} transactions at once, not {request.num_txns}")
        txn_ids = sorted(self._call("open_txns", request, idempotent=False).txn_ids or ())
        try:
            check_consecutive(txn_ids, request.num_txns, f"open_txns of {request.num_txns}", self.url)
        except MetaException:
            with contextlib.suppress(MetaException):  # what the metastore answered is the error to see
                self.abort_txns(txn_ids)
            raise
        return txn_ids

    def allocate_table_write_ids(self, txn_ids: Sequence[int], table_name: str) -> list[tuple[int, int]]:
        """(txn, write id) by txn id; :class:`MetaException` unless each txn got a write id and, in txn order,
        they are consecutive (a batch's delta names the range of its write ids)."""
        db, name = split_name(table_name)
        txn_ids = sorted(txn_ids)
        request = ttypes.AllocateTableWriteIdsRequest(dbName=db, tableName=name, txnIds=txn_ids)
        answer = self._call("allocate_table_write_ids", request, idempotent=False)
        pairs = {t.txnId: t.writeId for t in answer.txnToWriteIds or ()}
        what = f"allocate_table_write_ids for {db}.{name}"
        if sorted(pairs) != txn_ids:
            raise MetaException(
                f"{what} at the Hive Metastore {self.url} answered write ids for txns {sorted(pairs)}, "
                f"asked for {txn_ids}"
            )
        check_consecutive([pairs[t] for t in txn_ids], len(txn_ids), what, self.url)
        with self._guard:
            for txn in txn_ids:
                self._tables.setdefault(txn, {})[f"{db}.{name}"] = pairs[txn]
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
        files), then ``commit_txn``. A commit whose answer was lost is settled (:meth:`_settle_commit`):
        committed is success, aborted raises :class:`TransactionError`, not known raises
        :class:`CommitOutcomeUnknown`. Each write's write id is checked first (:meth:`_check_write_id`)."""
        for write in writes:
            self._check_write_id(txn_id, write)
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
        except MetastoreUnreachable:
            raise  # not sent: not committed, and retryable
        except MetastoreUnavailable:
            self._settle_commit(request)
        with self._guard:
            self._tables.pop(txn_id, None)

    def _settle_commit(self, request: ttypes.CommitTxnRequest) -> None:
        """After ``commit_txn``'s answer was lost: send it again (:meth:`_persist`). Hive's ``commit_txn`` of a
        committed txn is a no-op (``TxnHandler.commitTxn``'s "Nth commitTxn", which Hive's retrying client relies
        on), so an answer settles it: success is committed (then or now), an aborted txn raises
        :class:`TransactionError`. No answer in time, or a txn the metastore no longer knows, raises
        :class:`CommitOutcomeUnknown`: never a retryable error for a commit that may have happened."""
        txn_id = request.txnid
        try:
            self._persist("commit_txn", request)
            return
        except TxnAbortedException as exc:
            raise TransactionError(
                f"the answer to committing txnid:{txn_id} was lost and the Hive Metastore at {self.url} says "
                f"it is aborted: {exc}"
            ) from None
        except NoSuchTxnException as exc:
            why = f"the Hive Metastore at {self.url} no longer knows the txn ({exc})"
            raise CommitOutcomeUnknown(txn_id, self.url, why) from exc
        except MetastoreUnavailable as exc:
            why = f"the Hive Metastore has not answered again for {self.settle_timeout:g}s: {exc}"
            raise CommitOutcomeUnknown(txn_id, self.url, why) from exc

    def _persist(self, name: str, *args: Any, fn: Callable[[Client], Any] | None = None) -> Any:
        """Call ``name`` (or ``fn``), which repeated does no more than once (Hive marks it ``@Idempotent``),
        until the metastore answers, for at most :attr:`settle_timeout` seconds: across a restart, reconnecting
        as it comes back. The last :class:`MetastoreUnavailable` if it never does."""
        call = fn or (lambda c: getattr(c, name)(*args))
        deadline = time.monotonic() + self.settle_timeout
        pause = 0.1
        while True:
            try:
                return self.connection.call(name, call, idempotent=False)
            except MetastoreUnavailable:
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def _check_write_id(self, txn_id: int, write: TableWrite) -> None:
        """:class:`InvalidObjectException`, before anything is registered, unless ``write.write_id`` is the write id
        allocated to ``txn_id`` on the table, as acidstream's own metastore refuses it (Hive's metastore records any:
        files written under another txn's write id would become visible with that txn). This client's own
        allocations answer; else the metastore's (:meth:`_allocated_write_id`)."""
        db, name = split_name(write.table)
        table = f"{db}.{name}"
        with self._guard:
            allocated = self._tables.get(txn_id, {}).get(table)
        if allocated is None:
            try:
                allocated = self._allocated_write_id(txn_id, table, write.write_id)
            except _TxnNotOpen:
                return  # registering or committing it raises what the metastore says of the txn
        if allocated != write.write_id:
            raise InvalidObjectException(
                f"txnid:{txn_id} has write id {allocated} on {table}, not {write.write_id}"
            )

    def _allocated_write_id(self, txn_id: int, table: str, claimed: int) -> int | None:
        """The write id of ``txn_id`` on ``table``, asked of the metastore: None if it allocated ``claimed`` to no
        txn (Hive's ``get_valid_write_ids`` for a write id fails then), else what ``allocate_table_write_ids``
        answers, which for a txn that has a write id on the table is that one again. (A txn with none is given
        one, as Hive's compiler allocates a statement's: it differs from ``claimed``, which is another txn's, and
        the commit is refused.) :class:`_TxnNotOpen` if the txn is not open."""
        request = ttypes.GetValidWriteIdsRequest(fullTableNames=[table], writeId=claimed)
        try:
            self._call("get_valid_write_ids", request)
        except MetastoreUnavailable:
            raise
        except MetaException as exc:
            if f"invalid write id {claimed}" not in str(exc):
                raise
            return None
        try:
            [(_, allocated)] = self.allocate_table_write_ids([txn_id], table)
        except MetastoreUnavailable:
            raise
        except MetaException as exc:  # Hive's metastore allocates for open txns only (an internal error else)
            raise _TxnNotOpen(txn_id) from exc
        return allocated

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
        if not self._dml_events():
            return
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

    def _dml_events(self) -> bool:
        """Whether the metastore logs DML events (``hive.metastore.dml.events``): only then do Hive's writers
        send ``add_write_notification_log`` (a call per partition and commit), and so do we."""
        if self._dml_events_on is None:
            text = self._call("get_config_value", "hive.metastore.dml.events", "false")
            self._dml_events_on = text.strip().lower() == "true"
        return self._dml_events_on

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

    def get_txn_state(self, txn_id: int) -> TxnStatus:
        """From ``get_open_txns_info``, which lists every open and aborted txn: listed → open or aborted; above
        the high-water mark → unknown. A txn at or below it and not listed has ended, and its record may be gone
        (Hive's txn cleaner deletes aborted txns that recorded no write), so ``commit_txn`` is asked, which for a
        txn that is not open changes nothing (Hive's "Nth commitTxn"): committed, aborted, or no record left
        (unknown: never taken for committed)."""
        answer = self._call("get_open_txns_info")
        for info in answer.open_txns or ():
            if info.id == txn_id:
                return TxnStatus.OPEN if info.state == ttypes.TxnState.OPEN else TxnStatus.ABORTED
        if not 0 < txn_id <= answer.txn_high_water_mark:
            return TxnStatus.UNKNOWN
        try:
            self._call("commit_txn", ttypes.CommitTxnRequest(txnid=txn_id))
        except TxnAbortedException:
            return TxnStatus.ABORTED
        except NoSuchTxnException:
            return TxnStatus.UNKNOWN
        return TxnStatus.COMMITTED

    def abort_txn(self, txn_id: int) -> None:
        self.abort_txns([txn_id])

    def heartbeat(self, txn_id: int) -> None:
        self._call("heartbeat", ttypes.HeartbeatRequest(txnid=txn_id))

    def get_latest_txnid_in_conflict(self, txn_id: int, table_name: str) -> int:
        """Hive 4's ``get_latest_txnid_in_conflict``: the latest txn whose committed update or delete conflicts
        with what ``txn_id`` wrote (any table it wrote, ``table_name`` among them); 0 if none."""
        return int(self._call("get_latest_txnid_in_conflict", txn_id))

    def replace_txn(self, txn_id: int, table_name: str, *, agent_info: str | None = None) -> tuple[int, int]:
        raise unsupported(Capability.TXN_REPLACEMENT, "replace_txn", self.backend_name)

    def show_txns(self) -> list[TxnInfo]:
        """Open and aborted txns, as Hive's ``SHOW TRANSACTIONS`` lists them (``get_open_txns_info``)."""
        answer = self._call("get_open_txns_info")
        return [
            TxnInfo(
                txn_id=t.id,
                state=TxnStatus.OPEN if t.state == ttypes.TxnState.OPEN else TxnStatus.ABORTED,
                started=t.startedTime or 0,
                last_heartbeat=t.lastHeartbeatTime or 0,
                user=t.user,
                host=t.hostname,
                agent_info=t.agentInfo,
            )
            for t in sorted(answer.open_txns or (), key=lambda t: t.id)
        ]

    def add_dynamic_partitions(
        self,
        txn_id: int,
        write_id: int,
        table_name: str,
        partition_names: Sequence[str],
        operation: OperationType = OperationType.INSERT,
    ) -> None:
        write = TableWrite(table_name, write_id, {p: operation for p in partition_names})
        self._check_write_id(txn_id, write)
        self._register(txn_id, write)

    def add_write_notification(
        self,
        txn_id: int,
        write_id: int,
        table_name: str,
        partition_name: str | None,
        files: Sequence[str | WrittenFile],
    ) -> None:
        write = TableWrite(table_name, write_id, files={partition_name: files})
        self._check_write_id(txn_id, write)
        self._register(txn_id, write)

    def perform_timeouts(self) -> list[int]:
        raise unsupported(Capability.HOUSEKEEPING, "perform_timeouts", self.backend_name)

    # --- snapshots -----------------------------------------------------------------------------------------

    def snapshot(self) -> ValidTxnList:
        """Now, as Hive's readers take it: ``get_open_txns`` made into a ``ValidReadTxnList``."""
        return valid_txn_list(self._call("get_open_txns"))

    def get_open_txns(self) -> ValidTxnList:
        return self.snapshot()

    def get_valid_write_ids(
        self, table_name: str, txn_id: int | None = None, *, snapshot: ValidTxnList | None = None
    ) -> ValidWriteIdList:
        """The table's valid write ids now, or at ``snapshot``; with ``txn_id`` (which must be open) its own
        write id is an open exception."""
        db, name = split_name(table_name)
        if txn_id is not None:
            state = self.get_txn_state(txn_id)
            if state is TxnStatus.ABORTED:
                raise TxnAbortedException(f"Transaction txnid:{txn_id} already aborted")
            if state is not TxnStatus.OPEN:
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
            component=[_lock_component(c, self._partitioned(c)) for c in components],
            txnid=txn_id,
            user=user or default_user or "",
            hostname=host or default_host,
            agentInfo=agent_info,
        )
        answer = self._call("lock", request, idempotent=False)
        state = _LOCK_STATES[answer.state]
        if state is not LockState.WAITING or not wait:
            return LockResponse(answer.lockid, state)

        def check() -> tuple[LockState, str | None]:
            check = ttypes.CheckLockRequest(lockid=answer.lockid, txnid=txn_id)
            return _LOCK_STATES[self._call("check_lock", check).state], None

        def withdraw() -> bool:
            with contextlib.suppress(MetaException):  # gone already: its txn ended
                self._call("unlock", ttypes.UnlockRequest(lockid=answer.lockid))
            return False

        return wait_for_lock(
            answer.lockid,
            check,
            withdraw,
            self.lock_wait_timeout if timeout is None else timeout,
            first_pause=0.05,
            max_pause=1.0,
            where=f" at {self.url}",
            blocker=lambda: self._blocker(answer.lockid),
        )

    def _blocker(self, lock_id: int) -> str | None:
        """What keeps waiting lock ``lock_id`` from being granted, from ``show_locks`` (Hive's ``check_lock`` does
        not say): the lock its components are blocked by (``HL_BLOCKEDBY_EXT_ID``), described."""
        try:
            shown = [_lock_info(e) for e in self._call("show_locks", ttypes.ShowLocksRequest()).locks or ()]
        except MetastoreUnavailable:
            return None  # the timeout is the error to see
        blocked_by = next((li.blocked_by for li in shown if li.lock_id == lock_id and li.blocked_by), None)
        if blocked_by is None:
            return None
        blocking = [li for li in shown if li.lock_id == blocked_by]
        return blocking[0].describe() if blocking else f"lock {blocked_by}"

    def _partitioned(self, component: LockComponent) -> bool:
        """Whether the component's table is partitioned (asked once per table and client)."""
        if component.table is None or not component.is_dynamic_partition_write:
            return False
        name = f"{component.db}.{component.table}".lower()
        if name not in self._partitioning:
            self._partitioning[name] = bool(self.get_table(name).partition_keys)
        return self._partitioning[name]

    def unlock(self, lock_id: int) -> None:
        self._call("unlock", ttypes.UnlockRequest(lockid=lock_id))

    def show_locks(self, table_name: str | None = None) -> list[LockInfo]:
        """Hive's ``SHOW LOCKS``, of one table or all."""
        request = ttypes.ShowLocksRequest()
        if table_name is not None:
            request.dbname, request.tablename = split_name(table_name)
        answer = self._call("show_locks", request)
        return [_lock_info(e) for e in answer.locks or ()]

    # --- what Hive's metastore keeps no record of --------------------------------------------------------------

    def unfinished_publications(self, table_name: str, baseline: int) -> list[Publication]:
        """None: on Hive a compaction's output is visible only through its visibility txn, so a listing never
        meets one half published."""
        return []

    def recorded_lengths(self, table_name: str, partition: str | None, low: int, high: int) -> dict[str, int]:
        """None: Hive's write notifications carry no file lengths, so only the files themselves are checked."""
        return {}

    def notifications(self, after_event_id: int = 0, limit: int = 1000) -> list[NotificationEvent]:
        raise unsupported(Capability.NOTIFICATIONS, "notifications", self.backend_name)

    def current_notification_event_id(self) -> int:
        raise unsupported(Capability.NOTIFICATIONS, "current_notification_event_id", self.backend_name)

    def repl_write_id_txns(self, table_name: str, write_ids: Sequence[int]) -> dict[int, int]:
        raise unsupported(Capability.NOTIFICATIONS, "repl_write_id_txns", self.backend_name)

    def repl_follower_progress(self, name: str, event_id: int, lease: float) -> None:
        raise unsupported(Capability.NOTIFICATIONS, "repl_follower_progress", self.backend_name)

    def repl_followers(self) -> list[tuple[str, int, int, int]]:
        raise unsupported(Capability.NOTIFICATIONS, "repl_followers", self.backend_name)

    def repl_drop_follower(self, name: str) -> bool:
        raise unsupported(Capability.NOTIFICATIONS, "repl_drop_follower", self.backend_name)

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
        raise unsupported(Capability.REPLICA_STATE, "repl_apply", self.backend_name)

    def repl_state(self, policy: str) -> ReplState | None:
        raise unsupported(Capability.REPLICA_STATE, "repl_state", self.backend_name)

    def repl_states(self) -> list[ReplState]:
        raise unsupported(Capability.REPLICA_STATE, "repl_states", self.backend_name)

    def repl_file_state(self, path: str) -> tuple[int, int] | None:
        raise unsupported(Capability.REPLICA_STATE, "repl_file_state", self.backend_name)

    def repl_target_txns(self, policy: str, src_txn_ids: Sequence[int]) -> dict[int, int]:
        raise unsupported(Capability.REPLICA_STATE, "repl_target_txns", self.backend_name)


class _TxnNotOpen(Exception):
    """The metastore would not allocate a write id to the txn: it is not open (the caller's next call says why)."""


def _lock_component(component: LockComponent, partitioned: bool) -> ttypes.LockComponent:
    """Hive's component; a table's is transactional (acidstream's tables all are), so the metastore records
    what the txn writes, for write conflicts and the compactor, as ``DbTxnManager`` marks it. A write to an
    unpartitioned table is never a dynamic-partition write for Hive: its component is recorded with the lock
    (there is no partition to add later)."""
    return ttypes.LockComponent(
        type=_LOCK_TYPES[component.type],
        level=_LOCK_LEVELS[component.level],
        dbname=component.db,
        tablename=component.table,
        partitionname=component.partition,
        operationType=_OPERATIONS.get(component.operation, ttypes.DataOperationType.UNSET),
        isTransactional=component.table is not None,
        isDynamicPartitionWrite=component.is_dynamic_partition_write and partitioned,
    )


def _lock_info(element: ttypes.ShowLocksResponseElement) -> LockInfo:
    return LockInfo(
        lock_id=element.lockid,
        component_id=element.lockIdInternal or 0,
        txn_id=element.txnid or None,
        db=element.dbname,
        table=element.tablename,
        partition=element.partname,
        state=_LOCK_STATES.get(element.state, LockState.WAITING),
        type=_SHOWN_LOCK_TYPES.get(element.type, LockType.SHARED_WRITE),
        last_heartbeat=element.lastheartbeat or 0,
        acquired_at=element.acquiredat,
        user=element.user,
        host=element.hostname,
        agent_info=element.agentInfo,
        blocked_by=element.blockedByExtId,
    )


def check_consecutive(ids: Sequence[int], n: int, what: str, url: str) -> None:
    """:class:`MetaException` naming ``what`` unless ``ids`` are ``n`` consecutive ids, ascending."""
    first = ids[0] if ids else 0
    if list(ids) != list(range(first, first + n)):
        raise MetaException(
            f"{what} at the Hive Metastore {url} answered {list(ids)}: not {n} consecutive ids"
        )


def check_version(version: str, url: str) -> None:
    """Refuse a metastore older than :data:`MIN_HIVE_VERSION`, naming it and its version."""
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    if match is None or (int(match[1]), int(match[2])) < MIN_HIVE_VERSION:
        need = ".".join(map(str, MIN_HIVE_VERSION))
        raise MetaException(
            f"the Hive Metastore at {url} is version {version!r}: acidstream needs Hive {need} or later "
            "(its full-ACID transactions, write ids and compaction calls)"
        )


def _seconds(text: str) -> float:
    """A Hadoop time value (``300s``, ``5m``, ``300``) in seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if match is None or match[2] not in _TIME_UNITS:
        raise MetaException(f"metastore.txn.timeout is not a time: {text!r}")
    return float(match[1]) * _TIME_UNITS[match[2]]
