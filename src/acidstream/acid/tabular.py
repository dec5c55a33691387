"""Columnar input (streaming's ``write_batch``, mutation batches): align an Arrow table or pandas DataFrame to
the table's columns.

Columns are matched by name case-insensitively (Hive column names are lower-case), extra columns are refused
(a typo must not silently drop data), missing ones are null, and values are cast safely: a value that does not
fit its column (overflow, bad decimal, wrong type) is a :class:`SerializationError` naming the field and the
first offending row.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from acidstream.errors import SerializationError


def to_record_batch(data: Any, schema: pa.Schema, *, first_index: int = 0) -> pa.RecordBatch:
    """``data`` (pa.Table, pa.RecordBatch or pandas.DataFrame) as one RecordBatch of exactly ``schema``."""
    table = as_table(data)
    by_name: dict[str, int] = {}
    for i, name in enumerate(table.column_names):
        key = str(name).lower()
        if key in by_name:
            raise SerializationError(f"duplicate column {name!r} (names are case-insensitive)", field=key)
        by_name[key] = i
    unknown = set(by_name) - {f.name for f in schema}
    if unknown:
        raise SerializationError(
            f"columns {sorted(unknown)} are not in the table (expected {schema.names})",
            field=sorted(unknown)[0],
        )
    arrays = []
    for f in schema:
        if f.name not in by_name:
            arrays.append(pa.nulls(table.num_rows, f.type))
            continue
        column = table.column(by_name[f.name]).combine_chunks()
        arrays.append(_cast(column, f, first_index))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def as_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if type(data).__module__.startswith("pandas"):
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise _unconvertible(data, exc) from exc
    raise SerializationError(
        f"columnar input is a pyarrow Table/RecordBatch or pandas DataFrame, not {type(data)}"
    )


def _unconvertible(frame: Any, exc: Exception) -> SerializationError:
    """The error of a DataFrame Arrow cannot convert (an object column mixing ints and strings, say), naming
    the column and its first value that does not fit the values before it (found by bisection)."""
    for name in frame.columns:
        column = frame[name]
        if _converts(column):
            continue
        lo, hi = 0, len(column)  # the first ``lo`` values convert together, the first ``hi`` do not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if _converts(column.iloc[:mid]) else (lo, mid)
        value = column.iloc[lo]
        return SerializationError(
            f"{value!r} ({type(value).__name__}) does not fit the column's earlier values: "
            f"{exc.args[0] if exc.args else exc}",
            record_index=lo,
            field=str(name),
        )
    return SerializationError(f"the DataFrame cannot be converted to Arrow: {exc}")


def _converts(values: Any) -> bool:
    try:
        pa.Array.from_pandas(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return False
    return True


def _cast(column: pa.Array, target: pa.Field, first_index: int) -> pa.Array:
    if column.type == target.type:
        return column
    try:
        return pc.cast(column, target.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        row = _first_bad_row(column, target.type)
        where = first_index + row if row is not None else None
        raise SerializationError(
            f"cannot convert {column.type} to {target.type}: {exc}", record_index=where, field=target.name
        ) from exc


def _first_bad_row(column: pa.Array, target: pa.DataType) -> int | None:
    """Locate the failing value by bisection, so the error can name the record."""
    lo, hi = 0, len(column)
    if hi == 0:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            pc.cast(column.slice(lo, mid - lo), target, safe=True)
            lo = mid
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            hi = mid
    try:
        pc.cast(column.slice(lo, 1), target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return lo
    return None
