"""Names and places every backend checks alike: Hive's rule for database, table and column names, ``db.table``
split, a table's definition checked before anything is created, and where a database's and table's files go
under a warehouse."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from acidstream.acid.partitions import make_part_name
from acidstream.acid.types import Column
from acidstream.errors import InvalidObjectException

DEFAULT_DB = "default"
#: Hive's rule for names (``MetaStoreUtils.validateName``: Java's ``\w+``), lower-cased as Hive stores them.
_IDENT = re.compile(r"^[a-z0-9_]+$")
#: The longest name a database, table or column may have: the metastore's name columns (Hive's DBS.NAME and
#: PARTITION_KEYS.PKEY_NAME too), and short enough for a directory name (a partition's ``key=value`` included).
MAX_NAME_LENGTH = 128


def split_name(full_name: str, default_db: str = DEFAULT_DB) -> tuple[str, str]:
    """``db.t`` or ``t`` → (db, t), lower-cased as Hive stores names."""
    parts = full_name.strip().lower().split(".")
    if len(parts) == 1:
        parts = [default_db, parts[0]]
    if len(parts) != 2 or not all(_IDENT.match(p) for p in parts):
        raise InvalidObjectException(f"invalid table name {full_name!r} (expected db.table)")
    return parts[0], parts[1]


def check_ident(kind: str, name: str) -> str:
    """A name that may exist, lower-cased (no length limit: a table made before the limit can still go)."""
    low = name.lower()
    if not _IDENT.match(low):
        raise InvalidObjectException(f"invalid {kind} name {name!r}")
    return low


def valid_name(kind: str, name: str) -> str:
    """A new database, table or column name, lower-cased, checked as Hive's metastore checks it; every backend
    refuses the same names before anything is created."""
    low = name.lower()
    if not _IDENT.match(low) or len(low) > MAX_NAME_LENGTH:
        shown = repr(name) if len(name) <= 64 else f"{name[:48]!r}... ({len(name)} characters)"
        raise InvalidObjectException(
            f"{shown} is not a valid {kind} name: names are letters, digits and underscores, "
            f"at most {MAX_NAME_LENGTH} characters"
        )
    return low


def db_location(warehouse: str, db: str) -> str:
    return warehouse if db == DEFAULT_DB else os.path.join(warehouse, f"{db}.db")


def table_location(warehouse: str, db: str, table: str) -> str:
    return os.path.join(db_location(warehouse, db), table)


def validate_table(
    columns: Sequence[Column],
    partition_keys: Sequence[Column],
    bucket_columns: Sequence[str],
    num_buckets: int,
) -> None:
    if not columns:
        raise InvalidObjectException("a table needs at least one column")
    names = [c.name for c in columns]
    for name in names:
        valid_name("column", name)
    for key in partition_keys:
        valid_name("partition column", key.name)
    seen: set[str] = set()
    for name in names + [p.name for p in partition_keys]:
        if name in seen:
            raise InvalidObjectException(f"duplicate column name '{name}'")
        seen.add(name)
    for key in partition_keys:
        if not key.type.is_primitive:
            raise InvalidObjectException(
                f"partition key '{key.name}' must have a primitive type, not {key.type}"
            )
    for col in bucket_columns:
        if col.lower() not in names:
            raise InvalidObjectException(f"bucket column '{col}' is not a column of the table")
    if num_buckets < 0 or (bucket_columns and num_buckets == 0) or (num_buckets and not bucket_columns):
        raise InvalidObjectException("CLUSTERED BY needs bucket columns and a positive number of buckets")


#: The bucketing versions Hive's readers and writers know (``bucketing_version``: 1, Hive 2's hash; 2, Hive 3's).
BUCKETING_VERSIONS = ("1", "2")


def check_bucketing_version(properties: Mapping[str, str]) -> None:
    """A table's ``bucketing_version`` property, if set, must be one Hive's readers know."""
    version = properties.get("bucketing_version")
    if version is not None and version not in BUCKETING_VERSIONS:
        raise InvalidObjectException(f"bucketing_version must be 1 or 2, not {version!r}")


def checked_partition_name(table: str, keys: Sequence[str], values: Sequence[str | None]) -> str:
    """Hive's name of the partition of ``table`` (``db.t``, partitioned by ``keys``) with ``values``; the values
    checked against the keys first."""
    if not keys:
        raise InvalidObjectException(f"Table {table} is not partitioned")
    if len(values) != len(keys):
        raise InvalidObjectException(
            f"Table {table} has {len(keys)} partition keys {list(keys)}, got {len(values)} values {list(values)}"
        )
    return make_part_name(keys, [None if v is None else str(v) for v in values])
