"""Our RLEv2 integer columns (rlev2.int_column) against ORC C++ (pyarrow) encoding the same values.

The claim: for one stripe of an int column without nulls, the DATA stream (decompressed) is byte for byte ORC
C++'s, every row index entry holds its positions and statistics (a compressed position's chunk start is each
codec's own: only the rest is compared), and the stripe's statistics are the same. Hypothesis draws the shapes
that pick each RLEv2 sub-encoding and each place a run can be cut.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from orcfiles import pyarrow_column

from acidstream.acid.orc.compression import CompressionKind, decompress
from acidstream.acid.orc.protobuf import Message, decode_varint
from acidstream.acid.orc.rlev2 import encode, int_column

BLOCK = 64 << 10
I64 = (-(1 << 63), (1 << 63) - 1)


def orc_cpp(values: np.ndarray, kind: CompressionKind, stride: int) -> tuple[bytes, list[object], bytes]:
    """ORC C++'s DATA stream (decompressed), row index entries and stripe statistics for column 1."""
    tail, streams = pyarrow_column(pa.array(values, pa.int64()), kind, BLOCK, row_index_stride=stride)
    [stats] = tail.stripe_statistics
    return (
        decompress(kind, streams[(1, 1)], BLOCK),
        entries(streams[(6, 1)], kind),
        Message.decode(stats).repeated_bytes(1)[1],
    )


def entries(index: bytes, kind: CompressionKind) -> list[object]:
    """Each row index entry: its positions (less a compressed one's chunk start) and statistics."""
    out: list[object] = []
    for entry in Message.decode(decompress(kind, index, BLOCK)).messages(1):
        packed, positions, at = entry.bytes_(1) or b"", [], 0
        while at < len(packed):
            value, at = decode_varint(packed, at)
            positions.append(value)
        out.append((positions[1:] if kind != CompressionKind.NONE else positions, entry.bytes_(2)))
    return out


def assert_as_orc_cpp(values: np.ndarray, stride: int = 10_000) -> None:
    values = np.asarray(values, dtype=np.int64)
    for kind in (CompressionKind.NONE, CompressionKind.ZLIB):
        ours = int_column(values, stride, kind, BLOCK)
        data, index, stats = orc_cpp(values, kind, stride)
        assert decompress(kind, ours.data, BLOCK) == data
        assert entries(ours.index, kind) == index
        assert ours.stats.encode() == stats


def runs(draw: st.DrawFn) -> np.ndarray:
    """Pieces of the shapes RLEv2 tells apart: equal values (fixed runs of every length), counters with and
    without gaps (DELTA), monotonic and not, small and wide values, outliers (PATCHED_BASE), extremes."""
    pieces = []
    for _ in range(draw(st.integers(1, 8))):
        n = draw(st.integers(1, 1200))
        shape = draw(st.sampled_from(["equal", "counter", "gaps", "random", "outliers", "extremes", "pairs"]))
        seed = draw(st.integers(0, 1 << 30))
        rng = np.random.default_rng(seed)
        start = draw(st.one_of(st.integers(-1000, 1000), st.integers(*I64)))
        if shape == "equal":
            piece = np.full(n, start)
        elif shape == "counter":
            piece = start // 2 + draw(st.integers(-3, 3)) * np.arange(n)
        elif shape == "gaps":
            piece = np.cumsum(rng.integers(0, draw(st.sampled_from([2, 4, 100, 1 << 20])), n)) + start // 4
        elif shape == "random":
            width = draw(st.integers(1, 63))
            piece = (
                rng.integers(-(1 << (width - 1)), 1 << (width - 1), n) if width > 1 else rng.integers(0, 2, n)
            )
        elif shape == "outliers":
            piece = np.where(rng.random(n) < 0.04, rng.integers(0, 1 << 40, n), rng.integers(0, 100, n))
        elif shape == "pairs":
            piece = np.repeat(rng.integers(0, 4, n), rng.integers(1, 5, n))[:n]
        else:
            piece = rng.choice(np.array([*I64, 0, -1, 1]), n)
        pieces.append(piece.astype(np.int64))
    return np.concatenate(pieces)


@settings(max_examples=150, deadline=None)
@given(values=st.composite(runs)(), stride=st.sampled_from([3, 100, 10_000]))
def test_any_values_are_what_orc_cpp_writes(values: np.ndarray, stride: int) -> None:
    assert_as_orc_cpp(values, stride)


@pytest.mark.parametrize(
    "values",
    [
        [5],
        [5, 5],
        [5, 5, 5],
        [1, 2, 2, 2, 3, 4, 4, 5, 5, 5, 5, 6],
        [*I64, 0, I64[0], 5, 6, 7, 8],  # partial sums overflow though the total does not: no sum
        list(range(510)) + [7] * 600 + list(range(100)),  # a window ending on a run's first or second value
        list(range(511)) + [7] * 600 + list(range(100)),
        list(range(509)) + [7] * 4 + [8] * 2 + [9] * 513,
    ],
)
def test_edge_shapes(values: list[int]) -> None:
    assert_as_orc_cpp(np.array(values, dtype=np.int64), stride=3)


def test_a_position_at_a_full_chunk_names_that_chunk() -> None:
    """SHORT_REPEAT runs of ten 7-byte values, 8 bytes each, a row group each: a row group starts where 64 KiB of
    runs end, the chunk full but not yet compressed, so its position is (that chunk, 65536), not (the next
    chunk, 0). (8,400 row groups: triples of 2 bytes took 40,000.)"""
    values = np.repeat(np.tile([1 << 50, (1 << 50) + 1], 4_200), 10)
    assert len(values) > 10 * (BLOCK // 8 + 1)
    _, index, _ = orc_cpp(values, CompressionKind.ZLIB, 10)
    assert [BLOCK, 10] in [positions for positions, _ in index]
    assert_as_orc_cpp(values, stride=10)


def test_the_acid_columns_of_a_compaction_are_what_orc_cpp_writes() -> None:
    """rowIds of many write ids with deleted rows: DELTA windows, DIRECT or PATCHED_BASE across each restart;
    and originalTransaction's runs."""
    rng = np.random.default_rng(3)
    row_ids = np.concatenate([np.sort(rng.choice(10_000, 9_500, replace=False)) for _ in range(12)])
    write_ids = np.repeat(np.arange(1, 13), 9_500)
    assert_as_orc_cpp(row_ids)
    assert_as_orc_cpp(write_ids)
    runs = encode(row_ids)
    kinds = {runs.data[int(o)] >> 6 for o in runs.offset[:-1]}  # 1 DIRECT, 2 PATCHED_BASE, 3 DELTA
    assert 3 in kinds and kinds & {1, 2}
