from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.bucketing import bucket_numbers
from acidstream.acid.partitions import DEFAULT_PARTITION_NAME
from acidstream.acid.types import Column, parse_type
from acidstream.streaming.routing import RowRouter, _stable_order

COLUMNS = [Column("id", parse_type("int")), Column("msg", parse_type("string"))]


@given(st.lists(st.integers(-(2**40), 2**40), max_size=300))
def test_stable_order_is_numpys_stable_argsort(codes: list[int]) -> None:
    arr = np.array(codes, dtype=np.int64)
    assert np.array_equal(_stable_order(arr), np.argsort(arr, kind="stable"))


@given(st.lists(st.integers(0, 3), max_size=300))
def test_stable_order_on_small_codes_takes_the_radix_path_with_the_same_result(codes: list[int]) -> None:
    arr = np.array(codes, dtype=np.int64)
    assert np.array_equal(_stable_order(arr), np.argsort(arr, kind="stable"))


@given(
    st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.sampled_from(["EU", "", None, "Asia"])),
        min_size=1,
        max_size=200,
    )
)
def test_dynamic_routing_keeps_every_row_once_in_input_order_in_hives_bucket(
    rows: list[tuple[int, str | None]],
) -> None:
    router = RowRouter(COLUMNS, ["id"], 4, 2, static_values=None, num_partition_keys=1)
    ids = [r[0] for r in rows]
    batch = pa.record_batch(
        [
            pa.array(ids, pa.int32()),
            pa.array([str(i) for i in range(len(rows))]),
            pa.array([r[1] for r in rows]),
        ],
        names=["id", "msg", "region"],
    )
    expected_buckets = bucket_numbers([pa.array(ids, pa.int32())], [parse_type("int")], 4, 2)
    seen: list[int] = []
    for routed in router.route(batch):
        positions = [int(m) for m in routed.rows.column("msg").to_pylist()]
        assert positions == sorted(positions)  # input order within each (partition, bucket)
        for p in positions:
            assert expected_buckets[p] == routed.bucket_id
            region = rows[p][1]
            assert routed.partition_values == (region or DEFAULT_PARTITION_NAME,)
        seen.extend(positions)
    assert sorted(seen) == list(range(len(rows)))
