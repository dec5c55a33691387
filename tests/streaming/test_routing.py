from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
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
@settings(deadline=None)  # a loaded machine's first call took seconds
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


def partition_column(values: list[str | None], dictionary: bool) -> pa.Array:
    """Strings (as write_batch gives them) or dictionary-encoded as parsers give them, here with the worst
    dictionary: one entry per row, so repeated values, '' and null entries."""
    if not dictionary:
        return pa.array(values, pa.string())
    return pa.DictionaryArray.from_arrays(
        pa.array(range(len(values)), pa.int32()), pa.array(values, pa.string())
    )


def route_regions(
    rows: list[tuple[str | None, str | None]], dictionary: bool = False
) -> dict[tuple[str, ...], list[int]]:
    """Rows with two partition columns, unbucketed: each partition's row positions, checking each comes once."""
    router = RowRouter(COLUMNS, [], 0, 2, static_values=None, num_partition_keys=2)
    batch = pa.record_batch(
        [
            pa.array(range(len(rows)), pa.int32()),
            pa.array([str(i) for i in range(len(rows))]),
            partition_column([r[0] for r in rows], dictionary),
            partition_column([r[1] for r in rows], dictionary),
        ],
        names=["id", "msg", "continent", "country"],
    )
    got: dict[tuple[str, ...], list[int]] = {}
    for routed in router.route(batch):
        assert routed.partition_values not in got  # one group per partition
        got[routed.partition_values] = [int(m) for m in routed.rows.column("msg").to_pylist()]
    return got


def expected_regions(rows: list[tuple[str | None, str | None]]) -> dict[tuple[str, ...], list[int]]:
    want: dict[tuple[str, ...], list[int]] = {}
    for i, (a, b) in enumerate(rows):
        want.setdefault((a or DEFAULT_PARTITION_NAME, b or DEFAULT_PARTITION_NAME), []).append(i)
    return want


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["EU", "", None, "Asia", DEFAULT_PARTITION_NAME]),
            st.sampled_from(["fr", "", None, DEFAULT_PARTITION_NAME, "in"]),
        ),
        min_size=1,
        max_size=200,
    )
)
@pytest.mark.parametrize("dictionary", [False, True])
def test_null_empty_and_the_default_name_are_one_partition(
    dictionary: bool, rows: list[tuple[str | None, str | None]]
) -> None:
    assert route_regions(rows, dictionary) == expected_regions(rows)


def test_many_partition_tuples_route_like_few() -> None:
    """300 x 300 possible tuples: the codes are made dense by sorting, not by counting over their range."""
    rows: list[tuple[str | None, str | None]] = [(f"a{i % 300}", f"b{(i * 7) % 300}") for i in range(900)]
    rows += [(None, "b1"), ("", "b1"), ("a1", None)]
    assert route_regions(rows) == expected_regions(rows)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
            st.one_of(st.none(), st.text(max_size=12)),
            st.sampled_from(["EU", "Asia", "Africa"]),
        ),
        min_size=1,
        max_size=200,
    ),
    st.integers(0, 5),
)
@settings(deadline=None)  # a loaded machine's first call
def test_routed_rows_carry_their_bytes_as_pyarrow_counts_them(
    rows: list[tuple[int | None, str | None, str]], skip: int
) -> None:
    """The buffering bound counts each group's bytes from the routed batch at once (pyarrow's ``nbytes`` of a
    slice costs ~15 µs, two per file); the count is pyarrow's, to a validity byte per column."""
    columns = [*COLUMNS, Column("big", parse_type("bigint")), Column("ok", parse_type("boolean"))]
    router = RowRouter(columns, ["id"], 4, 2, static_values=None, num_partition_keys=1)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([r[0] for r in rows], pa.int32()),
            pa.array([r[1] for r in rows], pa.string()),
            pa.array(range(len(rows)), pa.int64()),
            pa.array([i % 3 == 0 for i in range(len(rows))]),
            pa.array([r[2] for r in rows], pa.string()),
        ],
        names=["id", "msg", "big", "ok", "continent"],
    ).slice(min(skip, len(rows) - 1))  # an offset into the parent's buffers too
    for routed in router.route(batch):
        assert abs(routed.nbytes - routed.rows.nbytes) <= len(columns)
