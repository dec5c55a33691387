"""Integer columns encoded as ORC C++ encodes them (RLEv2, aligned bit packing), vectorised with numpy.

ORC C++'s encoder takes values one at a time and buffers up to 512: three or more equal values in a row make a
*fixed* run (SHORT_REPEAT up to 10 values, else DELTA with delta 0), anything else collects into a *variable*
run of up to 512 values, written as DELTA (a fixed delta, or a monotonic sequence), PATCHED_BASE or DIRECT.
Where each run starts and when it is written depend only on where the equal runs of three or more are, so here
the runs are cut from those (array steps per such equal run, none per value), classified together, and written
with array operations; only PATCHED_BASE runs (rare in ACID columns: a window across a rowId restart) build
their patch lists one by one. The bytes, the row index positions (where the encoder stood at each row group's
start) and the statistics are ORC C++'s: tests compare them with pyarrow's files.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from acidstream.acid.orc.compression import CompressionKind, compress
from acidstream.acid.orc.protobuf import encode_varint, zigzag_encode

Int64s = npt.NDArray[np.int64]
UInt64s = npt.NDArray[np.uint64]
Bytes = npt.NDArray[np.uint8]
Indexes = npt.NDArray[np.intp]

#: Values a run holds at most; equal values that make a fixed run; the longest SHORT_REPEAT.
RUN = 512
MIN_REPEAT = 3
SHORT_REPEAT_MAX = 10

_SHORT_REPEAT, _DIRECT, _PATCHED_BASE, _DELTA = 0, 1, 2, 3

#: ORC's fixed bit widths: the closest at or above 0..64 bits (``getClosestFixedBits``), the closest with
#: aligned bit packing (``getClosestAlignedFixedBits``, DIRECT and DELTA with strategy SPEED), and the 5-bit
#: code of each width.
_CLOSEST = np.array(
    [1, *range(1, 25), 26, 26, 28, 28, 30, 30, 32, 32, *[40] * 8, *[48] * 8, *[56] * 8, *[64] * 8]
)
_ALIGNED = np.array(
    [1, 1, 2, 4, 4, *[8] * 4, *[16] * 8, *[24] * 8, *[32] * 8, *[40] * 8, *[48] * 8, *[56] * 8, *[64] * 8]
)
_CODE = {**{w: w - 1 for w in range(1, 25)}, 26: 24, 28: 25, 30: 26, 32: 27, 40: 28, 48: 29, 56: 30, 64: 31}
_CODE_OF = np.array([_CODE.get(w, 0) for w in range(65)])

_I64_MIN, _I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _bit_lengths(values: UInt64s) -> Int64s:
    """Bits needed for each unsigned value (0 for 0), exactly: a float's exponent, one less where rounding to
    53 bits carried the value up to the next power of two."""
    exponent = np.frexp(values.astype(np.float64))[1].astype(np.int64)
    below = (values >> np.maximum(exponent - 1, 0).astype(np.uint64)) == 0
    return exponent - (below & (exponent > 0))


def _zigzag(values: Int64s) -> UInt64s:
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


def _closest_bits(values: UInt64s, *, negative_is_64: bool) -> Int64s:
    """ORC's ``findClosestNumBits`` of each value; ``negative_is_64``: values are int64 (zigzagged ones are,
    in C++), and those at or above 2**63 (negative there) need 64 bits."""
    bits = _CLOSEST[_bit_lengths(values)]
    if negative_is_64:
        bits[values.view(np.int64) < 0] = 64
    return bits


@dataclass(frozen=True)
class Runs:
    """One stripe's values as an RLEv2 stream, and where ORC C++'s encoder stood while it wrote them.

    Run ``k`` holds values ``first[k]`` to ``first[k + 1]``, starts at byte ``offset[k]`` and was written once
    the encoder had taken ``written_at[k]`` values (more than it holds when the encoder had to see the value
    after it).
    """

    data: bytes
    first: Int64s  # one more entry than runs: the number of values
    offset: Int64s  # one more entry than runs: len(data)
    written_at: Int64s

    def positions(self, rows: Int64s) -> tuple[Int64s, Int64s]:
        """Once ``rows`` values were taken (each): the stream offset of the values still buffered, how many."""
        written = np.searchsorted(self.written_at, rows, side="right")
        return self.offset[written], rows - self.first[written]


def encode(values: Int64s) -> Runs:
    """``values`` (a stripe of a signed integer column, at least one) as ORC C++'s RLEv2 encoder writes them."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    if not len(values):
        raise ValueError("a stripe holds at least one value")
    first, length, fixed, written_at = _cut(values)
    pieces = _Pieces(len(first))
    _fixed_runs(pieces, np.flatnonzero(fixed), values[first[fixed]], length[fixed])
    if not fixed.all():
        _variable_runs(pieces, values, first, length, ~fixed)
    offset = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(pieces.head_len + pieces.payload_len, out=offset[1:])
    return Runs(pieces.assemble(offset), np.append(first, len(values)), offset, written_at)


# --- where the runs are ------------------------------------------------------------------------------


def _cut(values: Int64s) -> tuple[Int64s, Int64s, npt.NDArray[np.bool_], Int64s]:
    """The runs ORC C++ writes for ``values``, in order: first value, length, fixed or not, when written."""
    n = len(values)
    starts, lens = _repeats(values)
    # Each equal run of 3+ is fixed from f for r values: all of it, unless the encoder's 512-value window ends
    # on its first or second value (which the window takes), so that it starts afresh after that. Which is the
    # case depends on where the buffer starts before the run (``begin``: after the previous run), which
    # depends on the previous run's case: solved by iterating until nothing changes (a change is rare, and
    # only changes the next run's ``begin``).
    f, r = starts, lens
    while True:
        after = _fixed_end(f, r)
        begin = np.concatenate(([0], after[:-1]))[: len(starts)]
        late = (starts + 2 - begin) % RUN  # values buffered when the third repeat arrives, past full windows
        new_f = np.where(late < 2, starts + 2 - late, starts).astype(np.int64)
        if np.array_equal(new_f, f):
            break
        f, r = new_f, lens - (new_f - starts)
    parts: list[tuple[Int64s, Int64s, bool, Int64s]] = []
    # full variable windows before each run (flushed by their 512th value, before any third repeat) and after
    # the last run
    window_from = np.append(begin, after[-1] if len(after) else 0)
    counts = (np.append(starts + 2, n) - window_from) // RUN
    at = _expand(window_from, counts, RUN)
    parts.append((at, np.full(len(at), RUN), False, at + RUN))
    # variable values left between the last full window and a run, written when its third repeat arrives
    left_from = window_from[:-1] + RUN * counts[:-1]
    short = starts > left_from
    parts.append((left_from[short], (starts - left_from)[short], False, starts[short] + MIN_REPEAT))
    # fixed runs: 512 at a time, then the rest if 3 or more, written when a different value arrives
    fixed = r >= MIN_REPEAT
    ff, rr = f[fixed], r[fixed]
    at = _expand(ff, rr // RUN, RUN)
    parts.append((at, np.full(len(at), RUN), True, at + RUN))
    rest = rr % RUN
    some = rest >= MIN_REPEAT
    rest_at = (ff + rr - rest)[some]
    parts.append((rest_at, rest[some], True, rest_at + rest[some] + 1))
    # the variable values after the last full window, written at the end of the stripe
    last = int(window_from[-1] + RUN * counts[-1])
    if last < n:
        parts.append((np.array([last]), np.array([n - last]), False, np.array([n])))
    first = np.concatenate([p[0] for p in parts]).astype(np.int64)
    order = np.argsort(first, kind="stable")
    return (
        first[order],
        np.concatenate([p[1] for p in parts]).astype(np.int64)[order],
        np.concatenate([np.full(len(p[0]), p[2]) for p in parts])[order],
        np.concatenate([p[3] for p in parts]).astype(np.int64)[order],
    )


def _repeats(values: Int64s) -> tuple[Int64s, Int64s]:
    """Start and length of every run of 3 or more equal values: from where values change when they mostly
    repeat, else from where a value is the third of a kind in a row (no index array per distinct value)."""
    equal = values[1:] == values[:-1]
    if 2 * np.count_nonzero(equal) > len(equal):
        bounds = np.concatenate(([0], np.flatnonzero(~equal) + 1, [len(values)]))
        lengths = np.diff(bounds)
        repeated = lengths >= MIN_REPEAT
        return bounds[:-1][repeated], lengths[repeated]
    third = np.flatnonzero(equal[1:] & equal[:-1])  # values[i] == values[i + 1] == values[i + 2]
    if not len(third):
        return third, third
    breaks = np.flatnonzero(third[1:] != third[:-1] + 1)
    first = np.concatenate(([third[0]], third[breaks + 1]))
    last = np.concatenate((third[breaks], [third[-1]]))
    return first, last - first + MIN_REPEAT


def _fixed_end(f: Int64s, r: Int64s) -> Int64s:
    """Where the buffer starts after each run fixed from ``f`` for ``r`` values: past its fixed runs, or at
    the 1–2 values left over (which start the next variable run); at ``f`` when fewer than 3 are fixed."""
    rest = r % RUN
    end = f + r - np.where(rest >= MIN_REPEAT, 0, rest)
    return np.where(r >= MIN_REPEAT, end, f)


def _expand(starts: Int64s, counts: Int64s, step: int) -> Int64s:
    """``starts[i] + step * j`` for every ``j < counts[i]``, in order."""
    total = int(counts.sum())
    base = np.repeat(starts, counts)
    within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return base + step * within


# --- each run's bytes ----------------------------------------------------------------------------------


class _Pieces:
    """The bytes of every run: a head (at most 22 bytes: a header and two varints) and a payload, each group
    of them a byte matrix, one row per run, valid up to the run's length."""

    def __init__(self, k: int) -> None:
        self.head = np.zeros((k, _HEAD), dtype=np.uint8)
        self.head_len = np.zeros(k, dtype=np.int64)
        self.payload_len = np.zeros(k, dtype=np.int64)
        self.payloads: list[tuple[Indexes, Bytes, Int64s]] = []  # runs, their bytes, lengths

    def put_head(self, runs: Indexes, column: int, data: Bytes, width: Int64s | int) -> None:
        """``data[i]`` (its first ``width`` bytes) at ``column`` of run ``runs[i]``'s head, which ends there."""
        self.head[runs, column : column + data.shape[1]] = data
        self.head_len[runs] = column + width

    def put_payload(self, runs: Indexes, data: Bytes, lengths: Int64s) -> None:
        self.payload_len[runs] = lengths
        self.payloads.append((runs, data, lengths))

    def assemble(self, offset: Int64s) -> bytes:
        out = np.empty(int(offset[-1]), dtype=np.uint8)
        starts = offset[:-1]
        _scatter(out, starts, self.head, self.head_len)
        for runs, data, lengths in self.payloads:
            _scatter(out, starts[runs] + self.head_len[runs], data, lengths)
        return out.tobytes()


_HEAD = 22


def _scatter(out: Bytes, at: Int64s, data: Bytes, lengths: Int64s) -> None:
    """Row i of ``data`` (its first ``lengths[i]`` bytes) into ``out`` from ``at[i]``."""
    columns = np.arange(data.shape[1])
    valid = columns < lengths[:, None]
    out[(at[:, None] + columns)[valid]] = data[valid]


def _header(pieces: _Pieces, runs: Indexes, kind: int, width_code: Int64s | int, length: Int64s) -> None:
    """The two header bytes of DIRECT, PATCHED_BASE and DELTA: kind, width code, length - 1 (9 bits)."""
    count = length - 1
    first = (kind << 6) | (np.asarray(width_code) << 1) | (count >> 8)
    pieces.put_head(runs, 0, np.stack([first, count & 0xFF], axis=1).astype(np.uint8), 2)


def _fixed_runs(pieces: _Pieces, runs: Indexes, value: Int64s, length: Int64s) -> None:
    """SHORT_REPEAT (3..10 values: the value in as few big-endian bytes as it needs), else DELTA (delta 0)."""
    short = length <= SHORT_REPEAT_MAX
    if short.any():
        zz = _zigzag(value[short])
        width = np.maximum(1, (_bit_lengths(zz) + 7) // 8)
        rows = runs[short]
        header = ((width - 1) << 3) | (length[short] - MIN_REPEAT)
        pieces.put_head(rows, 0, header.astype(np.uint8)[:, None], 1)
        shifts = (8 * (width[:, None] - 1 - np.arange(8))).clip(0).astype(np.uint64)
        pieces.put_head(rows, 1, ((zz[:, None] >> shifts) & np.uint64(0xFF)).astype(np.uint8), width)
    long_ = ~short
    if long_.any():
        _delta_head(pieces, runs[long_], 0, length[long_], value[long_], np.zeros(int(long_.sum()), np.int64))


def _delta_head(
    pieces: _Pieces, runs: Indexes, width_code: Int64s | int, length: Int64s, base: Int64s, delta: Int64s
) -> None:
    """DELTA's head: header, then the first value and the first delta as signed varints."""
    _header(pieces, runs, _DELTA, width_code, length)
    b, b_len = _varints(_zigzag(base))
    pieces.put_head(runs, 2, b, b_len)
    d, d_len = _varints(_zigzag(delta))
    for width in np.unique(b_len).tolist():  # the delta follows each base
        at = b_len == width
        pieces.put_head(runs[at], 2 + width, d[at], d_len[at])


def _varints(values: UInt64s) -> tuple[Bytes, Int64s]:
    """Base-128 varints: a byte matrix (10 columns) and each one's length."""
    lengths = np.maximum(1, (_bit_lengths(values) + 6) // 7)
    groups = ((values[:, None] >> _SEVENS) & np.uint64(0x7F)).astype(np.uint8)
    groups[(lengths[:, None] - 1) > _TEN] |= 0x80
    return groups, lengths


_TEN = np.arange(10)
_SEVENS = (7 * _TEN).astype(np.uint64)


def _variable_runs(
    pieces: _Pieces, values: Int64s, first: Int64s, length: Int64s, variable: npt.NDArray[np.bool_]
) -> None:
    """The ``variable`` runs, classified as ORC C++'s ``determineEncoding`` does, then written by kind.

    Minima and maxima are taken over every run at once (runs tile the values): deltas across two runs are
    neutralised first, and first deltas (which DELTA writes as a varint) left out of the packed width.
    """
    deltas = np.diff(values)  # wraps on overflow as in C++: only used where max - min does not overflow
    low, high = np.minimum.reduceat(values, first), np.maximum.reduceat(values, first)
    # a run's deltas are deltas[first : first + length - 1], those packed the same less the first one: each
    # reduced between interleaved start and end indices (the pieces in between are dropped)
    has = first < len(deltas)  # a last run of one value has none
    k = int(has.sum())
    d_low, d_high, widest, initial = (np.zeros(len(first), dtype=np.int64) for _ in range(4))
    magnitudes = np.abs(deltas)
    for start, out_low, out_high in ((first[:k], d_low, d_high), (first[:k] + 1, None, widest))[
        : 2 * (k > 0)
    ]:
        bounds = np.stack([start, first[:k] + length[:k] - 1], axis=1).ravel()
        bounds = bounds[:-1] if bounds[-1] >= len(deltas) else bounds
        bounds = np.minimum(bounds, len(deltas) - 1)  # runs too short for packed deltas: unused
        if out_low is not None:
            out_low[:k] = np.minimum.reduceat(deltas, bounds)[::2]
            out_high[:k] = np.maximum.reduceat(deltas, bounds)[::2]
        else:
            out_high[:k] = np.maximum.reduceat(magnitudes, bounds)[::2]
    initial[:k] = deltas[first[:k]]
    safe = ((high ^ low) >= 0) | ((high ^ (high - low)) >= 0)
    long_ = variable & (length > MIN_REPEAT) & safe
    fixed_delta = long_ & (d_low == d_high)
    if fixed_delta.any():
        runs = np.flatnonzero(fixed_delta)
        _delta_head(pieces, runs, 0, length[runs], values[first[runs]], initial[runs])
    monotonic = long_ & ~fixed_delta & (initial != 0) & ((d_low >= 0) | (d_high <= 0))
    if monotonic.any():
        runs = np.flatnonzero(monotonic)
        width = _ALIGNED[_closest_bits(widest[runs].view(np.uint64), negative_is_64=False)]
        width[width == 1] = 2  # width 0 would mean a fixed delta
        _delta_head(pieces, runs, _CODE_OF[width], length[runs], values[first[runs]], initial[runs])
        _packed(pieces, magnitudes.view(np.uint64), runs, first[runs] + 1, length[runs] - 2, width)
    others = variable & ~(fixed_delta | monotonic)
    if others.any():
        _direct_or_patched(pieces, values, np.flatnonzero(others), first, length, low, long_)


def _direct_or_patched(
    pieces: _Pieces,
    values: Int64s,
    runs: Indexes,
    first: Int64s,
    length: Int64s,
    low: Int64s,
    checked: npt.NDArray[np.bool_],
) -> None:
    """Variable runs that are not DELTA: DIRECT, unless (for ``checked`` runs: 4+ values, no overflow) the
    widest zigzagged tenth needs 2+ bits more than the rest and patching the widest twentieth of the values
    less their minimum narrows them (PATCHED_BASE)."""
    n = length[runs]
    columns = np.arange(int(n.max()))
    valid = columns < n[:, None]
    grid = values.take(first[runs][:, None] + columns, mode="clip")
    zz = _zigzag(grid)
    zz[~valid] = 0
    zz_bits = _closest_bits(zz, negative_is_64=True)
    bits100 = zz_bits.max(axis=1)
    patched = checked[runs] & (bits100 - _percentile(zz_bits, valid, n, 0.9) > 1)
    if patched.any():
        rows = np.flatnonzero(patched)
        reduced = (grid[rows] - low[runs[rows]][:, None]).view(np.uint64)
        reduced[~valid[rows]] = 0
        reduced_bits = _closest_bits(reduced, negative_is_64=False)
        bits95, top = _percentile(reduced_bits, valid[rows], n[rows], 0.95), reduced_bits.max(axis=1)
        narrower = top != bits95
        for i in np.flatnonzero(narrower).tolist():
            row = rows[i]
            data = _patched(reduced[i, : n[row]], int(low[runs[row]]), int(bits95[i]), int(top[i]))
            pieces.put_payload(
                runs[row : row + 1], np.frombuffer(data, np.uint8)[None, :], np.array([len(data)])
            )
        patched[rows[~narrower]] = False
    direct = ~patched
    if direct.any():
        width = _ALIGNED[bits100[direct]]
        rows = runs[direct]
        _header(pieces, rows, _DIRECT, _CODE_OF[width], n[direct])
        for w in np.unique(width).tolist():
            at = width == w
            pieces.put_payload(rows[at], *_pack_rows(zz[direct][at], w, n[direct][at]))


def _percentile(bits: Int64s, valid: npt.NDArray[np.bool_], n: Int64s, p: float) -> Int64s:
    """ORC's ``percentileBits`` per row: the width at or above which more than ``n * (1 - p)`` values lie."""
    ordered = np.sort(np.where(valid, bits, -1), axis=1)
    skip = (n * (1.0 - p)).astype(np.int64)
    return ordered[np.arange(len(n)), bits.shape[1] - 1 - skip]


def _packed(
    pieces: _Pieces, magnitudes: UInt64s, runs: Indexes, first: Int64s, count: Int64s, width: Int64s
) -> None:
    """DELTA's packed delta magnitudes, ``magnitudes[first[i] : first[i] + count[i]]`` for run ``runs[i]``:
    rows gathered from a sliding window over the magnitudes, as bytes when they fit one (index arrays and
    64-bit copies of every value cost more than the packing)."""
    for w in np.unique(width).tolist():
        at = width == w
        f, c = first[at], count[at]
        most = int(c.max())
        source = magnitudes.astype(np.uint8) if w < 8 else magnitudes
        padded = np.concatenate((source, np.zeros(most, dtype=source.dtype)))
        grid = np.lib.stride_tricks.sliding_window_view(padded, most)[f]
        pieces.put_payload(runs[at], *_pack_rows(grid, w, c))


def _pack_rows(grid: npt.NDArray[np.unsignedinteger[Any]], width: int, count: Int64s) -> tuple[Bytes, Int64s]:
    """Row i's first ``count[i]`` values, their low ``width`` bits most significant first, back to back, the
    last byte zero-padded: a byte matrix and each row's length."""
    rows, most = grid.shape
    if width % 8 == 0:  # whole bytes: past a row's count they are not copied out
        nbytes = width // 8
        data = grid.astype(">u8").view(np.uint8).reshape(rows, most, 8)[:, :, 8 - nbytes :]
        return data.reshape(rows, most * nbytes), count * nbytes
    if 8 % width == 0:  # several values a byte
        per = 8 // width
        small = np.zeros((rows, -(-most // per) * per), dtype=np.uint8)
        small[:, :most] = grid
        small[np.arange(small.shape[1]) >= count[:, None]] = 0  # the last byte's padding
        small = small.reshape(rows, -1, per)
        packed = small[:, :, 0] << (8 - width)
        for j in range(1, per):
            packed |= small[:, :, j] << (8 - width * (j + 1))
        return packed.astype(np.uint8, copy=False), -(-count // per)
    grid = np.where(np.arange(most) < count[:, None], grid, 0).astype(np.uint64)
    bits = ((grid[:, :, None] >> np.arange(width - 1, -1, -1, dtype=np.uint64)) & np.uint64(1)).astype(
        np.uint8
    )
    return np.packbits(bits.reshape(rows, most * width), axis=1), -(-count * width // 8)


def _patched(reduced: UInt64s, low: int, bits95: int, top: int) -> bytes:
    """PATCHED_BASE of one run: its values less ``low`` cut to the 95th percentile's width, the high bits of
    those wider listed as patches (with their distance from the previous one)."""
    n = len(reduced)
    patch_width = int(_CLOSEST[top - bits95])
    if patch_width == 64:  # gap and patch must share 64 bits
        patch_width, bits95 = 56, 8
    mask = (1 << bits95) - 1
    wide = np.flatnonzero(reduced > np.uint64(mask))
    gaps = np.diff(wide, prepend=0).tolist()
    patches = (reduced[wide] >> np.uint64(bits95)).tolist()
    gap_width = min(8, int(_CLOSEST[max(gaps, default=0).bit_length()]))
    entries: list[int] = []
    for gap, patch in zip(gaps, patches, strict=True):
        while gap > 255:  # a gap wider than 8 bits: empty patches of gap 255 before it
            entries.append(255 << patch_width)
            gap -= 255
        entries.append((gap << patch_width) | patch)
    negative = low < 0
    base = -low if negative else low
    base_bits = 64 if base >= 1 << 63 else int(_CLOSEST[base.bit_length()])
    base_bytes = -(-(base_bits + 1) // 8)  # and a sign bit
    if negative:
        base |= 1 << (base_bytes * 8 - 1)
    value_width = int(_CLOSEST[bits95])
    patch_bits = int(_CLOSEST[gap_width + patch_width])
    head = bytes(
        (
            (_PATCHED_BASE << 6) | (_CODE[value_width] << 1) | (n - 1) >> 8,
            (n - 1) & 0xFF,
            (base_bytes - 1) << 5 | _CODE[patch_width],
            (gap_width - 1) << 5 | len(entries),
        )
    )
    values, one = _pack_rows((reduced & np.uint64(mask))[None, :], value_width, np.array([n]))
    patch_list, count = _pack_rows(np.array([entries], dtype=np.uint64), patch_bits, np.array([len(entries)]))
    return (
        head
        + (base & ((1 << (8 * base_bytes)) - 1)).to_bytes(base_bytes, "big")
        + values[0, : one[0]].tobytes()
        + patch_list[0, : count[0]].tobytes()
    )


# --- a column of one stripe: DATA and ROW_INDEX streams, statistics -----------------------------------


@dataclass(frozen=True)
class IntStats:
    """Statistics of some values of an int column: count, min, max, and sum (None once it overflowed)."""

    count: int
    low: int
    high: int
    total: int | None

    def merge(self, other: IntStats) -> IntStats:
        total = None
        if self.total is not None and other.total is not None:
            total = _checked(self.total + other.total)
        return IntStats(self.count + other.count, min(self.low, other.low), max(self.high, other.high), total)

    def encode(self) -> bytes:
        return _encoded_stats(self.count, self.low, self.high, self.total)

    @classmethod
    def of_groups(cls, groups: Sequence[IntStats]) -> IntStats:
        """The statistics of consecutive row groups, as ORC C++ merges them (the sum added up group by group)."""
        total: int | None = 0
        for g in groups:
            total = None if total is None or g.total is None else _checked(total + g.total)
        return cls(
            sum(g.count for g in groups), min(g.low for g in groups), max(g.high for g in groups), total
        )


@lru_cache(maxsize=4096)
def _encoded_stats(count: int, low: int, high: int, total: int | None) -> bytes:
    """ColumnStatistics: numberOfValues, intStatistics (min, max, sum if any), hasNull = false."""
    ints = b"\x08" + encode_varint(zigzag_encode(low)) + b"\x10" + encode_varint(zigzag_encode(high))
    if total is not None:
        ints += b"\x18" + encode_varint(zigzag_encode(total))
    return b"\x08" + encode_varint(count) + _ld(0x12, ints) + b"\x50\x00"


def _checked(total: int) -> int | None:
    return total if -(1 << 63) <= total < (1 << 63) else None


def _ld(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + encode_varint(len(payload)) + payload


@dataclass(frozen=True)
class IntColumn:
    """An int column of one stripe: its framed ROW_INDEX and DATA streams, and its statistics."""

    index: bytes
    data: bytes
    stats: IntStats


#: Streams shorter than this are stored uncompressed (as ``stripes`` frames them).
SMALLEST_COMPRESSED = 128


def int_column(values: Int64s, stride: int, kind: CompressionKind, block: int) -> IntColumn:
    """``values`` (one stripe's, no nulls) as ORC C++ writes an int column (DIRECT_V2) into a stripe with a
    row index every ``stride`` rows, its streams framed with ``kind`` in ``block``-byte chunks."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    if values[0] == values[-1] and (values == values[0]).all():
        return constant_column(int(values[0]), len(values), stride, kind, block)
    groups = np.arange(0, len(values), stride)
    return _column(encode(values), _group_stats(values, groups), groups, kind, block)


@lru_cache(maxsize=1024)
def constant_column(value: int, n: int, stride: int, kind: CompressionKind, block: int) -> IntColumn:
    """:func:`int_column` of ``n`` times ``value`` (operation and bucket nearly always are), from the runs of
    512 and the rest, without the values."""
    full, rest = divmod(n, RUN)
    run = encode(np.full(RUN, value, dtype=np.int64)).data if full else b""
    tail = encode(np.full(rest, value, dtype=np.int64)).data if rest else b""
    first = np.arange(0, n + RUN, RUN)[: full + (1 if rest else 0)]
    runs = Runs(
        run * full + tail,
        np.append(first, n),
        np.append(len(run) * np.arange(full + 1), [len(run) * full + len(tail)] if rest else []).astype(
            np.int64
        ),
        np.append(first[:full] + RUN, [n] if rest else []).astype(np.int64),
    )
    groups = np.arange(0, n, stride)
    counts = np.diff(np.append(groups, n)).tolist()
    return _column(
        runs, [IntStats(c, value, value, _checked(value * c)) for c in counts], groups, kind, block
    )


def _column(
    runs: Runs, group_stats: list[IntStats], groups: Int64s, kind: CompressionKind, block: int
) -> IntColumn:
    """The streams and statistics of a column from its runs and its row groups' statistics."""
    raw = runs.data
    chunks = [
        compress(kind, raw[i : i + block], block, SMALLEST_COMPRESSED) for i in range(0, len(raw), block)
    ]
    chunk_starts = list(itertools.accumulate((len(c) for c in chunks), initial=0))
    at, buffered = runs.positions(groups)
    entries = []
    for offset, pending, stats in zip(at.tolist(), buffered.tolist(), group_stats, strict=True):
        if kind == CompressionKind.NONE:
            positions = [offset, pending]
        else:
            chunk, within = divmod(offset, block)
            if within == 0 and chunk:  # ORC C++ compresses a full chunk only when the next byte comes
                chunk, within = chunk - 1, block
            positions = [chunk_starts[chunk], within, pending]
        packed = b"".join(encode_varint(p) for p in positions)
        entries.append(_ld(0x0A, _ld(0x0A, packed) + _ld(0x12, stats.encode())))
    index = compress(kind, b"".join(entries), block, SMALLEST_COMPRESSED)
    return IntColumn(index, b"".join(chunks), IntStats.of_groups(group_stats))


def _group_stats(values: Int64s, groups: Int64s) -> list[IntStats]:
    """Statistics of each row group. ORC C++ adds the values up one by one and drops the sum once it leaves
    int64: the exact total says the same unless signs mix and values are large enough for a partial sum to
    overflow, which is then replayed value by value."""
    low = np.minimum.reduceat(values, groups)
    high = np.maximum.reduceat(values, groups)
    largest = max(-int(low.min()), int(high.max()))
    if largest * len(values) < 1 << 63:  # no sum can overflow
        upper, lower = [0] * len(groups), np.add.reduceat(values, groups).tolist()
    else:  # exact sums from 32-bit halves
        upper = np.add.reduceat(values >> 32, groups).tolist()
        lower = np.add.reduceat(values & 0xFFFFFFFF, groups).tolist()
    ends = [*groups.tolist()[1:], len(values)]
    out = []
    for start, end, lo, hi, u, w in zip(
        groups.tolist(), ends, low.tolist(), high.tolist(), upper, lower, strict=True
    ):
        total = _checked((u << 32) + w)
        if lo < 0 < hi and max(-lo, hi) * (end - start) >= 1 << 63:
            total = _running_sum(values[start:end].tolist())
        out.append(IntStats(end - start, lo, hi, total))
    return out


def _running_sum(values: list[int]) -> int | None:
    total = 0
    for v in values:
        total += v
        if not -(1 << 63) <= total < (1 << 63):
            return None
    return total
