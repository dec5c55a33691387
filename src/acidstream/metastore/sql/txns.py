"""Transactions and write ids with Hive 3 TxnHandler semantics; each function runs inside one DB transaction.

Committed txns keep their ``TXNS`` row in state ``c`` (Hive 4 style) so that a repeated commit is a no-op and
``get_txn_state`` answers exactly; snapshots only look at open and aborted rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, func, insert, or_, select, true, update

from acidstream.acid.writeids import LONG_MAX, ValidTxnList, ValidWriteIdList, write_id_list_from_states
from acidstream.errors import (
    InvalidObjectException,
    MetaException,
    NoSuchTxnException,
    TxnAbortedException,
    WriteConflictException,
)
from acidstream.faults import fault_point
from acidstream.metastore.models import (
    CompletedComponent,
    HeartbeatTxnRangeResponse,
    OperationType,
    TableWrite,
    TxnInfo,
    TxnStatus,
    WrittenFile,
)
from acidstream.metastore.sql import catalog, notifications
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms, peek_next, take_ids
from acidstream.metastore.sql.prepared import Prepared

MAX_OPEN_BATCH = 1000  # hive.txn.max.open.batch
IN_CHUNK = 1000  # ids per IN (...) list

T = s.txns.c
TC = s.txn_components.c
T2W = s.txn_to_write_id.c
NWI = s.next_write_id.c
HL = s.hive_locks.c

# The per-transaction statements, built once: on SQLite building a statement costs more than running it.
_STATE_SELECT = select(T.txn_state).where(T.txn_id == bindparam("txn_id"))
_STATE = Prepared(_STATE_SELECT)
_STATE_FOR_UPDATE = Prepared(_STATE_SELECT.with_for_update())
_STATES_WITH_WRITE_IDS = (
    select(T.txn_id, T.txn_state, T2W.t2w_writeid)
    .select_from(
        s.txns.outerjoin(
            s.txn_to_write_id,
            and_(
                T2W.t2w_txnid == T.txn_id,
                T2W.t2w_database == bindparam("db"),
                T2W.t2w_table == bindparam("table"),
            ),
        )
    )
    .where(T.txn_id.in_(bindparam("ids", expanding=True)))
    .order_by(T.txn_id)
    .with_for_update(of=s.txns)
)
_STATES_FOR_UPDATE = (
    select(T.txn_id, T.txn_state)
    .where(T.txn_id.in_(bindparam("ids", expanding=True)))
    .order_by(T.txn_id)
    .with_for_update()
)
_INSERT_TXNS = Prepared(insert(s.txns))
_SET_STATE = Prepared(
    update(s.txns).where(T.txn_id == bindparam("p_txn")).values(txn_state=bindparam("p_state"))
)
_ABORT_OPEN = (
    update(s.txns)
    .where(T.txn_id.in_(bindparam("p_ids", expanding=True)), T.txn_state == TxnStatus.OPEN.value)
    .values(txn_state=TxnStatus.ABORTED.value)
)
_HEARTBEAT = Prepared(
    update(s.txns)
    .where(T.txn_id == bindparam("p_txn"), T.txn_state == TxnStatus.OPEN.value)
    .values(txn_last_heartbeat=bindparam("p_now"), txn_heartbeat_count=T.txn_heartbeat_count + 1)
)
_HEARTBEAT_LOCKS = Prepared(
    update(s.hive_locks).where(HL.hl_txnid == bindparam("p_txn")).values(hl_last_heartbeat=bindparam("p_now"))
)
_DELETE_LOCKS = delete(s.hive_locks).where(HL.hl_txnid.in_(bindparam("ids", expanding=True)))
_DELETE_TXN_LOCKS = Prepared(delete(s.hive_locks).where(HL.hl_txnid == bindparam("txn_id")))
_TAKE_WRITE_IDS = Prepared(
    update(s.next_write_id)
    .where(NWI.nwi_database == bindparam("p_db"), NWI.nwi_table == bindparam("p_table"))
    .values(nwi_next=NWI.nwi_next + bindparam("p_n"))
    .returning(NWI.nwi_next)
)
_INSERT_NEXT_WRITE_ID = Prepared(insert(s.next_write_id))
_INSERT_T2W = Prepared(insert(s.txn_to_write_id))
_WRITE_IDS_OF = Prepared(
    select(T2W.t2w_database, T2W.t2w_table, T2W.t2w_writeid).where(T2W.t2w_txnid == bindparam("txn_id"))
)
_WRITE_ID = Prepared(
    select(T2W.t2w_writeid).where(
        T2W.t2w_txnid == bindparam("txn_id"),
        T2W.t2w_database == bindparam("db"),
        T2W.t2w_table == bindparam("table"),
    )
)
_REPLICATED = (
    select(s.repl_txn_map.c.rtm_target_txn_id).where(s.repl_txn_map.c.rtm_target_txn_id == T.txn_id).exists()
)
_COMPONENTS = Prepared(select(s.txn_components).where(TC.tc_txnid == bindparam("txn_id")))
_DELETE_COMPONENTS = Prepared(delete(s.txn_components).where(TC.tc_txnid == bindparam("txn_id")))
_INSERT_COMPONENTS = Prepared(insert(s.txn_components))
_INSERT_COMPLETED = Prepared(insert(s.completed_txn_components))


def txn_str(txn_id: int) -> str:
    return f"txnid:{txn_id}"


def _state(conn: Connection, txn_id: int, *, for_update: bool = False) -> TxnStatus:
    code = (_STATE_FOR_UPDATE if for_update else _STATE).run(conn, {"txn_id": txn_id}).scalar()
    return TxnStatus.UNKNOWN if code is None else TxnStatus(code)


def _raise_unexpected(state: TxnStatus, txn_id: int) -> None:
    """Hive's ``raiseTxnUnexpectedState``: the typed error for a txn that is not open."""
    if state is TxnStatus.ABORTED:
        raise TxnAbortedException(f"Transaction {txn_str(txn_id)} already aborted")
    if state is TxnStatus.COMMITTED:
        raise NoSuchTxnException(f"Transaction {txn_str(txn_id)} is already committed.")
    raise NoSuchTxnException(f"No such transaction {txn_str(txn_id)}")


def require_open(conn: Connection, txn_id: int, *, for_update: bool = False) -> None:
    state = _state(conn, txn_id, for_update=for_update)
    if state is not TxnStatus.OPEN:
        _raise_unexpected(state, txn_id)


def get_txn_state(conn: Connection, txn_id: int) -> TxnStatus:
    return _state(conn, txn_id)


def open_txns(
    conn: Connection,
    n: int,
    *,
    user: str | None,
    host: str | None,
    agent_info: str | None,
    timeout_ms: int | None = None,
) -> list[int]:
    """Open ``n`` txns; ``timeout_ms`` is how long each may go without a heartbeat before it is aborted (None:
    the housekeeper's timeout, as for a replica's txns, which no timeout ends)."""
    ids = _take_txn_ids(conn, n)
    notifications.emit_many(conn, [_insert_open(conn, ids, user, host, agent_info, timeout_ms)])
    return ids


def _take_txn_ids(conn: Connection, n: int) -> list[int]:
    if not 1 <= n <= MAX_OPEN_BATCH:
        raise InvalidObjectException(f"can open 1..{MAX_OPEN_BATCH} transactions at once, not {n}")
    first = take_ids(conn, s.next_txn_id, n)
    return list(range(first, first + n))


def _insert_open(
    conn: Connection,
    ids: list[int],
    user: str | None,
    host: str | None,
    agent_info: str | None,
    timeout_ms: int | None,
) -> dict[str, Any]:
    """Insert the TXNS rows of freshly taken ids; returns their OPEN_TXN event for the caller to emit."""
    now = now_ms()
    _INSERT_TXNS.run(
        conn,
        [
            {
                "txn_id": i,
                "txn_state": TxnStatus.OPEN.value,
                "txn_started": now,
                "txn_last_heartbeat": now,
                "txn_user": user,
                "txn_host": host,
                "txn_agent_info": agent_info,
                "txn_heartbeat_count": 0,
                "txn_timeout_ms": timeout_ms,
            }
            for i in ids
        ],
    )
    return notifications.event(
        "OPEN_TXN", txn_id=ids[0], message={"txn_ids": ids, "user": user, "host": host}
    )


def allocate_table_write_ids(
    conn: Connection, txn_ids: Sequence[int], db: str, table: str
) -> list[tuple[int, int]]:
    """Consecutive write ids for the txns in ascending order; idempotent when all already have one."""
    if not txn_ids:
        raise InvalidObjectException("allocate_table_write_ids needs at least one txn id")
    ordered = sorted(set(txn_ids))
    if not catalog.is_transactional_table(conn, db, table):
        raise InvalidObjectException(f"Table {db}.{table} is not transactional: it has no write ids")
    rows = conn.execute(_STATES_WITH_WRITE_IDS, {"ids": ordered, "db": db, "table": table}).all()
    states = {r.txn_id: r.txn_state for r in rows}
    for txn_id in ordered:
        state = TxnStatus(states[txn_id]) if txn_id in states else TxnStatus.UNKNOWN
        if state is not TxnStatus.OPEN:
            _raise_unexpected(state, txn_id)
    existing = {r.txn_id: r.t2w_writeid for r in rows if r.t2w_writeid is not None}
    if len(existing) == len(ordered):
        return [(t, existing[t]) for t in ordered]
    if existing:
        raise MetaException(
            f"write ids for {db}.{table} were allocated to only some of txns {ordered}: {sorted(existing)}"
        )
    pairs = _take_write_ids(conn, ordered, db, table)
    notifications.emit_many(conn, [_insert_write_ids(conn, pairs, db, table)])
    return pairs


def _take_write_ids(conn: Connection, ordered: list[int], db: str, table: str) -> list[tuple[int, int]]:
    """Consecutive write ids for ``ordered`` (ascending open txns the caller checked have none on the table)."""
    after = _TAKE_WRITE_IDS.run(conn, {"p_db": db, "p_table": table, "p_n": len(ordered)}).scalar()
    if after is None:  # first write ids of the table; a concurrent first insert loses and is retried
        first = 1
        _INSERT_NEXT_WRITE_ID.run(
            conn, {"nwi_database": db, "nwi_table": table, "nwi_next": 1 + len(ordered)}
        )
    else:
        first = after - len(ordered)
    return [(t, first + i) for i, t in enumerate(ordered)]


def _insert_write_ids(conn: Connection, pairs: list[tuple[int, int]], db: str, table: str) -> dict[str, Any]:
    """Insert the TXN_TO_WRITE_ID rows; returns their ALLOC_WRITE_ID event for the caller to emit."""
    _INSERT_T2W.run(
        conn,
        [{"t2w_txnid": t, "t2w_database": db, "t2w_table": table, "t2w_writeid": w} for t, w in pairs],
    )
    return notifications.event(
        "ALLOC_WRITE_ID",
        db=db,
        table=table,
        txn_id=pairs[0][0],
        write_id=pairs[0][1],
        message={"txn_to_write_id": [list(p) for p in pairs]},
    )


def open_txns_with_write_ids(
    conn: Connection,
    n: int,
    db: str,
    table: str,
    *,
    user: str | None,
    host: str | None,
    agent_info: str | None,
    timeout_ms: int | None = None,
) -> list[tuple[int, int]]:
    """``open_txns`` + ``allocate_table_write_ids`` in one DB transaction (Hive streaming's batch open).

    Both counters are taken first and the two events written in one statement: every statement between taking
    ``NEXT_TXN_ID`` and the commit holds up all other openers.
    """
    if not catalog.is_transactional_table(conn, db, table):
        raise InvalidObjectException(f"Table {db}.{table} is not transactional: it has no write ids")
    ids = _take_txn_ids(conn, n)
    pairs = _take_write_ids(conn, ids, db, table)
    opened = _insert_open(conn, ids, user, host, agent_info, timeout_ms)
    notifications.emit_many(conn, [opened, _insert_write_ids(conn, pairs, db, table)])
    return pairs


def get_write_id(conn: Connection, txn_id: int, db: str, table: str) -> int | None:
    return _WRITE_ID.run(conn, {"txn_id": txn_id, "db": db, "table": table}).scalar()


def _commit_key_value(conn: Connection, txn_id: int, key: str | None, value: str | None) -> None:
    """Store ``key=value`` as a property of every table the txn has a write id for (exactly-once sinks)."""
    if key is None and value is None:
        return
    if key is None or value is None:
        raise InvalidObjectException("commit key and value must be given together")
    if not key.startswith("_meta"):
        raise InvalidObjectException(f"commit key must start with '_meta', got {key!r}")
    tables = (
        conn.execute(
            select(s.tbls.c.tbl_id)
            .join(
                s.txn_to_write_id,
                and_(T2W.t2w_database == s.tbls.c.db_name, T2W.t2w_table == s.tbls.c.tbl_name),
            )
            .where(T2W.t2w_txnid == txn_id)
        )
        .scalars()
        .all()
    )
    if not tables:
        raise InvalidObjectException(f"Transaction {txn_str(txn_id)} wrote no table to attach {key!r} to")
    for tbl_id in tables:
        catalog.set_properties(conn, tbl_id, {key: value})


def _write_conflict(
    conn: Connection, txn_id: int, components: Sequence[tuple[str, str | None, str | None, str]]
) -> str | None:
    """First-committer-wins: a txn that committed after ours started updated/deleted the same partition."""
    ws = s.write_set.c
    for db, table, partition, op in components:
        if not OperationType(op).is_update_delete:
            continue
        part_match = (
            true() if partition is None else or_(ws.ws_partition.is_(None), ws.ws_partition == partition)
        )
        hit = conn.execute(
            select(ws.ws_txnid, ws.ws_partition)
            .where(
                ws.ws_database == db,
                ws.ws_table == table,
                part_match,
                ws.ws_commit_id >= txn_id,
                ws.ws_txnid != txn_id,
                ws.ws_operation_type.in_([OperationType.UPDATE.value, OperationType.DELETE.value]),
            )
            .limit(1)
        ).first()
        if hit is not None:
            where = f"{db}.{table}" + (f"/{hit.ws_partition}" if hit.ws_partition else "")
            return (
                f"Aborting {txn_str(txn_id)} due to a write conflict on {where} committed by "
                f"{txn_str(hit.ws_txnid)}"
            )
    return None


def latest_txn_id_in_conflict(conn: Connection, txn_id: int, db: str, table: str) -> int:
    """The latest txn that updated or deleted rows of ``db.table`` and committed after ``txn_id`` started (0:
    none), as Hive 4's ``get_latest_txnid_in_conflict``: a writer that waited for its lock finds out whether its
    commit would lose to it, and can start over in a new txn before it writes anything."""
    ws = s.write_set.c
    found = conn.execute(
        select(func.max(ws.ws_txnid)).where(
            ws.ws_database == db,
            ws.ws_table == table,
            ws.ws_commit_id >= txn_id,
            ws.ws_txnid != txn_id,
            ws.ws_operation_type.in_([OperationType.UPDATE.value, OperationType.DELETE.value]),
        )
    ).scalar()
    return int(found or 0)


def replace_txn(
    conn: Connection,
    txn_id: int,
    db: str,
    table: str,
    *,
    user: str | None,
    host: str | None,
    agent_info: str | None,
    timeout_ms: int | None = None,
) -> tuple[int, int]:
    """Open a txn with a write id on ``db.table`` that takes over open txn ``txn_id``'s locks, and abort
    ``txn_id``, in one DB transaction: (new txn id, write id).

    For a writer whose snapshot went stale while it waited for its lock: the new txn starts after every commit
    so far, and the lock it inherits keeps its turn (a new request would queue behind every other waiter).
    """
    require_open(conn, txn_id, for_update=True)
    pairs = open_txns_with_write_ids(
        conn, 1, db, table, user=user, host=host, agent_info=agent_info, timeout_ms=timeout_ms
    )
    new_id = pairs[0][0]
    conn.execute(update(s.hive_locks).where(HL.hl_txnid == txn_id).values(hl_txnid=new_id))
    _abort_open(conn, [txn_id], f"replaced by {txn_str(new_id)}")
    return pairs[0]


def _record_writes(
    conn: Connection, txn_id: int, writes: Sequence[TableWrite]
) -> tuple[Sequence[Any], list[dict[str, Any]]]:
    """What ``add_dynamic_partitions`` and ``add_write_notification`` record, for each table written.

    Each table's write id must be the one allocated to the txn. Returns the txn's write-id rows and its
    ACID_WRITE events, which the caller emits with its own.
    """
    written = _WRITE_IDS_OF.run(conn, {"txn_id": txn_id}).all()
    allocated = {f"{r.t2w_database}.{r.t2w_table}": r.t2w_writeid for r in written}
    events: list[dict[str, Any]] = []
    for w in writes:
        db, table = w.table.split(".", 1)
        if allocated.get(w.table) != w.write_id:
            raise InvalidObjectException(
                f"{txn_str(txn_id)} has write id {allocated.get(w.table)} on {w.table}, not {w.write_id}"
            )
        by_op: dict[OperationType, list[str | None]] = {}
        for partition, op in w.components.items():
            by_op.setdefault(op, []).append(partition)
        for op, partitions in by_op.items():
            _insert_components(conn, txn_id, db, table, w.write_id, partitions, op)
        events.extend(
            _write_event(txn_id, w.write_id, db, table, partition, files)
            for partition, files in w.files.items()
        )
    return written, events


def commit_txn(
    conn: Connection,
    txn_id: int,
    key: str | None,
    value: str | None,
    *,
    writes: Sequence[TableWrite] = (),
) -> WriteConflictException | None:
    """Commit; on a write conflict the txn is aborted in this DB transaction and the error is returned.

    ``writes`` (components and files per table) are recorded first, in the same DB transaction, saving the
    client a round trip each (Hive's ``addDynamicPartitions`` + ``addWriteNotificationLog``).
    """
    state = _state(conn, txn_id, for_update=True)
    if state is TxnStatus.COMMITTED:
        return None
    if state is not TxnStatus.OPEN:
        _raise_unexpected(state, txn_id)
    written: Sequence[Any] | None = None
    events: list[dict[str, Any]] = []
    if writes:
        written, events = _record_writes(conn, txn_id, writes)
    components = [
        (r.tc_database, r.tc_table, r.tc_partition, r.tc_operation_type, r.tc_writeid)
        for r in _COMPONENTS.run(conn, {"txn_id": txn_id})
    ]
    update_delete = any(OperationType(c[3]).is_update_delete for c in components)
    commit_id = None
    if update_delete:
        # Hive's S4U on NEXT_TXN_ID, before the conflict check: commits that update or delete and txn opens
        # go one at a time from here to the end of this transaction. Otherwise (PostgreSQL, READ COMMITTED) a
        # txn opened meanwhile gets an id above the commit id and a snapshot without this commit, and a
        # concurrent commit checks conflicts without seeing this one's WRITE_SET: both lose an update.
        commit_id = peek_next(conn, s.next_txn_id, lock=True) - 1
    conflict = _write_conflict(conn, txn_id, [c[:4] for c in components])
    if conflict is not None:
        if events:
            notifications.emit_many(conn, events)
        abort_txns(conn, [txn_id], reason="write conflict")
        return WriteConflictException(conflict)
    _commit_key_value(conn, txn_id, key, value)
    now = now_ms()
    if components:
        _INSERT_COMPLETED.run(
            conn,
            [
                {
                    "ctc_txnid": txn_id,
                    "ctc_database": db,
                    "ctc_table": tbl,
                    "ctc_partition": part,
                    "ctc_timestamp": now,
                    "ctc_writeid": wid,
                    "ctc_update_delete": "Y" if update_delete else "N",
                }
                for db, tbl, part, _op, wid in components
            ],
        )
    if commit_id is not None:
        conn.execute(
            insert(s.write_set),
            [
                {
                    "ws_database": db,
                    "ws_table": tbl,
                    "ws_partition": part,
                    "ws_txnid": txn_id,
                    "ws_commit_id": commit_id,
                    "ws_operation_type": op,
                }
                for db, tbl, part, op, _wid in components
                if OperationType(op).is_update_delete
            ],
        )
    if components:
        _DELETE_COMPONENTS.run(conn, {"txn_id": txn_id})
    _DELETE_TXN_LOCKS.run(conn, {"txn_id": txn_id})
    _SET_STATE.run(conn, {"p_txn": txn_id, "p_state": TxnStatus.COMMITTED.value})
    if written is None:
        written = _WRITE_IDS_OF.run(conn, {"txn_id": txn_id}).all()
    write_ids = {f"{r.t2w_database}.{r.t2w_table}": r.t2w_writeid for r in written}
    commit_event = notifications.event(
        "COMMIT_TXN",
        txn_id=txn_id,
        message={
            "write_ids": write_ids,
            "key": key,
            "value": value,
            "partitions": sorted(
                {f"{db}.{tbl}" + (f"/{part}" if part else "") for db, tbl, part, _o, _w in components}
            ),
        },
    )
    notifications.emit_many(conn, [*events, commit_event])  # the txn's writes, then its commit: one statement
    fault_point("metastore.commit")  # the commit's work is done, its DB transaction not yet committed
    return None


def abort_txns(conn: Connection, txn_ids: Sequence[int], *, reason: str = "client") -> list[int]:
    """Abort the open txns among ``txn_ids`` (already aborted: no-op); unknown/committed ids raise."""
    ordered = sorted(set(txn_ids))
    states = dict(conn.execute(_STATES_FOR_UPDATE, {"ids": ordered}).all())
    for txn_id in ordered:
        state = TxnStatus(states[txn_id]) if txn_id in states else TxnStatus.UNKNOWN
        if state not in (TxnStatus.OPEN, TxnStatus.ABORTED):
            _raise_unexpected(state, txn_id)
    opened = [t for t in ordered if states[t] == TxnStatus.OPEN.value]
    _abort_open(conn, opened, reason)
    return opened


def _abort_open(conn: Connection, txn_ids: list[int], reason: str) -> None:
    if not txn_ids:
        return
    conn.execute(_ABORT_OPEN, {"p_ids": txn_ids})
    conn.execute(_DELETE_LOCKS, {"ids": txn_ids})
    notifications.emit(conn, "ABORT_TXN", txn_id=txn_ids[0], message={"txn_ids": txn_ids, "reason": reason})


def heartbeat(conn: Connection, txn_id: int) -> None:
    params = {"p_txn": txn_id, "p_now": now_ms()}
    if not _HEARTBEAT.run(conn, params).rowcount:
        _raise_unexpected(_state(conn, txn_id), txn_id)
    _HEARTBEAT_LOCKS.run(conn, params)


def heartbeat_txn_range(conn: Connection, lo: int, hi: int) -> HeartbeatTxnRangeResponse:
    """Heartbeat the open txns in [lo, hi]; report the aborted ones and the ones not open or never opened."""
    now = now_ms()
    in_range = and_(T.txn_id >= lo, T.txn_id <= hi)
    conn.execute(
        update(s.txns)
        .where(in_range, T.txn_state == TxnStatus.OPEN.value)
        .values(txn_last_heartbeat=now, txn_heartbeat_count=T.txn_heartbeat_count + 1)
    )
    conn.execute(
        update(s.hive_locks)
        .where(s.hive_locks.c.hl_txnid >= lo, s.hive_locks.c.hl_txnid <= hi)
        .values(hl_last_heartbeat=now)
    )
    states = dict(conn.execute(select(T.txn_id, T.txn_state).where(in_range)).all())
    aborted = [t for t in range(lo, hi + 1) if states.get(t) == TxnStatus.ABORTED.value]
    nosuch = [t for t in range(lo, hi + 1) if states.get(t) in (None, TxnStatus.COMMITTED.value)]
    return HeartbeatTxnRangeResponse(aborted=aborted, nosuch=nosuch)


def get_open_txns(conn: Connection) -> ValidTxnList:
    hwm = peek_next(conn, s.next_txn_id) - 1
    rows = conn.execute(
        select(T.txn_id, T.txn_state).where(
            T.txn_state.in_([TxnStatus.OPEN.value, TxnStatus.ABORTED.value]), T.txn_id <= hwm
        )
    ).all()
    opened = [r.txn_id for r in rows if r.txn_state == TxnStatus.OPEN.value]
    aborted = [r.txn_id for r in rows if r.txn_state == TxnStatus.ABORTED.value]
    return ValidTxnList(hwm, tuple(opened), tuple(aborted), min_open_txn=min(opened, default=LONG_MAX))


def get_valid_write_ids(conn: Connection, db: str, table: str) -> ValidWriteIdList:
    """The table's snapshot now: write ids of open txns are open exceptions, of aborted txns aborted ones."""
    catalog.require_table_id(conn, db, table)
    nwi = s.next_write_id.c
    nxt = conn.execute(select(nwi.nwi_next).where(nwi.nwi_database == db, nwi.nwi_table == table)).scalar()
    hwm = (nxt or 1) - 1
    # Two index-driven steps rather than a join: planners without fresh statistics pick scans for the join.
    states = dict(
        conn.execute(
            select(T.txn_id, T.txn_state).where(
                T.txn_state.in_([TxnStatus.OPEN.value, TxnStatus.ABORTED.value])
            )
        ).all()
    )
    opened: list[int] = []
    aborted: list[int] = []
    ids = sorted(states)
    for chunk in range(0, len(ids), IN_CHUNK):
        for txn_id, write_id in conn.execute(
            select(T2W.t2w_txnid, T2W.t2w_writeid).where(
                T2W.t2w_txnid.in_(ids[chunk : chunk + IN_CHUNK]),
                T2W.t2w_database == db,
                T2W.t2w_table == table,
                T2W.t2w_writeid <= hwm,
            )
        ):
            (opened if states[txn_id] == TxnStatus.OPEN.value else aborted).append(write_id)
    return write_id_list_from_states(f"{db}.{table}", hwm, opened, aborted)


def show_txns(conn: Connection) -> list[TxnInfo]:
    rows = conn.execute(
        select(s.txns)
        .where(T.txn_state.in_([TxnStatus.OPEN.value, TxnStatus.ABORTED.value]))
        .order_by(T.txn_id)
    ).all()
    return [
        TxnInfo(
            r.txn_id,
            TxnStatus(r.txn_state),
            r.txn_started,
            r.txn_last_heartbeat,
            r.txn_user,
            r.txn_host,
            r.txn_agent_info,
        )
        for r in rows
    ]


def record_components(
    conn: Connection,
    txn_id: int,
    db: str,
    table: str,
    partitions: Sequence[str | None],
    op: OperationType,
    write_id: int | None = None,
) -> None:
    """TXN_COMPONENTS rows: where this txn wrote (the compactor's and cleaner's input). ``write_id``: the txn's
    write id for the table when the caller knows it (else it is looked up)."""
    if write_id is None:
        write_id = get_write_id(conn, txn_id, db, table)
    _insert_components(conn, txn_id, db, table, write_id, partitions, op)


def _insert_components(
    conn: Connection,
    txn_id: int,
    db: str,
    table: str,
    write_id: int | None,
    partitions: Sequence[str | None],
    op: OperationType,
) -> None:
    _INSERT_COMPONENTS.run(
        conn,
        [
            {
                "tc_txnid": txn_id,
                "tc_database": db,
                "tc_table": table,
                "tc_partition": p,
                "tc_operation_type": op.value,
                "tc_writeid": write_id,
            }
            for p in partitions
        ],
    )


def add_dynamic_partitions(
    conn: Connection,
    txn_id: int,
    write_id: int,
    db: str,
    table: str,
    partition_names: Sequence[str],
    op: OperationType,
) -> None:
    require_open(conn, txn_id, for_update=True)
    allocated = get_write_id(conn, txn_id, db, table)
    if allocated != write_id:
        raise InvalidObjectException(
            f"{txn_str(txn_id)} has write id {allocated} on {db}.{table}, not {write_id}"
        )
    if partition_names:
        record_components(conn, txn_id, db, table, list(partition_names), op)


def add_write_notification(
    conn: Connection,
    txn_id: int,
    write_id: int,
    db: str,
    table: str,
    partition: str | None,
    files: Sequence[str | WrittenFile],
) -> None:
    require_open(conn, txn_id)
    allocated = get_write_id(conn, txn_id, db, table)
    if allocated != write_id:
        raise InvalidObjectException(
            f"{txn_str(txn_id)} has write id {allocated} on {db}.{table}, not {write_id}"
        )
    notifications.emit_many(conn, [_write_event(txn_id, write_id, db, table, partition, files)])


def _write_event(
    txn_id: int,
    write_id: int,
    db: str,
    table: str,
    partition: str | None,
    files: Sequence[str | WrittenFile],
) -> dict[str, Any]:
    """The ACID_WRITE event: ``files`` (paths) and, for files described in full, ``written`` (what a replica
    needs to copy and verify them, see :class:`WrittenFile`)."""
    message: dict[str, Any] = {"files": [f if isinstance(f, str) else f.path for f in files]}
    written = [f.to_json() for f in files if isinstance(f, WrittenFile)]
    if written:
        message["written"] = written
    return notifications.event(
        "ACID_WRITE",
        db=db,
        table=table,
        partition=partition,
        txn_id=txn_id,
        write_id=write_id,
        message=message,
    )


def perform_timeouts(conn: Connection, txn_timeout_ms: int) -> list[int]:
    """Abort open txns not heartbeated within their own timeout (``txn_timeout_ms`` for those that recorded
    none); drop txn-less locks silent for their own timeout, and empty aborted txns."""
    now = now_ms()
    stale = list(
        conn.execute(
            select(T.txn_id)
            .where(
                T.txn_state == TxnStatus.OPEN.value,
                T.txn_last_heartbeat + func.coalesce(T.txn_timeout_ms, txn_timeout_ms) < now,
                ~_REPLICATED,  # a replica's txns for source txns end when the source's do, never by timeout
            )
            .order_by(T.txn_id)
            .with_for_update()
        ).scalars()
    )
    _abort_open(conn, stale, "timeout")
    hl = s.hive_locks.c
    conn.execute(
        delete(s.hive_locks).where(
            hl.hl_txnid == 0, hl.hl_last_heartbeat + func.coalesce(hl.hl_timeout_ms, txn_timeout_ms) < now
        )
    )
    # Hive's cleanEmptyAbortedTxns, delayed a further timeout so a late commit still hears "aborted".
    has_components = select(TC.tc_txnid).where(TC.tc_txnid == T.txn_id).exists()
    has_write_ids = select(T2W.t2w_txnid).where(T2W.t2w_txnid == T.txn_id).exists()
    conn.execute(
        delete(s.txns).where(
            T.txn_state == TxnStatus.ABORTED.value,
            T.txn_last_heartbeat + 2 * func.coalesce(T.txn_timeout_ms, txn_timeout_ms) < now,
            ~has_components,
            ~has_write_ids,
        )
    )
    return stale


def completed_components(conn: Connection, db: str, table: str, since_txn: int) -> list[CompletedComponent]:
    c = s.completed_txn_components.c
    rows = conn.execute(
        select(s.completed_txn_components)
        .where(c.ctc_database == db, c.ctc_table == table, c.ctc_txnid > since_txn)
        .order_by(c.ctc_txnid)
    ).all()
    return [
        CompletedComponent(
            r.ctc_txnid,
            r.ctc_database,
            r.ctc_table,
            r.ctc_partition,
            r.ctc_writeid,
            r.ctc_update_delete == "Y",
            r.ctc_timestamp,
        )
        for r in rows
    ]
