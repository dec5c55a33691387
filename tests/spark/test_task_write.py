from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from acidstream.spark.task_write import coalesce


@given(st.lists(st.integers(0, 30), max_size=40), st.integers(1, 50))
def test_coalesce_keeps_rows_in_order_in_chunks_of_at_least_the_target(sizes: list[int], target: int) -> None:
    batches, start = [], 0
    for n in sizes:
        batches.append(pa.record_batch([pa.array(range(start, start + n), pa.int64())], names=["x"]))
        start += n
    chunks = list(coalesce(iter(batches), target))
    assert [v for c in chunks for v in c.column("x").to_pylist()] == list(range(start))
    assert all(c.num_rows >= target for c in chunks[:-1])
    assert all(c.num_rows for c in chunks)
