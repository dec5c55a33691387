"""Hive column types as Spark sees them: DDL for ``DataSource.schema()`` and the Arrow shape Spark expects.

Spark's Arrow bridge is strict about types (a Python data source must yield exactly the Arrow schema Spark
derives from its own schema), so acidstream's in-memory Arrow types (nanosecond
timestamps, char/varchar as string) are mapped to Spark's (microsecond UTC timestamps) here, in one place.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from acidstream.acid.types import Column, HiveType
from acidstream.read.bucket_read import ROW_ID, ROW_ID_TYPE

#: ``ROW__ID`` as Hive 3 names its fields.
ROW_ID_DDL = "struct<writeid:bigint,bucketid:int,rowid:bigint>"
_SIMPLE = {"char": "string", "varchar": "string"}


def spark_ddl(t: HiveType) -> str:
    """Spark DDL of a Hive type (char/varchar read as string, as Spark's Hive ORC reader does)."""
    if t.name in _SIMPLE:
        return _SIMPLE[t.name]
    if t.name == "decimal":
        return f"decimal({t.precision},{t.scale})"
    if t.name == "array":
        return f"array<{spark_ddl(t.children[0])}>"
    if t.name == "map":
        return f"map<{spark_ddl(t.children[0])},{spark_ddl(t.children[1])}>"
    if t.name == "struct":
        inner = ",".join(f"`{n}`:{spark_ddl(c)}" for n, c in zip(t.field_names, t.children, strict=True))
        return f"struct<{inner}>"
    return t.name


def spark_arrow_type(t: HiveType) -> pa.DataType:
    """The Arrow type Spark expects for a column of Spark type ``spark_ddl(t)``."""
    if t.name == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if t.name == "array":
        return pa.list_(spark_arrow_type(t.children[0]))
    if t.name == "map":
        return pa.map_(spark_arrow_type(t.children[0]), spark_arrow_type(t.children[1]))
    if t.name == "struct":
        return pa.struct(
            [pa.field(n, spark_arrow_type(c)) for n, c in zip(t.field_names, t.children, strict=True)]
        )
    return t.to_arrow()


def schema_ddl(columns: Sequence[Column], with_row_id: bool) -> str:
    parts = [f"`{ROW_ID}` {ROW_ID_DDL}"] if with_row_id else []
    parts += [f"`{c.name}` {spark_ddl(c.type)}" for c in columns]
    return ", ".join(parts)


def spark_arrow_schema(columns: Sequence[Column], with_row_id: bool) -> pa.Schema:
    fields = [pa.field(ROW_ID, ROW_ID_TYPE)] if with_row_id else []
    fields += [pa.field(c.name, spark_arrow_type(c.type)) for c in columns]
    return pa.schema(fields)


def to_spark_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast a reader batch (same column order) to exactly ``schema``.

    Hive timestamps have no zone: the wall clock is taken as UTC (the sessions run in UTC); sub-microsecond
    digits are dropped, as Spark's own ORC reader does.
    """
    if batch.schema.equals(schema):
        return batch
    arrays = [
        a if a.type == f.type else a.cast(f.type, safe=False)
        for a, f in zip(batch.columns, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
