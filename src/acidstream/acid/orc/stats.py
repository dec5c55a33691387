"""Merge ORC ColumnStatistics exactly, to build file-level statistics from the stitched chunks' statistics.

Readers prune files with these values (min/max, hasNull), so a merge may drop what it cannot compute
exactly — never produce a wrong bound. Merges follow ORC Java's ``ColumnStatisticsImpl.merge`` semantics: int
sums that overflow are dropped; kind-specific parts of sides that hold no values are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from acidstream.acid.orc.protobuf import (
    LENGTH_DELIMITED,
    VARINT,
    Message,
    ProtobufError,
    zigzag_decode,
    zigzag_encode,
)

NUMBER_OF_VALUES = 1
INT, DOUBLE, STRING, BUCKET, DECIMAL, DATE, BINARY, TIMESTAMP = 2, 3, 4, 5, 6, 7, 8, 9
HAS_NULL = 10
BYTES_ON_DISK = 11
COLLECTION = 12

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_U64_MASK = (1 << 64) - 1
_MAX_DECIMAL_DIGITS = 38


class FileStatistics:
    """A file's column statistics merged chunk by chunk, as ORC writers keep running statistics: the totals
    stay decoded between chunks, so adding a chunk decodes only its own (a transaction batch's file gets one
    chunk per commit, and each commit's footer needs the totals)."""

    def __init__(self, encoded: Sequence[bytes]) -> None:
        self._columns = [_decoded(b) for b in encoded]

    def add(self, encoded: Sequence[bytes]) -> None:
        if len(encoded) != len(self._columns):
            raise ValueError(f"statistics for {len(encoded)} columns merged into {len(self._columns)}")
        self._columns = [t.merged(_decoded(b)) for t, b in zip(self._columns, encoded, strict=True)]

    def encoded(self) -> list[bytes]:
        return [t.message().encode() for t in self._columns]


@lru_cache(maxsize=4096)
def _decoded(encoded: bytes) -> _Totals:
    """Totals are never changed in place, so one per encoding serves every file: an insert's ACID columns have
    the same statistics in every file of a commit (and often across commits)."""
    return _Totals.of(Message.decode(encoded))


class _Totals:
    """One column's statistics with the kind-specific parts decoded: what a merge reads and writes."""

    __slots__ = ("bytes_on_disk", "count", "has_null", "parts")

    def __init__(
        self, count: int, parts: dict[int, Message], has_null: int | None, bytes_on_disk: int | None
    ) -> None:
        self.count, self.parts, self.has_null, self.bytes_on_disk = count, parts, has_null, bytes_on_disk

    @classmethod
    def of(cls, m: Message) -> _Totals:
        values = _last_values(m)
        parts = {}
        for kind in _KINDS:
            part = _bytes(values.get(kind))
            if part is not None:
                parts[kind] = Message.decode(part)
        return cls(
            _int(values, NUMBER_OF_VALUES),
            parts,
            _int(values, HAS_NULL) if HAS_NULL in values else None,
            _int(values, BYTES_ON_DISK) if BYTES_ON_DISK in values else None,
        )

    def merged(self, other: _Totals) -> _Totals:
        """ORC Java's merge: a kind-specific part of a side without values does not constrain the result,
        one that cannot be merged exactly is dropped."""
        a_empty, b_empty = not self.count, not other.count
        parts: dict[int, Message] = {}
        for kind, merger in _KINDS.items():  # a column has one kind, if any
            pa_, pb = self.parts.get(kind), other.parts.get(kind)
            if pa_ is None and pb is None:
                continue
            if a_empty and b_empty:
                part: Message | None = pa_ if pa_ is not None else pb
            elif a_empty or b_empty:
                part = pb if a_empty else pa_
            elif pa_ is None or pb is None:
                part = None
            else:
                part = merger(pa_, pb)
            if part is not None:
                parts[kind] = part
        has_null = (
            int(bool(self.has_null) or bool(other.has_null))
            if self.has_null is not None or other.has_null is not None
            else None
        )
        on_disk = (
            (self.bytes_on_disk + other.bytes_on_disk) & _U64_MASK
            if self.bytes_on_disk is not None and other.bytes_on_disk is not None
            else None
        )
        return _Totals((self.count + other.count) & _U64_MASK, parts, has_null, on_disk)

    def message(self) -> Message:
        fields: list[tuple[int, int, int | bytes]] = [(NUMBER_OF_VALUES, VARINT, self.count)]
        fields += [(kind, LENGTH_DELIMITED, part.encode()) for kind, part in self.parts.items()]
        if self.has_null is not None:
            fields.append((HAS_NULL, VARINT, self.has_null))
        if self.bytes_on_disk is not None:
            fields.append((BYTES_ON_DISK, VARINT, self.bytes_on_disk))
        return Message(fields)


def _last_values(m: Message) -> dict[int, int | bytes]:
    """Each field's value, the last occurrence winning (as protobuf reads scalars): one pass, then lookups."""
    return {number: value for number, _, value in m.fields}


def _int(values: dict[int, int | bytes], number: int) -> int:
    v = values.get(number, 0)
    if not isinstance(v, int):
        raise ProtobufError(f"field {number}: expected a scalar, found a length-delimited value")
    return v


def _bytes(v: int | bytes | None) -> bytes | None:
    if isinstance(v, int):
        raise ProtobufError("expected a length-delimited field, found a scalar one")
    return v


def _pick(x: int | float | None, y: int | float | None, fn: Callable[..., int | float]) -> int | float | None:
    return None if x is None or y is None else fn(x, y)


def _merge_int(a: Message, b: Message) -> Message:
    """The common kind (every ACID column is an int): fields looked up once, not scanned per accessor."""
    fa, fb = _last_values(a), _last_values(b)
    fields: list[tuple[int, int, int | bytes]] = []
    lo, hi = _pick(_sint(fa, 1), _sint(fb, 1), min), _pick(_sint(fa, 2), _sint(fb, 2), max)
    if lo is not None and hi is not None:
        fields += [(1, VARINT, zigzag_encode(int(lo))), (2, VARINT, zigzag_encode(int(hi)))]
    sa, sb = _sint(fa, 3), _sint(fb, 3)
    if sa is not None and sb is not None and _I64_MIN <= sa + sb <= _I64_MAX:
        fields.append((3, VARINT, zigzag_encode(sa + sb)))
    return Message(fields)


def _sint(values: dict[int, int | bytes], number: int) -> int | None:
    v = values.get(number)
    return None if v is None else zigzag_decode(_int(values, number))


def _merge_double(a: Message, b: Message) -> Message:
    out = Message()
    lo, hi = _pick(a.double(1), b.double(1), min), _pick(a.double(2), b.double(2), max)
    if lo is not None and hi is not None:
        out.set_double(1, float(lo)).set_double(2, float(hi))
    sa, sb = a.double(3), b.double(3)
    if sa is not None and sb is not None:
        out.set_double(3, sa + sb)
    return out


def _string_bound(m: Message, exact: int, bound: int) -> tuple[bytes, bool] | None:
    """(value, is_exact) of a string min or max; a truncated bound is in lowerBound/upperBound."""
    v = m.bytes_(exact)
    if v is not None:
        return v, True
    v = m.bytes_(bound)
    return None if v is None else (v, False)


def _merge_string(a: Message, b: Message) -> Message:
    out = Message()
    lows = [_string_bound(a, 1, 4), _string_bound(b, 1, 4)]
    highs = [_string_bound(a, 2, 5), _string_bound(b, 2, 5)]
    if all(lows) and all(highs):
        # UTF-8 byte order is code point order, which is how ORC compares strings.
        lo_v = min(x[0] for x in lows if x)
        lo_exact = any(x[1] for x in lows if x and x[0] == lo_v)
        hi_v = max(x[0] for x in highs if x)
        hi_exact = any(x[1] for x in highs if x and x[0] == hi_v)
        out.set_bytes(1 if lo_exact else 4, lo_v)
        out.set_bytes(2 if hi_exact else 5, hi_v)
    sa, sb = a.sint(3), b.sint(3)
    if sa is not None and sb is not None:
        out.set_sint(3, sa + sb)
    return out


def _merge_bucket(a: Message, b: Message) -> Message:
    ca, cb = a.packed_uints(1), b.packed_uints(1)
    n = max(len(ca), len(cb))
    ca += [0] * (n - len(ca))
    cb += [0] * (n - len(cb))
    return Message().set_packed_uints(1, [x + y for x, y in zip(ca, cb, strict=True)])


def _decimal(m: Message, n: int) -> Decimal | None:
    s = m.string(n)
    if s is None:
        return None
    try:
        return Decimal(s)
    except InvalidOperation:
        return None


def _merge_decimal(a: Message, b: Message) -> Message:
    out = Message()
    amin, bmin, amax, bmax = _decimal(a, 1), _decimal(b, 1), _decimal(a, 2), _decimal(b, 2)
    if None not in (amin, bmin, amax, bmax):
        assert amin is not None and bmin is not None and amax is not None and bmax is not None
        out.set_bytes(1, (a if amin <= bmin else b).bytes_(1) or b"")
        out.set_bytes(2, (a if amax >= bmax else b).bytes_(2) or b"")
    sa, sb = _decimal(a, 3), _decimal(b, 3)
    if sa is not None and sb is not None:
        total = sa + sb
        if len(total.as_tuple().digits) <= _MAX_DECIMAL_DIGITS:
            out.set_string(3, format(total, "f"))
    return out


def _merge_date(a: Message, b: Message) -> Message:
    out = Message()
    lo, hi = _pick(a.sint(1), b.sint(1), min), _pick(a.sint(2), b.sint(2), max)
    if lo is not None and hi is not None:
        out.set_sint(1, int(lo)).set_sint(2, int(hi))
    return out


def _ts_key(m: Message, millis_field: int, nanos_field: int, default_nanos: int) -> tuple[int, int] | None:
    """Order key (millis, sub-millisecond nanos); ORC stores those nanos + 1, absent = the default."""
    millis = m.sint(millis_field)
    if millis is None:
        return None
    stored = m.uint(nanos_field)
    return millis, (stored - 1 if stored else default_nanos)


def _merge_timestamp(a: Message, b: Message) -> Message:
    """Pick the smaller/larger side per bound and copy all of that side's fields for the bound."""
    out = Message()
    for utc, local, nanos, default, fn in ((3, 1, 5, 0, min), (4, 2, 6, 999_999, max)):
        field = utc if a.has(utc) and b.has(utc) else local
        ka, kb = _ts_key(a, field, nanos, default), _ts_key(b, field, nanos, default)
        if ka is None or kb is None:
            return Message()  # cannot order the sides: keep only the generic statistics
        if a.has(local) != b.has(local) or a.has(utc) != b.has(utc):
            return Message()
        winner = a if fn(ka, kb) == ka else b
        for n in (local, utc, nanos):
            if winner.has(n):
                out.set_uint(n, winner.uint(n, 0) or 0)
    return out


def _merge_binary(a: Message, b: Message) -> Message:
    out = Message()
    sa, sb = a.sint(1), b.sint(1)
    if sa is not None and sb is not None:
        out.set_sint(1, sa + sb)
    return out


def _merge_collection(a: Message, b: Message) -> Message:
    out = Message()
    lo, hi = _pick(a.uint(1), b.uint(1), min), _pick(a.uint(2), b.uint(2), max)
    if lo is not None and hi is not None:
        out.set_uint(1, int(lo)).set_uint(2, int(hi))
    ta, tb = a.uint(3), b.uint(3)
    if ta is not None and tb is not None:
        out.set_uint(3, ta + tb)
    return out


_KINDS: dict[int, Callable[[Message, Message], Message | None]] = {
    INT: _merge_int,
    DOUBLE: _merge_double,
    STRING: _merge_string,
    BUCKET: _merge_bucket,
    DECIMAL: _merge_decimal,
    DATE: _merge_date,
    BINARY: _merge_binary,
    TIMESTAMP: _merge_timestamp,
    COLLECTION: _merge_collection,
}
