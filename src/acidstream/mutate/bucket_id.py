"""``BucketIdResolver``: the bucket a row belongs to, from its bucketed columns, exactly as Hive buckets it.

New records get it attached as their ``ROW__ID`` before grouping (the Mutation API's "slightly unintuitive
trick"): it spreads inserts over workers as Hive's bucketing would, and the Mutation API's coordinators check
records against it, since a row never moves between buckets. Hive's writers hash the bucketed columns in two
orders (:class:`~acidstream.acid.bucketing.BucketKeyOrder`); new rows take Hive SQL's, ``CLUSTERED BY`` order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from acidstream.acid.bucketing import BucketKeyOrder, bucket_numbers
from acidstream.acid.codec import BucketCodec
from acidstream.acid.tabular import as_table
from acidstream.errors import SerializationError
from acidstream.metastore.models import TableDefinition
from acidstream.mutate.record_id import ROW_ID, ROW_ID_TYPE, RecordIdentifier
from acidstream.mutate.table import AcidTable


class BucketIdResolver:
    """Hive's ``BucketIdResolverImpl`` for one table (unbucketed tables: every row in bucket 0).

    ``order``: the Hive writer whose placement to compute (Hive's resolver hashes the columns its caller lists,
    in the caller's order); Hive SQL's by default.
    """

    def __init__(
        self, table: AcidTable | TableDefinition, order: BucketKeyOrder = BucketKeyOrder.CLUSTERED_BY
    ) -> None:
        definition = table.table if isinstance(table, AcidTable) else table
        self.num_buckets = definition.num_buckets
        self.version = definition.bucketing_version
        self.order = order
        by_name = {c.name: c for c in definition.columns}
        names = order.columns([c.name for c in definition.columns], definition.bucket_columns)
        self.columns = [by_name[name] for name in names]

    def compute_bucket_id(self, record: Mapping[str, Any]) -> int:
        """The bucket of one record (a mapping of column name to value)."""
        values = {str(k).lower(): v for k, v in record.items()}
        missing = [c.name for c in self.columns if c.name not in values]
        if missing:
            raise SerializationError(f"record lacks bucketed columns {missing}", field=missing[0])
        arrays = {}
        for c in self.columns:
            try:
                arrays[c.name] = pa.array([values[c.name]], type=c.type.to_arrow())
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
                raise SerializationError(f"cannot convert to {c.type}: {exc}", field=c.name) from exc
        return int(self.compute_bucket_ids(pa.table(arrays))[0])

    def compute_bucket_ids(self, data: pa.Table | pa.RecordBatch) -> npt.NDArray[np.int32]:
        """The bucket of every row; ``data`` holds the bucketed columns with the table's types."""
        if self.num_buckets <= 1 or not self.columns:
            return np.zeros(data.num_rows, dtype=np.int32)
        arrays = [data.column(c.name) for c in self.columns]
        return bucket_numbers(arrays, [c.type for c in self.columns], self.num_buckets, self.version)

    def attach(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``record`` with its ``ROW__ID`` set for an insert into its bucket."""
        return {**record, ROW_ID: RecordIdentifier.for_insert(self.compute_bucket_id(record))}

    def attach_batch(self, data: Any) -> pa.Table:
        """Arrow table / pandas frame with a ``ROW__ID`` column (replacing any) set for inserts."""
        table = as_table(data)
        names = {n.lower(): n for n in table.column_names}
        for c in self.columns:
            if c.name not in names:
                raise SerializationError(f"data lacks bucketed column {c.name!r}", field=c.name)
        typed = (
            pa.table({c.name: table.column(names[c.name]).cast(c.type.to_arrow()) for c in self.columns})
            if self.columns
            else table
        )
        props = BucketCodec.V1.encode_many(self.compute_bucket_ids(typed))
        n = table.num_rows
        minus_one = pa.array(np.full(n, -1, dtype=np.int64))
        row_id = pa.StructArray.from_arrays([minus_one, pa.array(props), minus_one], fields=list(ROW_ID_TYPE))
        if ROW_ID in table.column_names:
            table = table.drop_columns([ROW_ID])
        return table.append_column(pa.field(ROW_ID, ROW_ID_TYPE), row_id)
