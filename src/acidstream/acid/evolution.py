"""Hive's rules for changing a table's columns (``ALTER TABLE ... ADD/REPLACE COLUMNS``, ``CHANGE COLUMN``).

Reading, Hive 4 matches a file's fields to the table's columns by name, unless the file names them ``_col0``...
as Hive's own writers do: then by position (ORC's schema evolution). A column the file lacks (added since, or
renamed: by name it is not found) reads as NULL; a widened one is converted (:func:`convert`): a decimal is
rounded half up to the column's scale now, and reads as NULL where it has more digits than its precision.

A Hive 4 metastore refuses a change that gives a column position a type its files cannot be read as
(``hive.metastore.disallow.incompatible.col.type.changes``, on by default): readers map an ACID file's columns
to the table's by position, so each old position must keep a type its old values convert to. The rule compares
type *names* only (``decimal(10,2)`` to ``decimal(5,1)`` passes, ``struct<a:int>`` to ``struct<b:string>`` too),
as Hive's does. The same rule and messages apply on our SQL metastore; see docs/format.md, Schema evolution.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from decimal import Context, Decimal, localcontext
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.types import Column
from acidstream.errors import InvalidOperationException

_STRINGS = frozenset({"string", "varchar", "char"})
#: Hive's order of numeric up-casts: a column may move only to a later type.
_NUMERIC_ORDER = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4, "decimal": 5, "float": 6, "double": 7}
_DATETIMES = frozenset({"date", "datetime", "timestamp", "timestamp with time zone"})
_PRIMITIVES = frozenset(
    {"void", "boolean", "binary", "interval_year_month", "interval_day_time"}
    | _STRINGS
    | _NUMERIC_ORDER.keys()
    | _DATETIMES
)


def compatible(old: str, new: str) -> bool:
    """Whether a column whose type is named ``old`` may become one named ``new`` (Hive's rule)."""
    if old == new:
        return True
    if old not in _PRIMITIVES or new not in _PRIMITIVES:
        return False
    if old in _STRINGS and new in _STRINGS:
        return True
    if old in _NUMERIC_ORDER and new in _NUMERIC_ORDER:
        return _NUMERIC_ORDER[old] < _NUMERIC_ORDER[new]
    return old == "void" or (new in _STRINGS and (old in _DATETIMES or old in _NUMERIC_ORDER))


def check_change(old: Sequence[Column], new: Sequence[Column]) -> None:
    """Refuse ``new`` columns where a position of ``old`` takes an incompatible type, with Hive's message."""
    bad = [n.name for o, n in zip(old, new, strict=False) if not compatible(o.type.name, n.type.name)]
    if bad:
        raise InvalidOperationException(
            "The following columns have types incompatible with the existing columns in their respective "
            "positions :\n" + ",".join(bad)
        )


def add_columns(
    old: Sequence[Column], added: Sequence[Column], partition_keys: Sequence[Column]
) -> list[Column]:
    """``ADD COLUMNS``: ``added`` after the existing columns; a name already taken is Hive's duplicate error."""
    return _unique([*old, *added], partition_keys)


def replace_columns(
    table: str, old: Sequence[Column], new: Sequence[Column], partition_keys: Sequence[Column]
) -> list[Column]:
    """``REPLACE COLUMNS``: ``new`` as the whole list (old positions keep compatible types: :func:`check_change`).
    Fewer columns than ``old`` is refused, as Hive refuses it for a transactional table (whose files ORC's
    schema evolution reads)."""
    if len(new) < len(old):
        raise InvalidOperationException(
            f"Replacing columns cannot drop columns for table {table}. SerDe may be incompatible"
        )
    return _unique(list(new), partition_keys)


def change_column(
    table: str,
    old: Sequence[Column],
    name: str,
    column: Column,
    partition_keys: Sequence[Column],
    *,
    move: bool = False,
) -> list[Column]:
    """``CHANGE [COLUMN] name column``: rename or retype one column in place. ``move`` (``FIRST`` or ``AFTER
    other``) is refused, as Hive refuses to reorder the columns of a transactional table."""
    if move:
        raise InvalidOperationException(
            f"Reordering columns is not supported for table {table}. SerDe may be incompatible"
        )
    names = [c.name for c in old]
    _unique([*(c for c in old if c.name != name), column], partition_keys)  # Hive names a duplicate first
    if name not in names:
        raise InvalidOperationException(f"Invalid column reference {name}")
    at = names.index(name)
    return [*old[:at], column, *old[at + 1 :]]


def check_cascade(partitioned: bool) -> None:
    """``CASCADE`` (an ALTER of the partitions' columns too) is refused on a table without partitions, as Hive
    refuses it."""
    if not partitioned:
        raise InvalidOperationException("Alter table with non-partitioned table does not support cascade")


def _unique(columns: list[Column], partition_keys: Sequence[Column]) -> list[Column]:
    seen = {c.name for c in partition_keys}
    for c in columns:
        if c.name in seen:
            raise InvalidOperationException(f"Duplicate column name: {c.name}")
        seen.add(c.name)
    return columns


#: The names Hive's writers give a file's fields instead of the table's (``_col0``...).
_HIVE_INTERNAL_NAME = re.compile(r"_col\d+")


def maps_by_position(names: Sequence[str]) -> bool:
    """Whether Hive 4 maps a file's fields (``row``'s, or a plain file's columns) to the table's columns by
    position: when the file names them ``_col0``... as Hive's own writers do; by name otherwise."""
    return all(_HIVE_INTERNAL_NAME.fullmatch(n) for n in names)


def row_field_key(position: int, name: str, by_position: bool) -> str:
    """The (lower-case) name of the file field holding the table column ``name`` at ``position``."""
    return f"_col{position}" if by_position else name.lower()


def table_columns(row: pa.StructArray, names: Sequence[str], positions: Sequence[int]) -> list[pa.Array]:
    """The values of the table columns at ``positions`` (``names``: all the table's column names) out of a
    file's ``row`` (all its fields, or those read), matched as Hive 4 matches them; a column the file lacks
    is all NULL (of Arrow's null type: the caller casts to the column's type)."""
    file_names = [f.name for f in row.type]
    by_position = maps_by_position(file_names)
    index = {n.lower(): i for i, n in enumerate(file_names)}
    found = (index.get(row_field_key(p, names[p], by_position), -1) for p in positions)
    return [row.field(i) if i >= 0 else pa.nulls(len(row)) for i in found]


def convert(values: pa.Array, target: pa.DataType) -> pa.Array:
    """A file's ``values`` as the table's type ``target`` now (changed since the file was written), as Hive 4's
    reader converts them: a decimal or an integer becoming a decimal is rounded half up (away from zero) to
    ``target``'s scale and NULL where it then has more digits than ``target``'s precision allows (ORC's
    schema evolution, where Arrow's cast would refuse); inside structs, lists and maps too. A struct's fields
    are matched by name (a field added since reads NULL); anything else is Arrow's cast."""
    if values.type == target:
        return values
    if not _has_own(target):
        return values.cast(target)
    if pa.types.is_string(target):
        text = _TEXT.get(_kind(values.type))
        return values.cast(target) if text is None else _as_text(values, text)
    if pa.types.is_decimal(target):
        return _to_decimal(values, target) if not pa.types.is_floating(values.type) else values.cast(target)
    mask = values.is_null() if values.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(values.type):
        index = {f.name.lower(): i for i, f in enumerate(values.type)}
        children = [
            convert(values.field(index[f.name.lower()]), f.type)
            if f.name.lower() in index
            else pa.nulls(len(values), f.type)
            for f in target
        ]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(values.type):
        keys = convert(values.keys, target.key_type)
        items = convert(values.items, target.item_type)
        return pa.MapArray.from_arrays(values.offsets, keys, items, type=target, mask=mask)
    if pa.types.is_list(target) and pa.types.is_list(values.type):
        return pa.ListArray.from_arrays(
            values.offsets, convert(values.values, target.value_type), type=target, mask=mask
        )
    return values.cast(target)


def _has_own(t: pa.DataType) -> bool:
    """Whether values converted to ``t`` may need :func:`convert`'s own rules (Arrow's cast differs)."""
    if pa.types.is_decimal(t) or pa.types.is_string(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_own(f.type) for f in t)
    if pa.types.is_map(t):
        return _has_own(t.key_type) or _has_own(t.item_type)
    return pa.types.is_list(t) and _has_own(t.value_type)


def _kind(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_floating(t):
        return "float"
    return "timestamp" if pa.types.is_timestamp(t) else ""


def _decimal_text(value: Decimal) -> str:
    """As Hive prints a decimal: no trailing zeros after the point, no exponent."""
    return format(value.normalize(Context(prec=80)), "f")


def _double_text(value: float) -> str | None:
    """As Java's ``Double.toString`` prints a double (a float widened to double first): Java 19's rule (the
    shortest digits that read back, at least two; older JVMs sometimes print one more). NaN reads as NULL, as
    in ORC's conversion of a floating column to a string one."""
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    shortest = Decimal(repr(value))  # the shortest digits that read back as the value, as Java's
    if len(shortest.normalize().as_tuple().digits) == 1:  # Java prints two then: those closest to the value
        with localcontext(Context(prec=800)):
            exact = Decimal(value)
            shortest = exact.scaleb(-exact.adjusted()).quantize(Decimal("0.1")).scaleb(exact.adjusted())
    if 1e-3 <= abs(value) < 1e7:
        plain = format(shortest.normalize(), "f")
        return plain if "." in plain else plain + ".0"
    sign, digits, exponent = shortest.normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{exponent + len(digits) - 1}"


def _timestamp_text(nanos: int) -> str:
    """As Hive prints a timestamp (nanoseconds since 1970): ``yyyy-MM-dd HH:mm:ss``, then the fraction without
    trailing zeros, if any."""
    seconds, fraction = divmod(nanos, 10**9)
    when = _EPOCH + dt.timedelta(seconds=seconds)
    tail = f".{fraction:09d}".rstrip("0") if fraction else ""
    return f"{when.year:04d}-{when:%m-%d %H:%M:%S}{tail}"


_EPOCH = dt.datetime(1970, 1, 1)
_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


_TEXT: dict[str, Callable[[Any], str | None]] = {
    "decimal": _decimal_text,
    "float": _double_text,
    "timestamp": _timestamp_text,
}


def _as_text(values: pa.Array, text: Callable[[Any], str | None]) -> pa.Array:
    """``values`` as Hive's conversion to a string column prints them."""
    if pa.types.is_timestamp(values.type):
        scale = _NANOS[values.type.unit]
        values = pc.multiply(values.cast(pa.int64()), scale)
    return pa.array([None if v is None else text(v) for v in values.to_pylist()], pa.string())


def _to_decimal(values: pa.Array, target: pa.Decimal128Type) -> pa.Array:
    """Decimals or integers as ``target``: rounded half up to its scale, NULL where they do not fit."""
    scale = values.type.scale if pa.types.is_decimal(values.type) else 0
    wide = values.cast(pa.decimal256(76, scale))  # room for any value: at most 38 digits, so far
    if target.scale < scale:
        wide = pc.round(wide, ndigits=target.scale, round_mode="half_towards_infinity")
    wide = wide.cast(pa.decimal256(76, target.scale))  # exact: rounded to that scale
    bound = pa.scalar(10 ** (target.precision - target.scale), pa.int64()).cast(
        pa.decimal256(76, target.scale)
    )
    fits = pc.less(pc.abs(wide), bound)
    return pc.if_else(fits, wide, pa.nulls(len(wide), wide.type)).cast(target)


class TableShape(Protocol):
    """What of a table a writer's files and bucket routing depend on (a metastore's table definition)."""

    @property
    def columns(self) -> Sequence[Column]: ...
    @property
    def partition_keys(self) -> Sequence[Column]: ...
    @property
    def bucket_columns(self) -> Sequence[str]: ...
    @property
    def num_buckets(self) -> int: ...
    @property
    def bucketing_version(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...


def write_shape_change(was: TableShape, now: TableShape) -> str | None:
    """What changed between two reads of a table that a writer opened on ``was`` cannot follow (None: nothing):
    its columns or partition keys (files of the old columns), its buckets (rows routed by the old count,
    columns or ``bucketing_version``), or full ACID turned off. Other properties (``orc.compress``, compaction
    settings) may change under it: a writer keeps the values it opened with, as Hive's do."""
    changes = []
    for what, before, after in (
        ("columns", was.columns, now.columns),
        ("partition keys", was.partition_keys, now.partition_keys),
        ("bucket columns", was.bucket_columns, now.bucket_columns),
    ):
        if tuple(before) != tuple(after):
            changes.append(f"{what} were ({', '.join(map(str, before))}), now ({', '.join(map(str, after))})")
    for what, old, new in (
        ("buckets", was.num_buckets, now.num_buckets),
        ("bucketing_version", was.bucketing_version, now.bucketing_version),
        ("full ACID", was.is_transactional, now.is_transactional),
    ):
        if old != new:
            changes.append(f"{what} was {old}, now {new}")
    return "; ".join(changes) or None


def truncate(values: pa.Array, length: int | None) -> pa.Array:
    """String ``values`` cut to ``length`` characters (a ``char(n)``/``varchar(n)`` column's now; None: any),
    as Hive's reader cuts an old file's longer values after the column was narrowed."""
    if length is None or not len(values) or (pc.max(pc.utf8_length(values)).as_py() or 0) <= length:
        return values
    return pc.utf8_slice_codeunits(values, 0, length)


def text_length(column: Column) -> int | None:
    """The length a ``char(n)`` or ``varchar(n)`` column's values are cut to; None for other types."""
    return column.type.params[0] if column.type.name in ("char", "varchar") and column.type.params else None
