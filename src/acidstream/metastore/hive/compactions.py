"""Hive 4's compaction queue over thrift: acidstream's compactor as a remote worker of a Hive Metastore.

A Hive 4 worker outside the metastore (``hive.metastore.runworker.in=hs2``) makes these calls, in this order
(``Worker``, ``AcidCompactionService.compact`` and its ``CompactionTxn``): ``find_next_compact2`` claims the
oldest initiated request; ``open_txns`` opens a ``COMPACTION`` txn, which takes a ``SHARED_READ`` lock on the
target and is heartbeated; ``update_compactor_state`` records the txn and the highest write id compacted (and a
txn component, so the files of an aborted compactor txn are cleaned like any aborted write); the output is
written in place under the txn's visibility suffix (``base_N_vT``); ``mark_compacted`` then ``commit_txn``,
which makes the output visible to readers and stamps the request for the cleaner; a failure aborts the txn then
``mark_failed``; nothing to do is ``mark_refused`` and a commit. :class:`HiveCompactionQueue` makes those calls
under the names of acidstream's own queue (:class:`~acidstream.metastore.sql.client.MetastoreClient`), so the
compactor's worker runs unchanged on either.

What Hive's queue has no call for (the initiator's and the cleaner's side, recovering dead workers) runs in the
metastore itself (``metastore.compactor.initiator.on``, ``metastore.compactor.cleaner.on``, its housekeeping):
those calls raise :class:`~acidstream.errors.UnsupportedCapability` saying so.

The bindings (pyiceberg's ``hive_metastore``) predate Hive 4.0.1's ``ShowCompactRequest`` filters and the last
fields of ``ShowCompactResponseElement`` (the compactor txn, its commit time, the highest write id): the two
structs are declared here with 4.0.1's field ids; an older metastore leaves the new fields unset.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from hive_metastore import ttypes
from hive_metastore.ThriftHiveMetastore import Client
from thrift.protocol.TProtocol import TProtocolBase
from thrift.Thrift import TApplicationException, TMessageType, TType

from acidstream.acid.partitions import make_part_name, parse_part_name
from acidstream.errors import (
    CompactionDeclined,
    InvalidObjectException,
    InvalidPartition,
    LockTimeoutException,
    MetaException,
    MetastoreUnavailable,
    NoSuchObjectException,
    NoSuchTxnException,
    TxnAbortedException,
    UnsupportedCapability,
)
from acidstream.metastore.backend import Capability
from acidstream.metastore.hive.host import HiveHost
from acidstream.metastore.hive.transport import MetastoreUnreachable
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import (
    CompactionInfo,
    LockComponent,
    LockLevel,
    LockState,
    LockType,
    OperationType,
    PotentialCompaction,
)
from acidstream.metastore.names import split_name

#: What the worker tells Hive it runs (``CQ_WORKER_VERSION``, ``CQ_INITIATOR_VERSION``).
AGENT_VERSION = "acidstream"
_KINDS = {"major": ttypes.CompactionType.MAJOR, "minor": ttypes.CompactionType.MINOR}
_KIND_NAMES = {v: k for k, v in _KINDS.items()}
#: Hive 4's ``CompactionType.REBALANCE`` (absent from the bindings): acidstream's compactor does not rebalance.
REBALANCE = 3
#: What runs instead of the calls Hive's queue lacks (:attr:`Capability.COMPACTION_SERVICES`).
SERVICES_FALLBACK = (
    "the Hive Metastore's own initiator, cleaner and housekeeping do this "
    "(metastore.compactor.initiator.on, metastore.compactor.cleaner.on)"
)


class _Struct:
    """A thrift struct read and written by its ``thrift_spec`` (as the bindings' generic path does)."""

    thrift_spec: ClassVar[tuple[Any, ...]]

    def __init__(self, **values: Any) -> None:
        for spec in self.thrift_spec:
            if spec is not None:
                setattr(self, spec[2], values.pop(spec[2], None))
        if values:
            raise TypeError(f"{type(self).__name__} has no fields {sorted(values)}")

    def read(self, iprot: TProtocolBase) -> None:
        iprot.readStruct(self, self.thrift_spec)

    def write(self, oprot: TProtocolBase) -> None:
        oprot.writeStruct(self, self.thrift_spec)


class ShowCompactRequest(_Struct):
    """Hive 4.0.1's ``ShowCompactRequest`` (the bindings' has no fields): the metastore filters by them."""

    thrift_spec = (
        None,
        (1, TType.I64, "id", None, None),
        (2, TType.STRING, "poolName", "UTF8", None),
        (3, TType.STRING, "dbName", "UTF8", None),
        (4, TType.STRING, "tbName", "UTF8", None),
        (5, TType.STRING, "partName", "UTF8", None),
        (6, TType.I32, "type", None, None),
        (7, TType.STRING, "state", "UTF8", None),
        (8, TType.I64, "limit", None, None),
        (9, TType.STRING, "order", "UTF8", None),
    )


class ShowCompactElement(_Struct):
    """Hive 4.0.1's ``ShowCompactResponseElement``: the bindings' fields 1-19, then 20-24."""

    thrift_spec = (
        *ttypes.ShowCompactResponseElement.thrift_spec[:20],
        (20, TType.STRING, "poolName", "UTF8", None),
        (21, TType.I64, "nextTxnId", None, None),
        (22, TType.I64, "txnId", None, None),
        (23, TType.I64, "commitTime", None, None),
        (24, TType.I64, "hightestWriteId", None, None),
    )
    id: int
    dbname: str
    tablename: str
    partitionname: str | None
    type: int
    state: str
    workerid: str | None
    start: int | None
    runAs: str | None
    hightestTxnId: int | None
    endTime: int | None
    errorMessage: str | None
    enqueueTime: int | None
    initiatorId: str | None
    nextTxnId: int | None
    txnId: int | None
    commitTime: int | None
    hightestWriteId: int | None


class _ShowCompactResponse(_Struct):
    thrift_spec = (None, (1, TType.LIST, "compacts", (TType.STRUCT, [ShowCompactElement, None], False), None))
    compacts: list[ShowCompactElement] | None


class _ShowCompactResult(_Struct):
    thrift_spec = ((0, TType.STRUCT, "success", [_ShowCompactResponse, None], None),)
    success: _ShowCompactResponse | None


def _show_compact(client: Client, request: ShowCompactRequest) -> list[ShowCompactElement]:
    """``show_compact`` with 4.0.1's request and answer (the generated ``recv`` would drop the new fields)."""
    client.send_show_compact(request)
    iprot = client._iprot
    _, kind, _ = iprot.readMessageBegin()
    if kind == TMessageType.EXCEPTION:
        error = TApplicationException()
        error.read(iprot)
        iprot.readMessageEnd()
        raise error
    result = _ShowCompactResult()
    result.read(iprot)
    iprot.readMessageEnd()
    if result.success is None:
        raise TApplicationException(TApplicationException.MISSING_RESULT, "show_compact: no result")
    return list(result.success.compacts or [])


@dataclass
class _Claim:
    """A request this client's worker claimed: Hive's struct for it, its compactor txn and what the worker
    recorded (Hive's queue keeps no worker notes, ``meta``)."""

    struct: ttypes.CompactionInfoStruct
    txn_id: int
    meta: dict[str, Any]


def _struct(element: ShowCompactElement) -> ttypes.CompactionInfoStruct:
    """The worker's struct for a request, from ``show_compact``'s row (what Hive's queue calls read of it)."""
    return ttypes.CompactionInfoStruct(
        id=element.id,
        dbname=element.dbname,
        tablename=element.tablename,
        partitionname=element.partitionname or None,
        type=element.type,
        runas=element.runAs,
        workerId=element.workerid,
        start=element.start,
        enqueueTime=element.enqueueTime,
    )


def _existing(message: str | None) -> tuple[int, str] | None:
    """The request Hive names, and its state, when it refuses a second one for the same target
    (``CompactFunction``: "already scheduled with state='initiated' and id=N")."""
    found = re.search(r"state='([^']*)' and id=(\d+)", message or "")
    return (int(found[2]), found[1]) if found else None


def _unset(value: int | None) -> int | None:
    """Hive's "not set" for a time or id column (0 or -1) as None."""
    return value if value is not None and value > 0 else None


class HiveCompactionQueue(HiveHost):
    """The compaction-queue calls of acidstream's metastore, on a Hive 4 Metastore's queue (thrift).

    A mixin for the Hive backend class, which provides what :data:`~acidstream.metastore.hive.host.HiveHost`
    declares.
    """

    # --- what users and workers share ---------------------------------------------------------------------------

    def compact(
        self,
        table_name: str,
        partition: str | Mapping[str, Any] | None = None,
        kind: str = "major",
        *,
        initiator_id: str | None = None,
    ) -> int:
        """``compact2``: queue a ``major``/``minor`` compaction in Hive's queue. Hive declines a request while
        another for the same target is initiated or working, or ready for cleaning with nothing written since:
        one of the same kind initiated or working is returned (as ours returns it), any other is
        :class:`CompactionDeclined` naming it (waiting for it would report that request's outcome)."""
        kind = kind.lower()
        if kind not in _KINDS:
            raise InvalidObjectException(f"compaction kind must be 'major' or 'minor', not {kind!r}")
        db, name = split_name(table_name)
        part = self._target_partition(f"{db}.{name}", partition)
        user, host = client_identity()
        request = ttypes.CompactionRequest(
            dbname=db,
            tablename=name,
            partitionname=part,
            type=_KINDS[kind],
            runas=user,
            properties={},
            initiatorId=initiator_id or f"{host}-manual",
            initiatorVersion=AGENT_VERSION,
        )
        answer = self._call("compact2", request, idempotent=False)
        target = f"{db}.{name}" + (f"/{part}" if part else "")
        if answer.accepted and answer.id > 0:
            return int(answer.id)
        existing = _existing(answer.errormessage)
        if existing is None:
            raise MetaException(
                f"the Hive Metastore at {self.url} did not queue a {kind} compaction of {target}"
                + f": {answer.state} {answer.errormessage or ''}".rstrip()
            )
        queued_id, state = existing
        queued = self.get_compaction(queued_id)
        if queued.kind == kind and state in ("initiated", "working"):
            return queued_id
        raise CompactionDeclined(kind, target, queued_id, queued.kind, state)

    def _target_partition(self, table_name: str, partition: str | Mapping[str, Any] | None) -> str | None:
        """The partition's name in the table's key order (required for a partitioned table, as Hive's DDL
        requires it); :class:`NoSuchObjectException` unless it exists."""
        table = self.get_table(table_name)  # InvalidObjectException unless full-ACID ORC
        keys = [k.name for k in table.partition_keys]
        if not keys:
            if partition is not None:
                raise InvalidPartition(str(partition), f"{table_name} is not partitioned")
            return None
        if partition is None:
            raise InvalidObjectException(
                f"You must specify a partition to compact for partitioned table {table_name}"
            )
        spec = parse_part_name(partition) if isinstance(partition, str) else dict(partition)
        spec = {k.lower(): v for k, v in spec.items()}
        if sorted(spec) != sorted(keys):
            raise InvalidPartition(str(partition), f"{table_name} is partitioned by {keys}")
        name = make_part_name(keys, [None if spec[k] is None else str(spec[k]) for k in keys])
        self._call("get_partition_by_name", table.db, table.name, name)  # NoSuchObjectException if missing
        return name

    def get_compaction(self, compaction_id: int) -> CompactionInfo:
        """A queued or finished request (``show_compact`` filtered by its id)."""
        return self._info(self._element(compaction_id))

    def _element(self, compaction_id: int) -> ShowCompactElement:
        for element in self._show(ShowCompactRequest(id=compaction_id)):
            if element.id == compaction_id:
                return element
        raise NoSuchObjectException(f"No compaction {compaction_id} at the Hive Metastore {self.url}")

    def show_compactions(self) -> list[CompactionInfo]:
        """``SHOW COMPACTIONS``: Hive's queue and history, by id."""
        return sorted((self._info(e) for e in self._show(ShowCompactRequest())), key=lambda c: c.id)

    def _show(self, request: ShowCompactRequest) -> list[ShowCompactElement]:
        return self.connection.call("show_compact", lambda c: _show_compact(c, request), idempotent=True)

    def _info(self, element: ShowCompactElement) -> CompactionInfo:
        """Hive's row as our model; for a request this client works on, with the worker's own notes."""
        claim = self._claims().get(element.id)
        kind = _KIND_NAMES.get(element.type, "rebalance" if element.type == REBALANCE else str(element.type))
        return CompactionInfo(
            id=element.id,
            db=element.dbname,
            table=element.tablename,
            partition=element.partitionname or None,
            kind=kind,
            state=element.state,
            worker_id=element.workerid or None,
            enqueue_time=element.enqueueTime or 0,
            start=_unset(element.start),
            end=_unset(element.endTime),
            # Hive 4.0.1 answers CQ_HIGHEST_WRITE_ID in field 9 (named hightestTxnId), later ones in field 24
            highest_write_id=_unset(element.hightestWriteId) or _unset(element.hightestTxnId),
            error_message=element.errorMessage,
            txn_id=_unset(element.txnId) or (claim.txn_id if claim else None),
            initiator_id=element.initiatorId,
            next_reader_id=_unset(element.nextTxnId),  # Hive's reader bound: its cleaner waits for txns below
            commit_time=_unset(element.commitTime),
            meta=dict(claim.meta) if claim else {},
        )

    # --- the worker's side ---------------------------------------------------------------------------------------

    def _claims(self) -> dict[int, _Claim]:
        """The requests this client claimed and has not finished (kept on the instance: Hive keeps no notes)."""
        claims: dict[int, _Claim] = self.__dict__.setdefault("_hive_compaction_claims", {})
        return claims

    def find_next_compaction(self, worker_id: str, compaction_id: int | None = None) -> CompactionInfo | None:
        """Claim the oldest initiated request (``find_next_compact2``) and open its compactor txn, locked
        ``SHARED_READ`` on the target as Hive's ``CompactionTxn`` does; the caller heartbeats the txn.

        Hive claims in queue order only: with ``compaction_id``, None unless that request is the oldest
        initiated one (:meth:`Worker.claim <acidstream.compactor.worker.Worker.claim>` then runs the ones ahead
        first); if another worker claims it first, the next one is this worker's to run.
        """
        if compaction_id is not None:
            initiated = self._show(ShowCompactRequest(state="i"))  # Hive filters by its state code
            waiting = [e.id for e in initiated if e.state == "initiated"]
            if compaction_id not in waiting or min(waiting) != compaction_id:
                return None
        while True:
            found = self._claim_next(worker_id)
            if found is None:
                return None
            if found.type not in _KIND_NAMES:
                found.errorMessage = "acidstream's compactor runs major and minor compactions only"
                self._call("mark_failed", found, idempotent=True)
                continue
            txn_id = self._open_compactor_txn(found, worker_id)
            if txn_id is not None:
                break
        self._claims()[found.id] = _Claim(found, txn_id, {})
        return CompactionInfo(
            id=found.id,
            db=found.dbname,
            table=found.tablename,
            partition=found.partitionname or None,
            kind=_KIND_NAMES[found.type],
            state="working",
            worker_id=worker_id,
            enqueue_time=found.enqueueTime or 0,
            start=int(time.time() * 1000),
            end=None,
            highest_write_id=None,
            error_message=None,
            txn_id=txn_id,
        )

    def _claim_next(self, worker_id: str) -> ttypes.CompactionInfoStruct | None:
        """``find_next_compact2``. When its answer is lost, the request it may have claimed for ``worker_id``
        is looked for by that worker id (unique: :func:`~acidstream.compactor.worker.new_worker_id`) once the
        metastore answers, and taken on: left alone it would stay working until Hive revokes the worker
        (``hive.compactor.worker.timeout``, 24 h)."""
        request = ttypes.FindNextCompactRequest(workerId=worker_id, workerVersion=AGENT_VERSION)
        try:
            return self._call("find_next_compact2", request, idempotent=False).ci
        except MetastoreUnreachable:
            raise  # not sent: nothing claimed
        except MetastoreUnavailable:
            working = self._persist(
                "show_compact", fn=lambda c: _show_compact(c, ShowCompactRequest(state="w"))
            )
        mine = sorted((e for e in working if e.workerid == worker_id), key=lambda e: e.id)
        return _struct(mine[0]) if mine else None

    def _open_compactor_txn(self, found: ttypes.CompactionInfoStruct, worker_id: str) -> int | None:
        """``CompactionTxn.open``: a COMPACTION txn holding a SHARED_READ lock on the target; None (the request
        marked failed, as Hive's worker does) if the lock is refused. If the metastore fails meanwhile, the
        request is given back (:meth:`_give_back`)."""
        user, host = client_identity()
        target = f"{found.dbname}.{found.tablename}" + (
            f"/{found.partitionname}" if found.partitionname else ""
        )
        request = ttypes.OpenTxnRequest(
            num_txns=1,
            user=user or "",
            hostname=host,
            agentInfo=f"compactor {worker_id}: {_KIND_NAMES[found.type]} {target}",
            txn_type=ttypes.TxnType.COMPACTION,
        )
        try:
            [txn_id] = self._opened(request)
        except MetastoreUnavailable as exc:
            self._give_back(found, None, exc)
            raise
        level = LockLevel.PARTITION if found.partitionname else LockLevel.TABLE
        component = LockComponent(
            LockType.SHARED_READ,
            level,
            found.dbname,
            found.tablename,
            found.partitionname,
            OperationType.SELECT,
        )
        try:
            state = self.lock([component], txn_id=txn_id, agent_info=f"compactor {worker_id}").state
            error = None if state is LockState.ACQUIRED else f"lock {state.name}"
        except LockTimeoutException as exc:
            error = str(exc)
        except MetastoreUnavailable as exc:
            self._give_back(found, txn_id, exc)
            raise
        if error is None:
            return int(txn_id)
        self.abort_txns([txn_id])
        found.errorMessage = f"Unable to acquire lock(s) on {{{target}}}: {error}"
        self._call("mark_failed", found, idempotent=True)
        return None

    def _give_back(self, found: ttypes.CompactionInfoStruct, txn_id: int | None, error: Exception) -> None:
        """A request claimed and not worked on because the metastore failed: its compactor txn aborted and the
        request marked failed once the metastore answers again (:meth:`_persist`'s bound), so that Hive's
        initiator queues its target again, rather than it staying working until Hive revokes the worker."""
        # gone for longer, the request stays working: the caller raises ``error``, which says why
        with contextlib.suppress(MetaException):
            if txn_id is not None:
                with contextlib.suppress(NoSuchTxnException, TxnAbortedException):  # ended already
                    self._persist("abort_txn", ttypes.AbortTxnRequest(txnid=txn_id))
            found.errorMessage = f"the worker lost the Hive Metastore while claiming the request: {error}"
            self._persist("mark_failed", found)

    def _claim(self, compaction_id: int, txn_id: int | None) -> _Claim:
        """This client's claim on the request, still held by compactor txn ``txn_id`` if given."""
        claim = self._claims().get(compaction_id)
        if claim is None:
            raise InvalidObjectException(
                f"compaction {compaction_id} is not worked on by this client of the Hive Metastore {self.url}"
            )
        if txn_id is not None and claim.txn_id != txn_id:
            raise InvalidObjectException(
                f"compaction {compaction_id} is no longer worked on by txnid:{txn_id}"
            )
        return claim

    def update_compaction(
        self, compaction_id: int, txn_id: int, *, highest_write_id: int, meta: Mapping[str, Any]
    ) -> None:
        """``update_compactor_state``: the compactor txn and the highest write id it compacts (Hive adds a
        txn component, so an aborted compactor's files are cleaned); ``meta`` stays with this client."""
        claim = self._claim(compaction_id, txn_id)
        claim.struct.highestWriteId = highest_write_id
        claim.struct.runas = claim.struct.runas or client_identity()[0]
        # repeated until answered (Hive's is idempotent): a request left working with no txn recorded would
        # wait for Hive to revoke its worker (hive.compactor.worker.timeout, 24 h) to be compacted again
        self._persist("update_compactor_state", claim.struct, txn_id)
        claim.meta = dict(meta)

    def begin_publish(self, compaction_id: int, txn_id: int, meta: Mapping[str, Any]) -> int:
        """Nothing to record on Hive: the output is written in place under the compactor txn's visibility
        suffix and its commit (in :meth:`mark_compacted`) publishes it at once. Returns the txn id."""
        claim = self._claim(compaction_id, txn_id)
        claim.meta = dict(meta)
        return txn_id

    def mark_compacted(self, compaction_id: int, txn_id: int | None = None) -> None:
        """``mark_compacted`` then ``commit_txn`` of the compactor txn (Hive's order: the commit stamps the
        request's next txn id and commit time, which its cleaner waits on)."""
        if txn_id is None:
            raise self._unsupported("mark_compacted without the worker's txn (recovering a dead worker)")
        claim = self._claim(compaction_id, txn_id)
        self._call("mark_compacted", claim.struct, idempotent=True)
        self.commit_txn(txn_id)
        self._claims().pop(compaction_id, None)

    def mark_refused(self, compaction_id: int, message: str, txn_id: int | None = None) -> None:
        """``mark_refused`` (nothing to compact), then the compactor txn commits, as Hive's worker does."""
        claim = self._claim(compaction_id, txn_id)
        claim.struct.errorMessage = message
        self._call("mark_refused", claim.struct, idempotent=True)
        self.commit_txn(claim.txn_id)
        self._claims().pop(compaction_id, None)

    def mark_failed(self, compaction_id: int, message: str, txn_id: int | None = None) -> None:
        """Abort the compactor txn (its in-place output becomes an aborted write's), then ``mark_failed``.
        A request this client did not claim is failed by id (any queued state, as Hive allows)."""
        claim = self._claims().get(compaction_id) if txn_id is None else self._claim(compaction_id, txn_id)
        if claim is not None:
            self.abort_txns([claim.txn_id])
            struct = claim.struct
        else:
            struct = _struct(self._element(compaction_id))
        struct.errorMessage = message
        self._call("mark_failed", struct, idempotent=True)
        self._claims().pop(compaction_id, None)

    # --- what Hive's metastore runs itself -------------------------------------------------------------------------

    def _unsupported(self, call: str) -> UnsupportedCapability:
        return UnsupportedCapability(
            call, Capability.COMPACTION_SERVICES.name, f"the Hive Metastore at {self.url}", SERVICES_FALLBACK
        )

    def revert_compaction(self, compaction_id: int, message: str, max_attempts: int) -> str:
        raise self._unsupported("revert_compaction")

    def find_abandoned_compactions(self) -> list[CompactionInfo]:
        raise self._unsupported("find_abandoned_compactions")

    def find_ready_to_clean(self, retention: float) -> list[CompactionInfo]:
        raise self._unsupported("find_ready_to_clean")

    def claim_cleaning(self, compaction_id: int) -> bool:
        raise self._unsupported("claim_cleaning")

    def blocking_readers(self, compaction_id: int) -> list[int]:
        raise self._unsupported("blocking_readers")

    def mark_cleaned(
        self, compaction_id: int, forget_write_ids: Sequence[int] = (), removed: Sequence[str] = ()
    ) -> None:
        raise self._unsupported("mark_cleaned")

    def find_potential_compactions(self, aborted_threshold: int) -> list[PotentialCompaction]:
        raise self._unsupported("find_potential_compactions")

    def too_many_failed_compactions(
        self, table_name: str, partition: str | None, threshold: int, retry_after: float
    ) -> bool:
        raise self._unsupported("too_many_failed_compactions")

    def record_compaction_not_initiated(
        self, table_name: str, partition: str | None, message: str, *, initiator_id: str | None = None
    ) -> int:
        raise self._unsupported("record_compaction_not_initiated")

    def purge_compaction_history(self) -> int:
        raise self._unsupported("purge_compaction_history")
