"""Replication state in the metastore: a replica applies a source's events, a source keeps what followers need.

On a replica every source event becomes a list of operations (:data:`ReplOp`) applied by :func:`apply` in one DB
transaction together with the event's id (``repl_state``), so a loader killed at any point re-applies exactly the
events whose effect is not there. Source txns get replica txns of their own (``repl_txn_map``, Hive's
REPL_TXN_MAP), opened in source order, so the replica's snapshots order writes as the source's do; write ids are
the source's. Every operation tolerates finding its effect already there: a bootstrap's snapshot may already
show what the first incremental events repeat.

On a source, ``repl_followers`` records how far each follower has applied the log: the cleaner keeps a
compaction's inputs until every live follower has applied its COMPACTED event.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from acidstream.acid.types import Column, parse_type
from acidstream.errors import NoSuchObjectException
from acidstream.metastore.models import TxnStatus
from acidstream.metastore.replops import (
    POLICY_PROPERTY,
    REPL_AGENT,
    AbortTxns,
    AbortUncarried,
    AddPartition,
    AllocWriteIds,
    AlterTable,
    CommitTxn,
    CreateDatabase,
    CreateTable,
    DropDatabase,
    DropPartition,
    DropTable,
    FileStates,
    OpenTxns,
    RecordCompaction,
    ReplOp,
    ReplState,
    RetireTable,
    SeedWriteIds,
)
from acidstream.metastore.sql import catalog, compaction, txns
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms

CQ = s.compaction_queue.c
RTM = s.repl_txn_map.c
TX = s.txns.c
RS = s.repl_state.c
RF = s.repl_files.c
T2W = s.txn_to_write_id.c
NWI = s.next_write_id.c


@dataclass
class _Applying:
    conn: Connection
    warehouse: str
    policy: str
    dropped: list[str] = field(default_factory=list)
    seed_txn: int | None = None


def apply(
    conn: Connection,
    warehouse: str,
    policy: str,
    source: str,
    event_id: int,
    event_time: int,
    ops: Sequence[ReplOp],
    *,
    bootstrap: bool = False,
) -> list[str]:
    """Apply ``ops`` and record ``event_id`` as applied; returns locations of dropped tables (whose files the
    caller deletes once this commits). ``bootstrap``: ``event_id`` is the source point the bootstrap copied."""
    run = _Applying(conn, warehouse, policy)
    for op in ops:
        _apply_one(run, op)
    if run.seed_txn is not None:
        txns.commit_txn(conn, run.seed_txn, None, None)
    _record(conn, policy, source, event_id, event_time, bootstrap)
    return run.dropped


def _apply_one(run: _Applying, op: ReplOp) -> None:
    conn = run.conn
    if isinstance(op, CreateDatabase):
        catalog.create_database(conn, run.warehouse, op.name, if_not_exists=True, comment=op.comment)
    elif isinstance(op, DropDatabase):
        for name in catalog.list_tables(conn, op.name):
            run.dropped += _drop_table(conn, op.name, name)
        run.dropped += catalog.drop_database(conn, op.name, cascade=True, if_exists=True)
    elif isinstance(op, CreateTable):
        catalog.create_table(
            conn,
            run.warehouse,
            op.db,
            op.name,
            [Column(n, parse_type(t)) for n, t in op.columns],
            partition_keys=[Column(n, parse_type(t)) for n, t in op.partition_keys],
            bucket_columns=op.bucket_columns,
            num_buckets=op.num_buckets,
            properties={**dict(op.properties), POLICY_PROPERTY: run.policy},  # a replica's replica: its own
            if_not_exists=True,
            location=op.location,
        )
    elif isinstance(op, DropTable):
        run.dropped += _drop_table(conn, op.db, op.name)
    elif isinstance(op, RetireTable):
        _retire_table(conn, op)
    elif isinstance(op, AlterTable):
        with contextlib.suppress(NoSuchObjectException):  # dropped later on the source: the drop follows
            props = dict(op.properties)
            if POLICY_PROPERTY in props:  # the source is a replica itself: the mark here stays this policy's
                props[POLICY_PROPERTY] = run.policy
            if op.columns:
                columns = [Column(n, parse_type(t)) for n, t in op.columns]
                catalog.alter_table_columns(conn, op.db, op.name, columns)
            if props or not op.columns:
                catalog.alter_table_properties(conn, op.db, op.name, props)
    elif isinstance(op, AddPartition):
        catalog.add_partition(conn, op.db, op.table, op.values, if_not_exists=True)
    elif isinstance(op, DropPartition):
        if catalog.get_partition(conn, op.db, op.table, op.values) is not None:
            catalog.drop_partition(conn, op.db, op.table, op.values)
    elif isinstance(op, OpenTxns):
        _open(run, op.src_txn_ids)
    elif isinstance(op, AllocWriteIds):
        mapped = target_txns(conn, run.policy, [t for t, _ in op.pairs])
        _insert_write_ids(conn, op.db, op.table, [(mapped[t], w) for t, w in op.pairs if t in mapped])
    elif isinstance(op, CommitTxn):
        target = target_txns(conn, run.policy, [op.src_txn_id]).get(op.src_txn_id)
        if target is not None and txns.get_txn_state(conn, target) is TxnStatus.OPEN:
            txns.commit_txn(conn, target, None, None)
    elif isinstance(op, AbortTxns):
        mapped = target_txns(conn, run.policy, op.src_txn_ids)
        live = [t for t in mapped.values() if txns.get_txn_state(conn, t) is TxnStatus.OPEN]
        if live:
            txns.abort_txns(conn, live, reason="aborted on the source")
    elif isinstance(op, AbortUncarried):
        _abort_uncarried(run, set(op.carried_open))
    elif isinstance(op, SeedWriteIds):
        if run.seed_txn is None:
            run.seed_txn = txns.open_txns(conn, 1, user=None, host=None, agent_info=REPL_AGENT)[0]
        _insert_write_ids(conn, op.db, op.table, [(run.seed_txn, op.write_id)])
    elif isinstance(op, RecordCompaction):
        if catalog.is_transactional_table(conn, op.db, op.table):
            compaction.record_replicated(
                conn, op.db, op.table, op.partition, op.kind, op.highest_write_id, dict(op.meta)
            )
    elif isinstance(op, FileStates):
        _file_states(conn, op)
    else:  # pragma: no cover - the union is exhaustive
        raise TypeError(f"unknown replication operation {op!r}")


def _drop_table(conn: Connection, db: str, name: str) -> list[str]:
    """Drop ``db.name``; the directories to delete once this commits: its own and those of its retired copies
    still waiting for readers (a table created again under its name may reuse one)."""
    waiting = [f"{meta['location']}/{meta['inputs'][0]}" for meta in _retired(conn, db, name)]
    return [*catalog.drop_table(conn, db, name, if_exists=True), *waiting]


def _retire_table(conn: Connection, op: RetireTable) -> None:
    waiting = _retired(conn, op.db, op.name)  # the drop deletes the table's queue entries: kept as new ones
    dropped = catalog.drop_table(conn, op.db, op.name, if_exists=True)
    if not dropped:
        return
    parent, directory = dropped[0].rstrip("/").rsplit("/", 1)
    mine = {
        "location": parent,
        "inputs": [directory],
        "outputs": [],
        "replicated": op.event_id,
        "retired": True,
    }
    for meta in [*waiting, mine]:
        compaction.record_replicated(conn, op.db, op.name, None, "major", None, meta)


def _retired(conn: Connection, db: str, name: str) -> list[dict[str, Any]]:
    """The cleaning entries of ``db.name``'s retired copies not deleted yet."""
    rows = conn.execute(
        select(CQ.cq_meta_info).where(
            CQ.cq_database == db, CQ.cq_table == name, CQ.cq_state == "r", CQ.cq_initiator_id == "replication"
        )
    ).scalars()
    metas = [json.loads(m or "{}") for m in rows]
    return [m for m in metas if m.get("retired")]


def _abort_uncarried(run: _Applying, carried: set[int]) -> None:
    rows = run.conn.execute(
        select(RTM.rtm_src_txn_id, RTM.rtm_target_txn_id)
        .join(s.txns, TX.txn_id == RTM.rtm_target_txn_id)
        .where(RTM.rtm_repl_policy == run.policy, TX.txn_state == TxnStatus.OPEN.value)
    ).all()
    gone = sorted(tgt for src, tgt in rows if src not in carried)
    if gone:
        txns.abort_txns(run.conn, gone, reason="not open in a newer bootstrap of the source")


def _open(run: _Applying, src_ids: Sequence[int]) -> None:
    known = target_txns(run.conn, run.policy, src_ids)
    new = sorted(t for t in set(src_ids) if t not in known)
    for chunk in range(0, len(new), txns.MAX_OPEN_BATCH):
        part = new[chunk : chunk + txns.MAX_OPEN_BATCH]
        opened = txns.open_txns(run.conn, len(part), user=None, host=None, agent_info=REPL_AGENT)
        run.conn.execute(
            insert(s.repl_txn_map),
            [
                {"rtm_repl_policy": run.policy, "rtm_src_txn_id": src, "rtm_target_txn_id": tgt}
                for src, tgt in zip(part, opened, strict=True)
            ],
        )


def _insert_write_ids(conn: Connection, db: str, table: str, pairs: Sequence[tuple[int, int]]) -> None:
    """TXN_TO_WRITE_ID rows with the source's write ids (each txn and write id at most once per table), and
    NEXT_WRITE_ID past them."""
    if not pairs:
        return
    mine = (T2W.t2w_database == db, T2W.t2w_table == table)
    taken = conn.execute(
        select(T2W.t2w_txnid, T2W.t2w_writeid).where(
            *mine, T2W.t2w_writeid.in_([w for _, w in pairs]) | T2W.t2w_txnid.in_([t for t, _ in pairs])
        )
    ).all()
    used_txns, used_wids = {r.t2w_txnid for r in taken}, {r.t2w_writeid for r in taken}
    rows = [
        {"t2w_txnid": t, "t2w_database": db, "t2w_table": table, "t2w_writeid": w}
        for t, w in pairs
        if t not in used_txns and w not in used_wids
    ]
    if rows:
        conn.execute(insert(s.txn_to_write_id), rows)
    after = max(w for _, w in pairs) + 1
    current = conn.execute(
        select(NWI.nwi_next).where(NWI.nwi_database == db, NWI.nwi_table == table)
    ).scalar()
    if current is None:
        conn.execute(insert(s.next_write_id).values(nwi_database=db, nwi_table=table, nwi_next=after))
    elif current < after:
        conn.execute(
            update(s.next_write_id)
            .where(NWI.nwi_database == db, NWI.nwi_table == table)
            .values(nwi_next=after)
        )


def _file_states(conn: Connection, op: FileStates) -> None:
    for prefix in op.forget:
        if prefix.endswith("/"):
            conn.execute(delete(s.repl_files).where(RF.rf_path.startswith(prefix, autoescape=True)))
        else:
            conn.execute(delete(s.repl_files).where(RF.rf_path == prefix))
    for path, length, crc in op.files:
        updated = conn.execute(
            update(s.repl_files).where(RF.rf_path == path).values(rf_length=length, rf_crc32=crc)
        ).rowcount
        if not updated:
            conn.execute(insert(s.repl_files).values(rf_path=path, rf_length=length, rf_crc32=crc))


def _record(
    conn: Connection, policy: str, source: str, event_id: int, event_time: int, bootstrap: bool
) -> None:
    values: dict[str, Any] = {
        "rs_source": source,
        "rs_last_event_id": event_id,
        "rs_last_event_time": event_time,
        "rs_applied_time": now_ms(),
    }
    if bootstrap:
        values["rs_bootstrap_event_id"] = event_id
    if not conn.execute(update(s.repl_state).where(RS.rs_repl_policy == policy).values(values)).rowcount:
        values.setdefault("rs_bootstrap_event_id", event_id)
        conn.execute(insert(s.repl_state).values(rs_repl_policy=policy, **values))


# --- reading a replica's state ---------------------------------------------------------------------------------------


def state(conn: Connection, policy: str) -> ReplState | None:
    row = conn.execute(select(s.repl_state).where(RS.rs_repl_policy == policy)).first()
    if row is None:
        return None
    return ReplState(
        row.rs_repl_policy,
        row.rs_source,
        row.rs_last_event_id,
        row.rs_last_event_time,
        row.rs_applied_time,
        row.rs_bootstrap_event_id,
    )


def states(conn: Connection) -> list[ReplState]:
    policies = conn.execute(select(RS.rs_repl_policy).order_by(RS.rs_repl_policy)).scalars().all()
    return [st for p in policies if (st := state(conn, p)) is not None]


def target_txns(conn: Connection, policy: str, src_ids: Sequence[int]) -> dict[int, int]:
    """Replica txn of each mapped source txn."""
    out: dict[int, int] = {}
    ids = sorted(set(src_ids))
    for chunk in range(0, len(ids), txns.IN_CHUNK):
        for src, tgt in conn.execute(
            select(RTM.rtm_src_txn_id, RTM.rtm_target_txn_id).where(
                RTM.rtm_repl_policy == policy, RTM.rtm_src_txn_id.in_(ids[chunk : chunk + txns.IN_CHUNK])
            )
        ):
            out[src] = tgt
    return out


def write_id_txns(conn: Connection, db: str, table: str, write_ids: Sequence[int]) -> dict[int, int]:
    """Write id → txn of ``db.table`` (on a source, for the bootstrap's open and aborted write ids)."""
    out: dict[int, int] = {}
    ids = sorted(set(write_ids))
    for chunk in range(0, len(ids), txns.IN_CHUNK):
        for txn, wid in conn.execute(
            select(T2W.t2w_txnid, T2W.t2w_writeid).where(
                T2W.t2w_database == db,
                T2W.t2w_table == table,
                T2W.t2w_writeid.in_(ids[chunk : chunk + txns.IN_CHUNK]),
            )
        ):
            out[wid] = txn
    return out


def file_state(conn: Connection, path: str) -> tuple[int, int] | None:
    """(length, CRC-32) copied so far of a replicated file."""
    row = conn.execute(select(RF.rf_length, RF.rf_crc32).where(RF.rf_path == path)).first()
    return None if row is None else (int(row.rf_length), int(row.rf_crc32))
