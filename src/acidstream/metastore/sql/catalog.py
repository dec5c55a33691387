"""Databases, tables and partitions: the catalog rows and their validation, one DB transaction per call.

Every function takes the open connection of the caller's transaction and writes its notification event in it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from acidstream.acid import evolution
from acidstream.acid.types import Column, parse_type
from acidstream.errors import (
    AlreadyExistsException,
    InvalidOperationException,
    NoSuchObjectException,
)
from acidstream.metastore.models import Partition
from acidstream.metastore.names import (
    DEFAULT_DB,
    check_bucketing_version,
    check_ident,
    checked_partition_name,
    db_location,
    table_location,
    valid_name,
    validate_table,
)
from acidstream.metastore.sql import notifications
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms
from acidstream.metastore.sql.prepared import Prepared

DEFAULT_BUCKETING_VERSION = "2"


# --- databases -------------------------------------------------------------------------------------------------


def create_database(
    conn: Connection, warehouse: str, name: str, *, if_not_exists: bool = False, comment: str | None = None
) -> bool:
    """Create a database; returns False when it existed and ``if_not_exists`` was given."""
    name = valid_name("database", name)
    if conn.execute(select(s.dbs.c.db_id).where(s.dbs.c.name == name)).first() is not None:
        if if_not_exists:
            return False
        raise AlreadyExistsException(f"Database {name} already exists")
    location = db_location(warehouse, name)
    conn.execute(insert(s.dbs).values(name=name, location=location, comment=comment, create_time=now_ms()))
    notifications.emit(conn, "CREATE_DATABASE", db=name, message={"location": location})
    return True


def drop_database(
    conn: Connection, name: str, *, cascade: bool = False, if_exists: bool = False
) -> list[str]:
    """Drop the database (and with ``cascade`` its tables); returns the dropped tables' locations."""
    name = name.lower()
    if name == DEFAULT_DB:
        raise InvalidOperationException("Can not drop default database")
    if conn.execute(select(s.dbs.c.db_id).where(s.dbs.c.name == name)).first() is None:
        if if_exists:
            return []
        raise NoSuchObjectException(f"Database {name} does not exist")
    tables = list_tables(conn, name)
    if tables and not cascade:
        raise InvalidOperationException(
            f"Database {name} is not empty. One or more tables exist (DROP DATABASE {name} CASCADE drops them too)."
        )
    locations = [loc for table in tables for loc in drop_table(conn, name, table)]
    conn.execute(delete(s.dbs).where(s.dbs.c.name == name))
    notifications.emit(conn, "DROP_DATABASE", db=name)
    return locations


def list_databases(conn: Connection) -> list[str]:
    return list(conn.execute(select(s.dbs.c.name).order_by(s.dbs.c.name)).scalars())


def require_database(conn: Connection, name: str) -> None:
    if conn.execute(select(s.dbs.c.db_id).where(s.dbs.c.name == name)).first() is None:
        raise NoSuchObjectException(f"Database {name} does not exist")


# --- tables ------------------------------------------------------------------------------------------------------


def create_table(
    conn: Connection,
    warehouse: str,
    db: str,
    name: str,
    columns: Sequence[Column],
    *,
    partition_keys: Sequence[Column] = (),
    bucket_columns: Sequence[str] = (),
    num_buckets: int = 0,
    properties: Mapping[str, str] | None = None,
    if_not_exists: bool = False,
    location: str | None = None,
) -> bool:
    """Create a table (at ``location``, by default under its database's); returns False when it existed and
    ``if_not_exists`` was given."""
    db, name = check_ident("database", db), valid_name("table", name)
    require_database(conn, db)
    if _table_id(conn, db, name) is not None:
        if if_not_exists:
            return False
        raise AlreadyExistsException(f"Table {db}.{name} already exists")
    validate_table(columns, partition_keys, bucket_columns, num_buckets)
    props = dict(properties or {})
    props.setdefault("bucketing_version", DEFAULT_BUCKETING_VERSION)
    check_bucketing_version(props)
    location = location or table_location(warehouse, db, name)
    key = conn.execute(
        insert(s.tbls).values(
            db_name=db, tbl_name=name, location=location, num_buckets=num_buckets, create_time=now_ms()
        )
    ).inserted_primary_key
    assert key is not None  # an INSERT of one row always has a primary key
    tbl_id = int(key[0])
    _insert_columns(conn, tbl_id, columns, partition_keys, [c.lower() for c in bucket_columns])
    _insert_params(conn, tbl_id, props)
    notifications.emit(
        conn,
        "CREATE_TABLE",
        db=db,
        table=name,
        message={
            "columns": [[c.name, str(c.type)] for c in columns],
            "partition_keys": [[c.name, str(c.type)] for c in partition_keys],
            "bucket_columns": list(bucket_columns),
            "num_buckets": num_buckets,
            "properties": props,
            "location": location,
        },
    )
    return True


def _insert_columns(
    conn: Connection,
    tbl_id: int,
    columns: Sequence[Column],
    partition_keys: Sequence[Column],
    bucket_columns: Sequence[str],
) -> None:
    conn.execute(
        insert(s.columns_v2),
        [
            {
                "tbl_id": tbl_id,
                "integer_idx": i,
                "column_name": c.name,
                "type_name": str(c.type),
                "comment": c.comment,
            }
            for i, c in enumerate(columns)
        ],
    )
    if partition_keys:
        conn.execute(
            insert(s.partition_keys),
            [
                {
                    "tbl_id": tbl_id,
                    "integer_idx": i,
                    "pkey_name": c.name,
                    "pkey_type": str(c.type),
                    "pkey_comment": c.comment,
                }
                for i, c in enumerate(partition_keys)
            ],
        )
    if bucket_columns:
        conn.execute(
            insert(s.bucketing_cols),
            [
                {"tbl_id": tbl_id, "integer_idx": i, "bucket_col_name": c}
                for i, c in enumerate(bucket_columns)
            ],
        )


def _insert_params(conn: Connection, tbl_id: int, props: Mapping[str, str]) -> None:
    if props:
        conn.execute(
            insert(s.table_params),
            [{"tbl_id": tbl_id, "param_key": k, "param_value": str(v)} for k, v in props.items()],
        )


def _table_id(conn: Connection, db: str, name: str) -> int | None:
    t = s.tbls.c
    return conn.execute(select(t.tbl_id).where(t.db_name == db, t.tbl_name == name)).scalar()


def require_table_id(conn: Connection, db: str, name: str) -> int:
    tbl_id = _table_id(conn, db, name)
    if tbl_id is None:
        raise NoSuchObjectException(f"Table {db}.{name} does not exist")
    return tbl_id


def _stored_columns(conn: Connection, tbl_id: int) -> Sequence[Any]:
    c = s.columns_v2.c
    return conn.execute(select(s.columns_v2).where(c.tbl_id == tbl_id).order_by(c.integer_idx)).all()


def load_table(conn: Connection, db: str, name: str) -> dict[str, Any]:
    """The stored definition as the keyword arguments of :class:`~acidstream.metastore.models.TableDefinition`."""
    t = s.tbls.c
    row = conn.execute(select(s.tbls).where(t.db_name == db, t.tbl_name == name)).first()
    if row is None:
        raise NoSuchObjectException(f"Table {db}.{name} does not exist")
    tbl_id = row.tbl_id
    cols = _stored_columns(conn, tbl_id)
    pkeys = conn.execute(
        select(s.partition_keys)
        .where(s.partition_keys.c.tbl_id == tbl_id)
        .order_by(s.partition_keys.c.integer_idx)
    ).all()
    bcols = conn.execute(
        select(s.bucketing_cols.c.bucket_col_name)
        .where(s.bucketing_cols.c.tbl_id == tbl_id)
        .order_by(s.bucketing_cols.c.integer_idx)
    ).scalars()
    props = table_properties(conn, tbl_id)
    return {
        "db": db,
        "name": name,
        "columns": tuple(Column(c.column_name, parse_type(c.type_name), c.comment) for c in cols),
        "partition_keys": tuple(Column(p.pkey_name, parse_type(p.pkey_type), p.pkey_comment) for p in pkeys),
        "bucket_columns": tuple(bcols),
        "num_buckets": row.num_buckets,
        "bucketing_version": int(props.get("bucketing_version", DEFAULT_BUCKETING_VERSION)),
        "properties": props,
        "location": row.location,
        "table_id": tbl_id,
    }


def table_properties(conn: Connection, tbl_id: int) -> dict[str, str]:
    p = s.table_params.c
    rows = conn.execute(select(p.param_key, p.param_value).where(p.tbl_id == tbl_id).order_by(p.param_key))
    return {k: v for k, v in rows}


_TABLE_PARAMS = Prepared(
    select(s.tbls.c.tbl_id, s.table_params.c.param_key, s.table_params.c.param_value)
    .select_from(s.tbls.outerjoin(s.table_params, s.table_params.c.tbl_id == s.tbls.c.tbl_id))
    .where(s.tbls.c.db_name == bindparam("db"), s.tbls.c.tbl_name == bindparam("name"))
)


def is_transactional_table(conn: Connection, db: str, name: str) -> bool:
    """``transactional=true`` (full ACID or insert-only): the tables that have write ids (one prebuilt query)."""
    rows = _TABLE_PARAMS.run(conn, {"db": db, "name": name}).all()
    if not rows:
        raise NoSuchObjectException(f"Table {db}.{name} does not exist")
    props = {r.param_key.lower(): r.param_value.lower() for r in rows if r.param_key is not None}
    return props.get("transactional") == "true"


def list_tables(conn: Connection, db: str) -> list[str]:
    t = s.tbls.c
    return list(conn.execute(select(t.tbl_name).where(t.db_name == db).order_by(t.tbl_name)).scalars())


def drop_table(conn: Connection, db: str, name: str, *, if_exists: bool = False) -> list[str]:
    """Drop the table and everything the metastore keeps about it (write ids, components, queue entries).

    Returns the table's location: its data must go too (Hive deletes a managed table's files), else a table
    re-created under the same name would restart write ids at 1 among the old table's delta directories.
    """
    tbl_id = _table_id(conn, db, name)
    if tbl_id is None:
        if if_exists:
            return []
        raise NoSuchObjectException(f"Table {db}.{name} does not exist")
    location = conn.execute(select(s.tbls.c.location).where(s.tbls.c.tbl_id == tbl_id)).scalar_one()
    for table, id_col in (
        (s.columns_v2, s.columns_v2.c.tbl_id),
        (s.partition_keys, s.partition_keys.c.tbl_id),
        (s.bucketing_cols, s.bucketing_cols.c.tbl_id),
        (s.table_params, s.table_params.c.tbl_id),
        (s.partitions, s.partitions.c.tbl_id),
        (s.tbls, s.tbls.c.tbl_id),
    ):
        conn.execute(delete(table).where(id_col == tbl_id))
    for table, db_col, tbl_col in (
        (s.next_write_id, s.next_write_id.c.nwi_database, s.next_write_id.c.nwi_table),
        (s.txn_to_write_id, s.txn_to_write_id.c.t2w_database, s.txn_to_write_id.c.t2w_table),
        (s.txn_components, s.txn_components.c.tc_database, s.txn_components.c.tc_table),
        (
            s.completed_txn_components,
            s.completed_txn_components.c.ctc_database,
            s.completed_txn_components.c.ctc_table,
        ),
        (s.write_set, s.write_set.c.ws_database, s.write_set.c.ws_table),
        (s.compaction_queue, s.compaction_queue.c.cq_database, s.compaction_queue.c.cq_table),
    ):
        conn.execute(delete(table).where(db_col == db, tbl_col == name))
    notifications.emit(conn, "DROP_TABLE", db=db, table=name)
    return [str(location)]


def alter_table_properties(conn: Connection, db: str, name: str, props: Mapping[str, str]) -> None:
    tbl_id = require_table_id(conn, db, name)
    check_bucketing_version(props)
    set_properties(conn, tbl_id, props)
    notifications.emit(conn, "ALTER_TABLE", db=db, table=name, message={"properties": dict(props)})


def alter_table_columns(conn: Connection, db: str, name: str, columns: Sequence[Column]) -> None:
    """Replace the table's data columns, as Hive's ALTER does through its metastore: a position whose type
    changes to one its files cannot be read as is refused (:func:`acidstream.acid.evolution.check_change`)."""
    tbl_id = require_table_id(conn, db, name)
    old = [Column(c.column_name, parse_type(c.type_name)) for c in _stored_columns(conn, tbl_id)]
    evolution.check_change(old, columns)
    conn.execute(delete(s.columns_v2).where(s.columns_v2.c.tbl_id == tbl_id))
    _insert_columns(conn, tbl_id, columns, (), ())
    notifications.emit(
        conn, "ALTER_TABLE", db=db, table=name, message={"columns": [[c.name, str(c.type)] for c in columns]}
    )


def set_properties(conn: Connection, tbl_id: int, props: Mapping[str, str]) -> None:
    p = s.table_params.c
    for key, value in props.items():
        updated = conn.execute(
            update(s.table_params)
            .where(p.tbl_id == tbl_id, p.param_key == key)
            .values(param_value=str(value))
        ).rowcount
        if not updated:
            conn.execute(insert(s.table_params).values(tbl_id=tbl_id, param_key=key, param_value=str(value)))


# --- partitions --------------------------------------------------------------------------------------------------


def _partition_keys(conn: Connection, tbl_id: int) -> list[str]:
    pk = s.partition_keys.c
    return list(
        conn.execute(select(pk.pkey_name).where(pk.tbl_id == tbl_id).order_by(pk.integer_idx)).scalars()
    )


def partition_name(conn: Connection, db: str, table: str, values: Sequence[str | None]) -> tuple[int, str]:
    """(table id, Hive partition name) for partition values, checked against the table's keys."""
    tbl_id = require_table_id(conn, db, table)
    return tbl_id, checked_partition_name(f"{db}.{table}", _partition_keys(conn, tbl_id), values)


def _partition(row: Any, full_name: str) -> Partition:
    return Partition(full_name, tuple(json.loads(row.part_values)), row.part_name, row.location)


def add_partition(
    conn: Connection, db: str, table: str, values: Sequence[str | None], *, if_not_exists: bool = True
) -> Partition:
    tbl_id, name = partition_name(conn, db, table, values)
    existing = get_partition(conn, db, table, values)
    if existing is not None:
        if if_not_exists:
            return existing
        raise AlreadyExistsException(f"Partition {name} of {db}.{table} already exists")
    location = conn.execute(select(s.tbls.c.location).where(s.tbls.c.tbl_id == tbl_id)).scalar_one()
    location = f"{location}/{name}"
    stored = json.dumps([str(v) if v is not None else "" for v in values])
    conn.execute(
        insert(s.partitions).values(
            tbl_id=tbl_id, part_name=name, part_values=stored, location=location, create_time=now_ms()
        )
    )
    notifications.emit(
        conn, "ADD_PARTITION", db=db, table=table, partition=name, message={"location": location}
    )
    return Partition(f"{db}.{table}", tuple(json.loads(stored)), name, location)


def get_partition(conn: Connection, db: str, table: str, values: Sequence[str | None]) -> Partition | None:
    tbl_id, name = partition_name(conn, db, table, values)
    p = s.partitions.c
    row = conn.execute(select(s.partitions).where(p.tbl_id == tbl_id, p.part_name == name)).first()
    return None if row is None else _partition(row, f"{db}.{table}")


def list_partitions(conn: Connection, db: str, table: str) -> list[Partition]:
    tbl_id = require_table_id(conn, db, table)
    p = s.partitions.c
    rows = conn.execute(select(s.partitions).where(p.tbl_id == tbl_id).order_by(p.part_name)).all()
    return [_partition(r, f"{db}.{table}") for r in rows]


def drop_partition(conn: Connection, db: str, table: str, values: Sequence[str]) -> None:
    tbl_id, name = partition_name(conn, db, table, values)
    p = s.partitions.c
    if not conn.execute(delete(s.partitions).where(p.tbl_id == tbl_id, p.part_name == name)).rowcount:
        raise NoSuchObjectException(f"Partition {name} of {db}.{table} does not exist")
    notifications.emit(conn, "DROP_PARTITION", db=db, table=table, partition=name)
