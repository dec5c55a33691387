"""The compaction queue (Hive's COMPACTION_QUEUE / COMPLETED_COMPACTIONS) and the initiator's queries.

initiated → working (a worker claims the entry and opens its compactor txn) → working with ``publish_id`` set
(its output is being moved into place) → ready for cleaning (``mark_compacted``: only after a publication, so
no entry reaches "succeeded" without its files having changed) → succeeded (``mark_cleaned``). A worker may
instead refuse (nothing to compact) or fail; a dead worker's entry (compactor txn no longer open) is reverted to
initiated before its publication, and rolled forward after it (``find_abandoned``). Finished entries move to
COMPLETED_COMPACTIONS.

Each function runs inside the caller's DB transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update

from acidstream.acid.partitions import make_part_name, parse_part_name
from acidstream.errors import (
    CompactionDeclined,
    InvalidObjectException,
    InvalidPartition,
    NoSuchObjectException,
)
from acidstream.metastore.models import (
    CompactionInfo,
    PotentialCompaction,
    Publication,
    TxnStatus,
)
from acidstream.metastore.sql import catalog, followers, notifications, readers, txns
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms, take_ids

CQ = s.compaction_queue.c
CC = s.completed_compactions.c
SR = s.snapshot_readers.c
STATES = {
    "i": "initiated",
    "w": "working",
    "r": "ready for cleaning",
    "f": "failed",
    "s": "succeeded",
    "a": "did not initiate",
    "c": "refused",
}
KINDS = {"major": "a", "minor": "i"}
_KIND_NAMES = {v: k for k, v in KINDS.items()}
#: COMPLETED_COMPACTIONS rows kept per table/partition and state (``hive.compactor.history.retention.*``).
HISTORY_RETENTION = {"s": 3, "f": 3, "a": 2, "c": 3}


def _info(row: Any, prefix: str) -> CompactionInfo:
    def col(name: str) -> Any:
        return getattr(row, f"{prefix}_{name}")

    meta = col("meta_info")
    return CompactionInfo(
        id=col("id"),
        db=col("database"),
        table=col("table"),
        partition=col("partition"),
        kind=_KIND_NAMES[col("type")],
        state=STATES[col("state")],
        worker_id=col("worker_id"),
        enqueue_time=col("enqueue_time"),
        start=col("start"),
        end=col("end"),
        highest_write_id=col("highest_write_id"),
        error_message=col("error_message"),
        txn_id=col("txn_id"),
        initiator_id=col("initiator_id"),
        attempts=col("attempts") or 0,
        publish_id=col("publish_id"),
        next_reader_id=col("next_reader_id"),
        commit_time=col("commit_time"),
        meta=json.loads(meta) if meta else {},
    )


def _target(table: Any, db: str, name: str, partition: str | None) -> Any:
    """WHERE clause for one table/partition of a queue-like table (``table`` is its ``.c``)."""
    prefix = "cq" if table is CQ else "cc"
    part = getattr(table, f"{prefix}_partition")
    return and_(
        getattr(table, f"{prefix}_database") == db,
        getattr(table, f"{prefix}_table") == name,
        part.is_(None) if partition is None else part == partition,
    )


def normalise_partition(conn: Connection, db: str, table: str, partition: str | None) -> str | None:
    """The stored name of an existing partition of ``db.table`` given as ``k=v[/k2=v2]``.

    Partitioned tables are compacted one partition at a time (Hive: "You must specify a partition to compact
    for partitioned tables"); an unpartitioned table takes none.
    """
    fields = catalog.load_table(conn, db, table)
    keys = [k.name for k in fields["partition_keys"]]
    if not keys:
        if partition is not None:
            raise InvalidPartition(partition, f"{db}.{table} is not partitioned")
        return None
    if partition is None:
        raise InvalidObjectException(
            f"You must specify a partition to compact for partitioned table {db}.{table}"
        )
    spec = {k.lower(): v for k, v in parse_part_name(partition).items()}
    if sorted(spec) != sorted(keys):
        raise InvalidPartition(partition, f"{db}.{table} is partitioned by {keys}")
    name = make_part_name(keys, [spec[k] for k in keys])
    p = s.partitions.c
    found = conn.execute(select(p.part_id).where(p.tbl_id == fields["table_id"], p.part_name == name)).first()
    if found is None:
        raise NoSuchObjectException(f"Partition {name} of {db}.{table} does not exist")
    return name


def enqueue(
    conn: Connection,
    db: str,
    table: str,
    partition: str | None,
    kind: str,
    *,
    initiator_id: str | None = None,
) -> int:
    """Queue a compaction; an entry of the same kind already initiated or working for the same target is
    returned instead, one of the other kind declines it (:class:`CompactionDeclined` naming that entry: waiting
    for it would report another request's outcome)."""
    if kind not in KINDS:
        raise InvalidObjectException(f"compaction kind must be 'major' or 'minor', not {kind!r}")
    catalog.require_table_id(conn, db, table)
    if not catalog.is_transactional_table(conn, db, table):
        raise InvalidObjectException(f"Table {db}.{table} is not transactional: nothing to compact")
    partition = normalise_partition(conn, db, table, partition)
    existing = conn.execute(
        select(CQ.cq_id, CQ.cq_type, CQ.cq_state).where(
            _target(CQ, db, table, partition), CQ.cq_state.in_(["i", "w"])
        )
    ).first()
    if existing is not None:
        if existing.cq_type != KINDS[kind]:
            raise CompactionDeclined(
                kind,
                f"{db}.{table}" + (f"/{partition}" if partition else ""),
                int(existing.cq_id),
                _KIND_NAMES[existing.cq_type],
                STATES[existing.cq_state],
            )
        return int(existing.cq_id)
    cq_id = take_ids(conn, s.next_compaction_queue_id)
    conn.execute(
        insert(s.compaction_queue).values(
            cq_id=cq_id,
            cq_database=db,
            cq_table=table,
            cq_partition=partition,
            cq_state="i",
            cq_type=KINDS[kind],
            cq_enqueue_time=now_ms(),
            cq_initiator_id=initiator_id,
            cq_attempts=0,
        )
    )
    return cq_id


def record_replicated(
    conn: Connection,
    db: str,
    table: str,
    partition: str | None,
    kind: str,
    highest_write_id: int | None,
    meta: Mapping[str, Any],
) -> int:
    """On a replica: a source's compaction whose outputs are in place, ready for cleaning its inputs once the
    replica's own readers registered before now are gone (as if a worker here had just published it)."""
    cq_id = take_ids(conn, s.next_compaction_queue_id)
    publish_id = take_ids(conn, s.next_reader_id)
    now = now_ms()
    conn.execute(
        insert(s.compaction_queue).values(
            cq_id=cq_id,
            cq_database=db,
            cq_table=table,
            cq_partition=partition,
            cq_state="r",
            cq_type=KINDS[kind],
            cq_enqueue_time=now,
            cq_start=now,
            cq_highest_write_id=highest_write_id,
            cq_initiator_id="replication",
            cq_attempts=0,
            cq_publish_id=publish_id,
            cq_next_reader_id=take_ids(conn, s.next_reader_id),
            cq_commit_time=now,
            cq_meta_info=json.dumps(dict(meta)),
        )
    )
    return cq_id


def get(conn: Connection, cq_id: int) -> CompactionInfo:
    """A queued or completed entry."""
    row = conn.execute(select(s.compaction_queue).where(CQ.cq_id == cq_id)).first()
    if row is not None:
        return _info(row, "cq")
    row = conn.execute(select(s.completed_compactions).where(CC.cc_id == cq_id)).first()
    if row is None:
        raise NoSuchObjectException(f"No compaction {cq_id}")
    return _info(row, "cc")


def claim(
    conn: Connection,
    worker_id: str,
    *,
    cq_id: int | None = None,
    user: str | None = None,
    host: str | None = None,
    timeout_ms: int | None = None,
) -> CompactionInfo | None:
    """Claim the oldest initiated entry (or entry ``cq_id`` if still initiated) and open its compactor txn
    (which times out after ``timeout_ms`` without a heartbeat).

    Rows locked by another claimer are skipped (PostgreSQL), so concurrent workers never take the same entry.
    """
    query = select(s.compaction_queue).where(CQ.cq_state == "i")
    if cq_id is not None:
        query = query.where(CQ.cq_id == cq_id)
    row = conn.execute(query.order_by(CQ.cq_id).limit(1).with_for_update(skip_locked=True)).first()
    if row is None:
        return None
    target = row.cq_database + "." + row.cq_table + (f"/{row.cq_partition}" if row.cq_partition else "")
    [txn_id] = txns.open_txns(
        conn,
        1,
        user=user,
        host=host,
        agent_info=f"compactor {worker_id}: {_KIND_NAMES[row.cq_type]} {target}",
        timeout_ms=timeout_ms,
    )
    conn.execute(
        update(s.compaction_queue)
        .where(CQ.cq_id == row.cq_id)
        .values(
            cq_state="w",
            cq_worker_id=worker_id,
            cq_start=now_ms(),
            cq_txn_id=txn_id,
            cq_attempts=(row.cq_attempts or 0) + 1,
            cq_error_message=None,
        )
    )
    return get(conn, row.cq_id)


def _require(conn: Connection, cq_id: int, states: tuple[str, ...]) -> Any:
    row = conn.execute(select(s.compaction_queue).where(CQ.cq_id == cq_id).with_for_update()).first()
    if row is None:
        raise NoSuchObjectException(f"No compaction queue entry {cq_id}")
    if row.cq_state not in states:
        expected = " or ".join(STATES[x] for x in states)
        raise InvalidObjectException(f"compaction {cq_id} is {STATES[row.cq_state]}, not {expected}")
    return row


def _require_owner(conn: Connection, cq_id: int, txn_id: int) -> Any:
    """A working entry still owned by the worker of compactor txn ``txn_id``, whose txn is still open."""
    row = _require(conn, cq_id, ("w",))
    if row.cq_txn_id != txn_id:
        raise InvalidObjectException(f"compaction {cq_id} is no longer worked on by txnid:{txn_id}")
    txns.require_open(conn, txn_id, for_update=True)
    return row


def update_work(
    conn: Connection, cq_id: int, txn_id: int, *, highest_write_id: int, meta: Mapping[str, Any]
) -> None:
    """Record what the worker compacts up to and where it writes (its ``_tmp`` dir), before writing any file."""
    _require_owner(conn, cq_id, txn_id)
    conn.execute(
        update(s.compaction_queue)
        .where(CQ.cq_id == cq_id)
        .values(cq_highest_write_id=highest_write_id, cq_meta_info=json.dumps(dict(meta)))
    )


def begin_publish(conn: Connection, cq_id: int, txn_id: int, meta: Mapping[str, Any]) -> int:
    """The output is complete in ``_tmp``: take the publication id; from now on the entry only goes forward."""
    _require_owner(conn, cq_id, txn_id)
    publish_id = take_ids(conn, s.next_reader_id)
    conn.execute(
        update(s.compaction_queue)
        .where(CQ.cq_id == cq_id)
        .values(cq_publish_id=publish_id, cq_meta_info=json.dumps(dict(meta)))
    )
    return publish_id


def _ended(conn: Connection, cq_id: int, state: str, txn_id: int | None = None) -> bool:
    """Whether entry ``cq_id`` already ended in ``state`` (under compactor txn ``txn_id``, if given): the same
    call again, after its COMMIT's answer was lost (the engine runs a write again on a new connection), is then
    done, where the entry it requires is no longer queued."""
    row = conn.execute(select(CC.cc_state, CC.cc_txn_id).where(CC.cc_id == cq_id)).first()
    return row is not None and row.cc_state == state and (txn_id is None or row.cc_txn_id == txn_id)


def _require_working(conn: Connection, cq_id: int, txn_id: int | None) -> Any:
    """A working entry; with ``txn_id``, one still owned by that compactor txn (a worker whose entry was
    reverted or rolled forward by someone else must not touch it)."""
    row = _require(conn, cq_id, ("w",))
    if txn_id is not None and row.cq_txn_id != txn_id:
        raise InvalidObjectException(f"compaction {cq_id} is no longer worked on by txnid:{txn_id}")
    return row


def mark_compacted(conn: Connection, cq_id: int, txn_id: int | None = None) -> None:
    """Published: ready for cleaning once the readers registered before now are gone; commits the worker's txn.

    ``txn_id``: the calling worker's compactor txn (None: recovery rolling a dead worker's entry forward).
    """
    queued = conn.execute(select(CQ.cq_state, CQ.cq_txn_id).where(CQ.cq_id == cq_id)).first()
    if queued is not None and queued.cq_state == "r" and txn_id is not None and queued.cq_txn_id == txn_id:
        return  # done by this worker: its answer was lost
    row = _require_working(conn, cq_id, txn_id)
    if row.cq_publish_id is None:
        raise InvalidObjectException(f"compaction {cq_id} has published no output: it cannot be compacted")
    conn.execute(
        update(s.compaction_queue)
        .where(CQ.cq_id == cq_id)
        .values(cq_state="r", cq_next_reader_id=take_ids(conn, s.next_reader_id), cq_commit_time=now_ms())
    )
    _end_txn(conn, row.cq_txn_id, commit=True)
    meta = json.loads(row.cq_meta_info or "{}")
    notifications.emit(  # replicas copy the outputs (its txn finds it: see ``find_ready_to_clean``)
        conn,
        "COMPACTED",
        db=row.cq_database,
        table=row.cq_table,
        partition=row.cq_partition,
        txn_id=row.cq_txn_id,
        write_id=row.cq_highest_write_id,
        message={
            "compaction_id": cq_id,
            "kind": _KIND_NAMES[row.cq_type],
            "location": meta.get("location"),
            "outputs": meta.get("outputs", []),
            "inputs": meta.get("inputs", []),
            "files": meta.get("files", {}),
        },
    )


def _end_txn(conn: Connection, txn_id: int | None, *, commit: bool) -> None:
    """Commit or abort the compactor txn if it is still open (a timed-out one is already aborted)."""
    if txn_id is None or txns.get_txn_state(conn, txn_id) is not TxnStatus.OPEN:
        return
    if commit:
        txns.commit_txn(conn, txn_id, None, None)
    else:
        txns.abort_txns(conn, [txn_id], reason="compaction failed")


def _finish(conn: Connection, row: Any, state: str, message: str | None) -> None:
    values = {c.name.replace("cq_", "cc_", 1): getattr(row, c.name) for c in s.compaction_queue.c}
    values.update(cc_state=state, cc_end=now_ms(), cc_error_message=message)
    conn.execute(insert(s.completed_compactions).values(values))
    conn.execute(delete(s.compaction_queue).where(CQ.cq_id == row.cq_id))


def mark_refused(conn: Connection, cq_id: int, message: str, txn_id: int | None = None) -> None:
    """Nothing to compact and nothing to clean (Hive 4's "refused"): no file changed."""
    if _ended(conn, cq_id, "c", txn_id):
        return
    row = _require_working(conn, cq_id, txn_id)
    if row.cq_publish_id is not None:
        raise InvalidObjectException(f"compaction {cq_id} already published its output")
    _end_txn(conn, row.cq_txn_id, commit=True)
    _finish(conn, row, "c", message)


def mark_failed(conn: Connection, cq_id: int, message: str, txn_id: int | None = None) -> None:
    """Failed before publishing (nothing changed on disk), or while cleaning (the output stays in place).
    ``txn_id``: the calling worker's compactor txn, which must still own the (working) entry."""
    if _ended(conn, cq_id, "f", txn_id):
        return
    row = (
        _require_working(conn, cq_id, txn_id)
        if txn_id is not None
        else _require(conn, cq_id, ("i", "w", "r"))
    )
    if row.cq_state == "w" and row.cq_publish_id is not None:
        raise InvalidObjectException(
            f"compaction {cq_id} is publishing its output: it must be completed, not failed"
        )
    _end_txn(conn, row.cq_txn_id, commit=False)
    _finish(conn, row, "f", message)


def revert(conn: Connection, cq_id: int, message: str, max_attempts: int) -> str:
    """A dead worker's unpublished entry goes back to initiated (or fails after ``max_attempts`` claims).

    The caller has removed the worker's ``_tmp`` directory. Returns the new state's text.
    """
    row = _require(conn, cq_id, ("w",))
    if row.cq_publish_id is not None:
        raise InvalidObjectException(f"compaction {cq_id} published its output: it must be rolled forward")
    _end_txn(conn, row.cq_txn_id, commit=False)
    if (row.cq_attempts or 0) >= max_attempts:
        _finish(conn, row, "f", f"{message}; gave up after {row.cq_attempts} attempts")
        return STATES["f"]
    conn.execute(
        update(s.compaction_queue)
        .where(CQ.cq_id == cq_id)
        .values(
            cq_state="i",
            cq_worker_id=None,
            cq_start=None,
            cq_txn_id=None,
            cq_highest_write_id=None,
            cq_meta_info=None,
            cq_error_message=message,
        )
    )
    return STATES["i"]


def find_abandoned(conn: Connection) -> list[CompactionInfo]:
    """Working entries whose compactor txn is no longer open: their worker died (or lost its heartbeats)."""
    t = s.txns.c
    still_open = (
        select(t.txn_id).where(t.txn_id == CQ.cq_txn_id, t.txn_state == TxnStatus.OPEN.value).exists()
    )
    rows = conn.execute(
        select(s.compaction_queue).where(CQ.cq_state == "w", ~still_open).order_by(CQ.cq_id)
    ).all()
    return [_info(r, "cq") for r in rows]


def find_ready_to_clean(conn: Connection, retention_ms: int, reader_timeout_ms: int) -> list[CompactionInfo]:
    """Entries published at least ``retention_ms`` ago with no live reader registered before their publication,
    and no cleaner at work on them (a cleaner's claim lapses after ``reader_timeout_ms``).

    The retention covers readers that do not register (Hive's own, other engines); registered readers are
    waited for as long as they heartbeat within ``reader_timeout_ms``; replication followers (see
    ``followers.follower_progress``) until they have applied the compaction.
    """
    now = now_ms()
    blocking = (
        select(SR.sr_id)
        .where(
            SR.sr_database == CQ.cq_database,
            SR.sr_table == CQ.cq_table,
            SR.sr_id < CQ.cq_next_reader_id,
            readers.alive(now, reader_timeout_ms),
        )
        .exists()
    )
    nl = s.notification_log.c
    unreplicated = (  # a live follower has not applied the COMPACTED event: it may still copy the inputs
        select(nl.nl_seq)
        .where(nl.txn_id == CQ.cq_txn_id, nl.event_type == "COMPACTED", followers.follower_behind(nl.nl_id))
        .exists()
    )
    rows = conn.execute(
        select(s.compaction_queue)
        .where(
            CQ.cq_state == "r",
            CQ.cq_commit_time <= now - retention_ms,
            _cleaner_free(now, reader_timeout_ms),
            ~blocking,
            ~unreplicated,
        )
        .order_by(CQ.cq_id)
    ).all()
    return [_info(r, "cq") for r in rows]


def _cleaner_free(now: int, lease_ms: int) -> Any:
    return or_(CQ.cq_cleaner_start.is_(None), CQ.cq_cleaner_start < now - lease_ms)


def claim_cleaning(conn: Connection, cq_id: int, lease_ms: int) -> bool:
    """Take entry ``cq_id`` for cleaning unless another cleaner holds it (compactors on several hosts)."""
    now = now_ms()
    claimed = conn.execute(
        update(s.compaction_queue)
        .where(CQ.cq_id == cq_id, CQ.cq_state == "r", _cleaner_free(now, lease_ms))
        .values(cq_cleaner_start=now)
    ).rowcount
    return bool(claimed)


def blocking_readers(conn: Connection, cq_id: int, reader_timeout_ms: int) -> list[int]:
    """Ids of live registrations that keep entry ``cq_id`` from being cleaned (for progress reports)."""
    row = _require(conn, cq_id, ("r",))
    return list(
        conn.execute(
            select(SR.sr_id)
            .where(
                SR.sr_database == row.cq_database,
                SR.sr_table == row.cq_table,
                SR.sr_id < row.cq_next_reader_id,
                readers.alive(now_ms(), reader_timeout_ms),
            )
            .order_by(SR.sr_id)
        ).scalars()
    )


def mark_cleaned(
    conn: Connection, cq_id: int, forget_write_ids: Sequence[int] = (), removed: Sequence[str] = ()
) -> None:
    """Succeeded. The initiator's input up to the compaction is consumed, and the aborted write ids the cleaner
    found no remaining file for (``forget_write_ids``) stop being exceptions of this partition; a write id
    leaves the table's exceptions once no partition keeps a component of its txn. ``removed``: the
    directories the cleaner deleted (a CLEANED event tells replicas)."""
    if _ended(conn, cq_id, "s"):
        return
    row = _require(conn, cq_id, ("r",))
    notifications.emit(
        conn,
        "CLEANED",
        db=row.cq_database,
        table=row.cq_table,
        partition=row.cq_partition,
        txn_id=row.cq_txn_id,
        message={
            "compaction_id": cq_id,
            "location": json.loads(row.cq_meta_info or "{}").get("location"),
            "removed": sorted(removed),
        },
    )
    db, table, partition = row.cq_database, row.cq_table, row.cq_partition
    ctc = s.completed_txn_components.c
    part = ctc.ctc_partition.is_(None) if partition is None else ctc.ctc_partition == partition
    conn.execute(
        delete(s.completed_txn_components).where(
            ctc.ctc_database == db,
            ctc.ctc_table == table,
            part,
            ctc.ctc_writeid <= (row.cq_highest_write_id or 0),
        )
    )
    if forget_write_ids:
        _forget_aborted(conn, db, table, partition, forget_write_ids)
    _finish(conn, row, "s", None)


def _forget_aborted(
    conn: Connection, db: str, table: str, partition: str | None, write_ids: Sequence[int]
) -> None:
    tc, t2w, t = s.txn_components.c, s.txn_to_write_id.c, s.txns.c
    for chunk in range(0, len(write_ids), txns.IN_CHUNK):
        part_ids = list(write_ids[chunk : chunk + txns.IN_CHUNK])
        aborted = list(
            conn.execute(
                select(t2w.t2w_txnid)
                .join(s.txns, t.txn_id == t2w.t2w_txnid)
                .where(
                    t2w.t2w_database == db,
                    t2w.t2w_table == table,
                    t2w.t2w_writeid.in_(part_ids),
                    t.txn_state == TxnStatus.ABORTED.value,
                )
            ).scalars()
        )
        if not aborted:
            continue
        part = tc.tc_partition.is_(None) if partition is None else tc.tc_partition == partition
        forgotten = list(
            conn.execute(
                select(tc.tc_txnid)
                .where(tc.tc_txnid.in_(aborted), tc.tc_database == db, tc.tc_table == table, part)
                .distinct()
            ).scalars()
        )
        if not forgotten:
            continue  # no component here: where the txn wrote is unknown (a dynamic-partition write), keep it
        conn.execute(
            delete(s.txn_components).where(
                tc.tc_txnid.in_(forgotten), tc.tc_database == db, tc.tc_table == table, part
            )
        )
        still_written = (
            select(tc.tc_txnid)
            .where(tc.tc_txnid == t2w.t2w_txnid, tc.tc_database == db, tc.tc_table == table)
            .exists()
        )
        conn.execute(
            delete(s.txn_to_write_id).where(
                t2w.t2w_database == db, t2w.t2w_table == table, t2w.t2w_txnid.in_(forgotten), ~still_written
            )
        )


def show(conn: Connection) -> list[CompactionInfo]:
    queued = [_info(r, "cq") for r in conn.execute(select(s.compaction_queue).order_by(CQ.cq_id))]
    done = [_info(r, "cc") for r in conn.execute(select(s.completed_compactions).order_by(CC.cc_id))]
    return sorted(done + queued, key=lambda c: c.id)


def unfinished_publications(conn: Connection, db: str, table: str, baseline: int) -> list[Publication]:
    """Publications a directory listing made after ``baseline`` was taken may have caught half-way."""
    rows = conn.execute(
        select(CQ.cq_partition, CQ.cq_meta_info).where(
            CQ.cq_database == db,
            CQ.cq_table == table,
            CQ.cq_publish_id.is_not(None),
            or_(CQ.cq_next_reader_id.is_(None), CQ.cq_next_reader_id >= baseline),
        )
    ).all()
    return [
        Publication(r.cq_partition, tuple(json.loads(r.cq_meta_info or "{}").get("outputs", ())))
        for r in rows
    ]


# --- the initiator's queries ---------------------------------------------------------------------------------------


def find_potential(conn: Connection, aborted_threshold: int) -> list[PotentialCompaction]:
    """Hive's ``findPotentialCompactions``: targets with committed writes not yet compacted, and targets with
    more than ``aborted_threshold`` aborted txns (flagged: they get a major compaction)."""
    ctc = s.completed_txn_components.c
    written = {
        (r.ctc_database, r.ctc_table, r.ctc_partition)
        for r in conn.execute(select(ctc.ctc_database, ctc.ctc_table, ctc.ctc_partition).distinct())
    }
    tc, t = s.txn_components.c, s.txns.c
    aborted = {
        (r.tc_database, r.tc_table, r.tc_partition)
        for r in conn.execute(
            select(tc.tc_database, tc.tc_table, tc.tc_partition)
            .join(s.txns, t.txn_id == tc.tc_txnid)
            .where(t.txn_state == TxnStatus.ABORTED.value, tc.tc_table.is_not(None))
            .group_by(tc.tc_database, tc.tc_table, tc.tc_partition)
            .having(func.count() > aborted_threshold)
        )
    }
    return [
        PotentialCompaction(db, table, partition, (db, table, partition) in aborted)
        for db, table, partition in sorted(written | aborted, key=lambda x: (x[0], x[1], x[2] or ""))
    ]


def too_many_failures(
    conn: Connection, db: str, table: str, partition: str | None, threshold: int, retry_after_ms: int
) -> bool:
    """``checkFailedCompactions``: the last ``threshold`` finished attempts all failed, the last one less than
    ``retry_after_ms`` ago (0 or less: never retry automatically)."""
    rows = conn.execute(
        select(CC.cc_state, CC.cc_enqueue_time)
        .where(_target(CC, db, table, partition), CC.cc_state.in_(["s", "f"]))
        .order_by(CC.cc_id.desc())
        .limit(threshold)
    ).all()
    if len(rows) < threshold or any(r.cc_state != "f" for r in rows):
        return False
    last = max(r.cc_enqueue_time for r in rows)
    return not (retry_after_ms > 0 and last + retry_after_ms < now_ms())


def record_not_initiated(
    conn: Connection,
    db: str,
    table: str,
    partition: str | None,
    message: str,
    *,
    kind: str = "major",
    initiator_id: str | None = None,
) -> int:
    """A "did not initiate" history entry: the initiator decided not to (or could not) queue this target."""
    cc_id = take_ids(conn, s.next_compaction_queue_id)
    now = now_ms()
    conn.execute(
        insert(s.completed_compactions).values(
            cc_id=cc_id,
            cc_database=db,
            cc_table=table,
            cc_partition=partition,
            cc_state="a",
            cc_type=KINDS[kind],
            cc_enqueue_time=now,
            cc_end=now,
            cc_error_message=message,
            cc_initiator_id=initiator_id,
            cc_attempts=0,
        )
    )
    return cc_id


def purge_history(conn: Connection, retention: Mapping[str, int] = HISTORY_RETENTION) -> int:
    """Keep the newest ``retention[state]`` finished entries per table/partition and state; returns the count
    removed (Hive's ``purgeCompactionHistory``)."""
    seen: dict[tuple[str, str, str | None, str], int] = {}
    doomed: list[int] = []
    for r in conn.execute(
        select(CC.cc_id, CC.cc_database, CC.cc_table, CC.cc_partition, CC.cc_state).order_by(CC.cc_id.desc())
    ):
        key = (r.cc_database, r.cc_table, r.cc_partition, r.cc_state)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > retention.get(r.cc_state, 3):
            doomed.append(r.cc_id)
    for chunk in range(0, len(doomed), txns.IN_CHUNK):
        conn.execute(
            delete(s.completed_compactions).where(CC.cc_id.in_(doomed[chunk : chunk + txns.IN_CHUNK]))
        )
    return len(doomed)
