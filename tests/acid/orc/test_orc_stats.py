"""File-level statistics merged from chunks must equal the statistics of the whole (or omit what is unknown)."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pyarrow.orc as po
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.orc.protobuf import Message
from acidstream.acid.orc.stats import (
    BUCKET,
    DATE,
    DECIMAL,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    FileStatistics,
)
from acidstream.acid.orc.tail import read_tail


def file_stats(table: pa.Table) -> list[Message]:
    sink = pa.BufferOutputStream()
    po.write_table(table, sink, compression="ZLIB")
    data = sink.getvalue()
    return read_tail(pa.BufferReader(data), data.size).statistics


def merge_all(current: list[Message], new: list[Message]) -> list[Message]:
    """Two chunks' column statistics merged as a file's running totals merge them."""
    totals = FileStatistics([m.encode() for m in current])
    totals.add([m.encode() for m in new])
    return [Message.decode(b) for b in totals.encoded()]


def merge(a: Message, b: Message) -> Message:
    return merge_all([a], [b])[0]


def split_and_merge(values: list[object], cut: int, typ: pa.DataType) -> tuple[Message, Message]:
    """(merged stats of the two halves, stats pyarrow computes for the whole column)."""
    parts = [values[:cut], values[cut:]]
    halves = [file_stats(pa.table({"c": pa.array(p, typ)})) for p in parts]
    merged = merge_all(halves[0], halves[1])
    whole = file_stats(pa.table({"c": pa.array(values, typ)}))
    assert len(merged) == len(whole) == 2
    return merged[1], whole[1]


def fits(n: int) -> bool:
    return -(1 << 63) <= n < (1 << 63)


def generic(m: Message) -> tuple[int | None, int | None]:
    return m.uint(1), m.uint(10)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-(1 << 63), (1 << 63) - 1)), max_size=40), st.data())
def test_int_statistics(values: list[int | None], data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(values)))
    merged, whole = split_and_merge(values, cut, pa.int64())
    assert generic(merged) == generic(whole)
    present = [v for v in values if v is not None]
    m = merged.message(INT)
    if present:
        assert m is not None
        assert (m.sint(1), m.sint(2)) == (min(present), max(present))
        if m.sint(3) is not None:  # a sum that is kept must be exact
            assert m.sint(3) == sum(present)
        # ORC keeps a chunk's sum while its running sum never overflows; the merge keeps it when both
        # chunks kept theirs and their total fits. Then the merged sum must be there.
        halves = [[v for v in values[:cut] if v is not None], [v for v in values[cut:] if v is not None]]
        if fits(sum(present)) and all(fits(sum(h[:i])) for h in halves for i in range(len(h) + 1)):
            assert m.sint(3) == sum(present)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=30), st.data())
def test_string_statistics(values: list[str | None], data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(values)))
    merged, whole = split_and_merge(values, cut, pa.string())
    assert generic(merged) == generic(whole)
    if any(v is not None for v in values):
        a, b = merged.message(STRING), whole.message(STRING)
        assert a is not None and b is not None
        assert (a.bytes_(1), a.bytes_(2), a.sint(3)) == (b.bytes_(1), b.bytes_(2), b.sint(3))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(-1e300, 1e300)), max_size=30), st.data())
def test_double_statistics(values: list[float | None], data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(values)))
    merged, whole = split_and_merge(values, cut, pa.float64())
    assert generic(merged) == generic(whole)
    if any(v is not None for v in values):
        a, b = merged.message(DOUBLE), whole.message(DOUBLE)
        assert a is not None and b is not None
        assert (a.double(1), a.double(2)) == (b.double(1), b.double(2))


def test_other_kinds_match_whole_file_statistics() -> None:
    ns = pa.timestamp("ns")
    cases: list[tuple[list[object], pa.DataType, int]] = [
        ([True, None, False, True, True], pa.bool_(), BUCKET),
        (
            [datetime.date(2001, 1, 1), None, datetime.date(1960, 5, 5), datetime.date(2030, 1, 1)],
            pa.date32(),
            DATE,
        ),
        (
            [decimal.Decimal("1.25"), None, decimal.Decimal("-7.50"), decimal.Decimal("3.00")],
            pa.decimal128(9, 2),
            DECIMAL,
        ),
        ([1_000_000_001, 5, None, 1_000_000_000, 7_000_000_999, 7_000_000_998], ns, TIMESTAMP),
    ]
    for values, typ, kind in cases:
        for cut in range(len(values) + 1):
            merged, whole = split_and_merge(values, cut, typ)
            assert generic(merged) == generic(whole)
            a, b = merged.message(kind), whole.message(kind)
            assert a is not None and b is not None
            if kind == DECIMAL:
                for f in (1, 2, 3):
                    assert decimal.Decimal(a.string(f) or "nan") == decimal.Decimal(b.string(f) or "nan")
            else:
                assert sorted(a.fields) == sorted(b.fields), (typ, cut)


def test_int_sum_overflow_is_dropped_not_wrapped() -> None:
    big = (1 << 63) - 10
    merged, _ = split_and_merge([big, 20], 1, pa.int64())
    m = merged.message(INT)
    assert m is not None and (m.sint(1), m.sint(2), m.sint(3)) == (20, big, None)


def test_kind_part_missing_on_a_side_with_values_is_dropped() -> None:
    a = Message().set_uint(1, 3).set_message(INT, Message().set_sint(1, 1).set_sint(2, 5))
    b = Message().set_uint(1, 2)  # values, but no int statistics: bounds unknown
    assert merge(a, b).message(INT) is None
    empty = Message().set_uint(1, 0).set_uint(10, 1)  # only nulls: does not constrain the bounds
    got = merge(a, empty)
    assert got.message(INT) == a.message(INT) and got.uint(10) == 1 and got.uint(1) == 3


def test_truncated_string_bounds_stay_bounds() -> None:
    exact = Message().set_uint(1, 1).set_message(STRING, Message().set_bytes(1, b"b").set_bytes(2, b"c"))
    bounded = Message().set_uint(1, 1).set_message(STRING, Message().set_bytes(4, b"a").set_bytes(5, b"z"))
    s = merge(exact, bounded).message(STRING)
    assert s is not None
    assert (s.bytes_(1), s.bytes_(4), s.bytes_(2), s.bytes_(5)) == (None, b"a", None, b"z")
    s = merge(
        exact, Message().set_uint(1, 1).set_message(STRING, Message().set_bytes(4, b"b").set_bytes(5, b"bb"))
    ).message(STRING)
    assert s is not None and (s.bytes_(1), s.bytes_(2)) == (b"b", b"c")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.one_of(st.none(), st.integers(-(1 << 40), 1 << 40)),
                st.one_of(st.none(), st.text(max_size=6)),
            ),
            max_size=8,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_running_file_statistics_equal_merging_chunk_by_chunk(
    chunks: list[list[tuple[object, object]]],
) -> None:
    """A transaction batch's file adds one chunk's statistics per commit to running totals, kept decoded: the
    encoded totals must be what merging encoded statistics pairwise (decoding both each time) gives, after
    every chunk."""
    encoded = [
        [
            m.encode()
            for m in file_stats(
                pa.table(
                    {
                        "i": pa.array([i for i, _ in chunk], pa.int64()),
                        "s": pa.array([s for _, s in chunk], pa.string()),
                    }
                )
            )
        ]
        for chunk in chunks
    ]
    running = FileStatistics(encoded[0])
    folded = [Message.decode(b) for b in encoded[0]]
    for chunk in encoded[1:]:
        running.add(chunk)
        folded = merge_all(folded, [Message.decode(b) for b in chunk])
        assert running.encoded() == [m.encode() for m in folded]
    # and the totals are the statistics of all the rows (what pyarrow writes for them as one file)
    rows = [row for chunk in chunks for row in chunk]
    whole = file_stats(
        pa.table(
            {
                "i": pa.array([i for i, _ in rows], pa.int64()),
                "s": pa.array([s for _, s in rows], pa.string()),
            }
        )
    )
    totals = [Message.decode(b) for b in running.encoded()]
    assert [generic(m) for m in totals] == [generic(m) for m in whole]
    ints = [i for i, _ in rows if i is not None]
    if ints:
        part = totals[1].message(INT)
        assert part is not None and (part.sint(1), part.sint(2), part.sint(3)) == (
            min(ints),
            max(ints),
            sum(ints),
        )
    texts = [t for _, t in rows if t is not None]
    if texts:
        part = totals[2].message(STRING)
        assert part is not None and (part.string(1), part.string(2)) == (min(texts), max(texts))
