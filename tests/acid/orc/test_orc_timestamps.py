"""Timestamps before 1970 with a fraction inside lists and maps whose arrays are slices, or whose null lists
are backed by elements (as arrays built from offsets and a mask are): only the elements the offsets select
are stored, in several stripes (orc/timestamps.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.orc as po
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.orc.tail import read_tail
from acidstream.acid.orc.timestamps import check_writable, prepare, repair

TS = pa.timestamp("ns")
#: Before 1970 with fractions, outside the last second before it (which stays refused).
OLD = st.one_of(
    st.integers(-(10**15), -(10**9) - 1),
    st.integers(-(10**9), 10**9).filter(lambda v: not (-(10**9) < v < 0 and v % 10**9 > 999_999)),
)


def _list(values: list[int | None], lengths: list[int], nulls: list[bool], t: pa.DataType) -> pa.Array:
    """Lists of ``lengths`` elements taken in turn from ``values``; the rows in ``nulls`` null but their
    elements left in place (offsets and a mask, as an adapter builds them)."""
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    elements = pa.array([values[i % len(values)] for i in range(int(offsets[-1]))], t)
    return pa.ListArray.from_arrays(pa.array(offsets), elements, mask=pa.array(nulls))


@given(
    st.lists(st.one_of(st.none(), OLD), min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=2, max_size=400),
    st.integers(0, 3),
)
@settings(max_examples=60, deadline=None)
def test_sliced_and_null_backed_lists_read_back(
    values: list[int | None], rows: list[tuple[int, bool]], skip: int
) -> None:
    lengths = [n for n, _ in rows]
    nulls = [null for _, null in rows]
    lists = _list(values, lengths, nulls, TS)
    keyed = _list([v if v is not None else 0 for v in values], lengths, nulls, TS)  # map keys are never null
    maps = pa.MapArray.from_arrays(keyed.offsets, keyed.values, lists.values, mask=keyed.is_null())
    inner = pa.concat_arrays([lists, lists])  # each row: a list of two lists
    nested = pa.ListArray.from_arrays(
        pa.array(np.arange(0, len(inner) + 1, 2), pa.int32()),
        inner,
        mask=pa.array([i % 3 == 1 for i in range(len(rows))]),
    )
    table = pa.table({"l": lists, "m": maps, "ll": nested}).slice(skip)
    for name, column in zip(table.column_names, table.columns, strict=True):
        check_writable(column.chunk(0), name)
    prepared, fix = prepare(table)
    sink = pa.BufferOutputStream()
    po.write_table(prepared, sink, stripe_size=1024, batch_size=64)
    data = sink.getvalue() if fix is None else repair(sink.getvalue(), fix)
    assert po.read_table(pa.BufferReader(data)).to_pylist() == table.to_pylist()
    if len(rows) > 300:
        assert len(read_tail(pa.BufferReader(data), data.size).stripes) > 1
