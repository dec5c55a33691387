"""A partition's mutations as one Arrow table in the Mutation API's order, handed to a coordinator run by run.

Merge, update and delete (in Python and in Spark tasks) compute mutations as tables with an operation column;
this is the one place that orders them — by bucket, then updates and deletes by ROW__ID, inserts last — and
cuts them into the coordinator's per-operation batch calls.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from acidstream.acid.runs import runs
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.record_id import ROW_ID, row_id_arrays

#: Operation of each mutation, with Hive's event codes.
OP = "__op"
INSERT, UPDATE, DELETE = 0, 1, 2


def apply_mutations(
    coordinator: MutatorCoordinator,
    partition_values: Sequence[str | None],
    mutations: pa.Table,
    *,
    presorted: bool = False,
) -> None:
    """Write ``mutations`` (``ROW__ID``, ``__op`` and the data columns; deletes' data may be null) of one
    partition. ``presorted``: already in the order this would give (a Spark task's sorted partition)."""
    if mutations.num_rows == 0:
        return
    write_ids, props, row_ids, buckets = row_id_arrays(mutations.column(ROW_ID))
    ops = mutations.column(OP).to_numpy(zero_copy_only=False).astype(np.int8)
    if not presorted:
        order = np.lexsort((row_ids, props, write_ids, ops == INSERT, buckets))
        mutations = mutations.take(pa.array(order))
        ops, buckets = ops[order], buckets[order]
    key = buckets.astype(np.int64) * 4 + ops
    calls = {
        INSERT: coordinator.insert_batch,
        UPDATE: coordinator.update_batch,
        DELETE: coordinator.delete_batch,
    }
    for start, end in runs(key):
        run = mutations.slice(start, end - start).drop_columns([OP])
        calls[int(ops[start])](partition_values, run)
