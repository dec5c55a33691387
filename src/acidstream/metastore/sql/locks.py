"""Hive 3 shared/exclusive locks on databases, tables and partitions, acquired all-or-nothing.

Every acquisition check runs with the ``NEXT_LOCK_ID`` row locked (Hive serialises ``checkLock`` the same
way), so two requests never both see the other as absent. A request waits behind conflicting acquired locks
and behind conflicting requests that queued earlier, so writers are not starved by a stream of readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from acidstream.errors import InvalidObjectException, MetaException, NoSuchLockException
from acidstream.metastore.models import LockComponent, LockInfo, LockLevel, LockState, LockType
from acidstream.metastore.sql import catalog, txns
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms, take_ids
from acidstream.metastore.sql.prepared import Prepared

HL = s.hive_locks.c
_INSERT_LOCKS = Prepared(insert(s.hive_locks))
_OTHER_LOCKS_IN_DB = Prepared(
    select(s.hive_locks)
    .where(HL.hl_lock_ext_id != bindparam("ext_id"), HL.hl_db == bindparam("db"))
    .order_by(HL.hl_lock_ext_id, HL.hl_lock_int_id)
)

_COMPATIBLE = {
    (LockType.SHARED_READ, LockType.SHARED_READ),
    (LockType.SHARED_READ, LockType.SHARED_WRITE),
    (LockType.SHARED_WRITE, LockType.SHARED_READ),
}


def compatible(a: LockType, b: LockType) -> bool:
    """Hive 3's jump table: read/read and read/write coexist; write/write and anything/exclusive do not."""
    return (a, b) in _COMPATIBLE


def overlaps(a: tuple[str, str | None, str | None], b: tuple[str, str | None, str | None]) -> bool:
    """Same db when either is db-level, same table when either is table-level, else same partition."""
    if a[0] != b[0]:
        return False
    if a[1] is None or b[1] is None:
        return True
    if a[1] != b[1]:
        return False
    return a[2] is None or b[2] is None or a[2] == b[2]


def _normalise(component: LockComponent) -> tuple[str, str | None, str | None]:
    db = catalog.check_ident("database", component.db)
    table = component.table.lower() if component.table else None
    partition = component.partition
    if component.level is LockLevel.DB and (table or partition):
        raise InvalidObjectException("a DB-level lock component names no table or partition")
    if component.level is LockLevel.TABLE and (not table or partition):
        raise InvalidObjectException("a TABLE-level lock component names a table and no partition")
    if component.level is LockLevel.PARTITION and (not table or not partition):
        raise InvalidObjectException("a PARTITION-level lock component names a table and a partition")
    return db, table, partition


def request(
    conn: Connection,
    components: Sequence[LockComponent],
    *,
    txn_id: int | None,
    user: str | None,
    host: str | None,
    agent_info: str | None,
    opened_with: tuple[str, str, int] | None = None,
    timeout_ms: int | None = None,
) -> tuple[int, LockState, str | None]:
    """Queue the request, recording the txn's write components, and try to acquire it at once (Hive's
    ``enqueueLock`` + ``checkLock``, in one database transaction); returns the lock id, state and blocker.

    ``opened_with`` (db, table, write id): the txn was opened in this same database transaction with that write
    id, so it is open and that table transactional without asking again (a streaming batch's open).
    ``timeout_ms``: how long a txn-less lock may go without a heartbeat (a txn's locks live as long as it).
    """
    if not components:
        raise InvalidObjectException("a lock request needs at least one component")
    objects = [_normalise(c) for c in components]
    if txn_id is not None and opened_with is None:
        txns.require_open(conn, txn_id, for_update=True)
    for (db, table, partition), comp in zip(objects, components, strict=True):
        if table is None:
            catalog.require_database(conn, db)
        elif txn_id is None or not comp.operation.writes or comp.is_dynamic_partition_write:
            catalog.require_table_id(conn, db, table)
        elif opened_with is not None and opened_with[:2] == (db, table):
            txns.record_components(conn, txn_id, db, table, [partition], comp.operation, opened_with[2])
        elif catalog.is_transactional_table(conn, db, table):  # raises for a missing table too
            txns.record_components(conn, txn_id, db, table, [partition], comp.operation)
    ext_id = take_ids(conn, s.next_lock_id)  # its row lock serialises every lock decision, as check's does
    blocker = _first_conflict(
        conn, ext_id, txn_id or 0, [(*obj, comp.type) for obj, comp in zip(objects, components, strict=True)]
    )
    now = now_ms()
    _INSERT_LOCKS.run(
        conn,
        [
            {
                "hl_lock_ext_id": ext_id,
                "hl_lock_int_id": i + 1,
                "hl_txnid": txn_id or 0,
                "hl_db": db,
                "hl_table": table,
                "hl_partition": partition,
                "hl_lock_state": (LockState.WAITING if blocker else LockState.ACQUIRED).value,
                "hl_lock_type": comp.type.value,
                "hl_last_heartbeat": now,
                "hl_acquired_at": None if blocker else now,
                "hl_blockedby_ext_id": blocker.hl_lock_ext_id if blocker else None,
                "hl_blockedby_int_id": blocker.hl_lock_int_id if blocker else None,
                "hl_user": user,
                "hl_host": host,
                "hl_agent_info": agent_info,
                "hl_timeout_ms": None if txn_id else timeout_ms,
            }
            for i, ((db, table, partition), comp) in enumerate(zip(objects, components, strict=True))
        ],
    )
    if blocker is not None:
        return ext_id, LockState.WAITING, describe(blocker)
    return ext_id, LockState.ACQUIRED, None


def describe(row: Any) -> str:
    return _info(row).describe()


def _first_conflict(
    conn: Connection,
    ext_id: int,
    txn_id: int,
    mine: Sequence[tuple[str, str | None, str | None, LockType]],
) -> Any | None:
    """The first lock that keeps request ``ext_id`` from being granted: an acquired or earlier-queued lock of
    another txn on an overlapping object with an incompatible type. None when it can be granted."""
    dbs = {m[0] for m in mine}
    others: Sequence[Any]
    if len(dbs) == 1:  # every request but cross-database ones
        others = _OTHER_LOCKS_IN_DB.run(conn, {"ext_id": ext_id, "db": next(iter(dbs))}).all()
    else:
        others = conn.execute(
            select(s.hive_locks)
            .where(HL.hl_lock_ext_id != ext_id, HL.hl_db.in_(dbs))
            .order_by(HL.hl_lock_ext_id, HL.hl_lock_int_id)
        ).all()
    for other in others:
        if other.hl_lock_state == LockState.WAITING.value and other.hl_lock_ext_id > ext_id:
            continue
        if txn_id and other.hl_txnid == txn_id:
            continue
        for db, table, partition, lock_type in mine:
            if overlaps(
                (db, table, partition), (other.hl_db, other.hl_table, other.hl_partition)
            ) and not compatible(lock_type, LockType(other.hl_lock_type)):
                return other
    return None


def check(conn: Connection, ext_id: int) -> tuple[LockState, str | None]:
    """Try to acquire every component of a queued request at once; returns the state and the blocker."""
    conn.execute(select(s.next_lock_id.c.nl_next).with_for_update())
    mine = conn.execute(select(s.hive_locks).where(HL.hl_lock_ext_id == ext_id)).all()
    if not mine:
        raise NoSuchLockException(f"No such lock lockid:{ext_id}")
    now = now_ms()
    if all(r.hl_lock_state == LockState.ACQUIRED.value for r in mine):
        return LockState.ACQUIRED, None
    blocker = _first_conflict(
        conn,
        ext_id,
        mine[0].hl_txnid,
        [(r.hl_db, r.hl_table, r.hl_partition, LockType(r.hl_lock_type)) for r in mine],
    )
    if blocker is not None:
        conn.execute(
            update(s.hive_locks)
            .where(HL.hl_lock_ext_id == ext_id)
            .values(
                hl_blockedby_ext_id=blocker.hl_lock_ext_id,
                hl_blockedby_int_id=blocker.hl_lock_int_id,
                hl_last_heartbeat=now,
            )
        )
        return LockState.WAITING, describe(blocker)
    conn.execute(
        update(s.hive_locks)
        .where(HL.hl_lock_ext_id == ext_id)
        .values(
            hl_lock_state=LockState.ACQUIRED.value,
            hl_acquired_at=now,
            hl_last_heartbeat=now,
            hl_blockedby_ext_id=None,
            hl_blockedby_int_id=None,
        )
    )
    return LockState.ACQUIRED, None


def unlock(conn: Connection, ext_id: int, *, waiting_only: bool = False) -> None:
    """Release a lock. A txn's acquired locks are released by its commit/abort, not here (as in Hive)."""
    rows = conn.execute(select(s.hive_locks).where(HL.hl_lock_ext_id == ext_id)).all()
    if not rows:
        raise NoSuchLockException(f"No such lock lockid:{ext_id}")
    acquired = any(r.hl_lock_state == LockState.ACQUIRED.value for r in rows)
    if waiting_only and acquired:
        return
    if acquired and rows[0].hl_txnid:
        raise MetaException(
            f"Unlocking locks associated with transaction not permitted: lockid:{ext_id} belongs to "
            f"{txns.txn_str(rows[0].hl_txnid)}"
        )
    conn.execute(delete(s.hive_locks).where(HL.hl_lock_ext_id == ext_id))


def heartbeat(conn: Connection, ext_id: int) -> None:
    if not conn.execute(
        update(s.hive_locks).where(HL.hl_lock_ext_id == ext_id).values(hl_last_heartbeat=now_ms())
    ).rowcount:
        raise NoSuchLockException(f"No such lock lockid:{ext_id}")


def show_locks(conn: Connection, db: str | None = None, table: str | None = None) -> list[LockInfo]:
    query = select(s.hive_locks).order_by(HL.hl_lock_ext_id, HL.hl_lock_int_id)
    if db is not None:
        query = query.where(HL.hl_db == db)
    if table is not None:
        query = query.where(HL.hl_table == table)
    return [_info(r) for r in conn.execute(query)]


def _info(r: Any) -> LockInfo:
    """A HIVE_LOCKS row as SHOW LOCKS shows it."""
    return LockInfo(
        lock_id=r.hl_lock_ext_id,
        component_id=r.hl_lock_int_id,
        txn_id=r.hl_txnid or None,
        db=r.hl_db,
        table=r.hl_table,
        partition=r.hl_partition,
        state=LockState(r.hl_lock_state),
        type=LockType(r.hl_lock_type),
        last_heartbeat=r.hl_last_heartbeat,
        acquired_at=r.hl_acquired_at,
        user=r.hl_user,
        host=r.hl_host,
        agent_info=r.hl_agent_info,
        blocked_by=r.hl_blockedby_ext_id,
    )
