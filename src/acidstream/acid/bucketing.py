"""Bucket numbers exactly as Hive computes them, vectorised over Arrow columns.

Hive prunes bucketed reads and joins by bucket number, so a row stored in any other bucket than the one Hive
would choose is silently lost to those queries. This module transcribes ``ObjectInspectorUtils`` (Hive 3):
``hashCodeMurmur`` for ``bucketing_version=2`` and the legacy ``hashCode`` for version 1, including their
quirks (docs/format.md, Bucket ids and bucketing). Values are hashed as the Hive writables the streaming
writer would build from them: timestamps as wall-clock (``TimestampWritableV2``), decimals normalised without
trailing zeros (``HiveDecimalWritable``), char without trailing spaces.

Two behaviours follow Hive's common case rather than every possible JVM state, see ``field_hashes``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.murmur3 import (
    I32,
    I64,
    U32,
    ByteRows,
    hash_rows,
    hash_tail2,
    hash_words,
    murmur3_hash32,
    sign_extended_byte,
)
from acidstream.acid.types import HiveType

__all__ = [
    "BUCKETING_VERSION_PROPERTY",
    "BucketKeyOrder",
    "bucket_hash",
    "bucket_numbers",
    "bucketing_version_of",
    "field_hashes",
    "murmur3_hash32",
]

#: Table parameter holding the version (``hive_metastoreConstants.TABLE_BUCKETING_VERSION``).
BUCKETING_VERSION_PROPERTY = "bucketing_version"

_U64 = npt.NDArray[np.uint64]
_M32 = np.uint64(0xFFFFFFFF)
_NANOS = 1_000_000_000


class BucketKeyOrder(Enum):
    """The order a Hive writer hashes a table's bucketed columns in: ``h = 31 * h + fieldHash`` depends on it,
    and Hive's writers differ (docs/format.md, Bucket ids and bucketing)."""

    #: Hive's SQL (INSERT, MERGE's inserts, split updates' new rows): ``GenBucketingSortingDest`` keys the
    #: ReduceSinkOperator on the columns in ``CLUSTERED BY`` order.
    CLUSTERED_BY = "clustered_by"
    #: Hive's streaming client: ``AbstractRecordWriter.getBucketColIDs`` takes them in the table's column order.
    TABLE = "table"

    def columns(self, table_columns: Sequence[str], bucket_columns: Sequence[str]) -> list[str]:
        """The bucketed columns (lower-cased) in this order."""
        if self is BucketKeyOrder.CLUSTERED_BY:
            return [b.lower() for b in bucket_columns]
        wanted = {b.lower() for b in bucket_columns}
        return [c.lower() for c in table_columns if c.lower() in wanted]


def bucketing_version_of(table_properties: Mapping[str, str]) -> int:
    """``Utilities.getBucketingVersion``: ``Integer.parseInt`` of the property, 1 when missing or unparsable.

    Hive's callers treat every value other than 2 as the legacy hash; acidstream's ``bucket_hash`` refuses
    versions it does not know instead, so a table with an unexpected version fails loudly.
    """
    text = table_properties.get(BUCKETING_VERSION_PROPERTY)
    if text is None or not re.fullmatch(r"[+-]?[0-9]+", text):
        return 1
    value = int(text)
    return value if -(2**31) <= value < 2**31 else 1


def bucket_numbers(
    arrays: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[HiveType], num_buckets: int, version: int
) -> I32:
    """``getBucketNumber(hash, n) = (hash & Integer.MAX_VALUE) % n`` for every row."""
    if num_buckets <= 0:
        raise ValueError("Number of Buckets must be > 0")
    h = bucket_hash(arrays, types, version)
    return ((h & np.int32(0x7FFFFFFF)) % np.int32(num_buckets)).astype(np.int32)


def bucket_hash(arrays: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[HiveType], version: int) -> I32:
    """``getBucketHashCode`` (v2) / ``getBucketHashCodeOld`` (v1): ``h = 31*h + fieldHash`` over the columns."""
    if len(arrays) != len(types) or not arrays:
        raise ValueError(
            f"need one Hive type per bucket column, got {len(arrays)} arrays and {len(types)} types"
        )
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"bucket columns differ in length: {sorted(lengths)}")
    h = np.zeros(lengths.pop(), dtype=np.uint32)
    for array, hive_type in zip(arrays, types, strict=True):
        h = h * np.uint32(31) + field_hashes(array, hive_type, version).view(np.uint32)
    return h.view(np.int32)


def field_hashes(array: pa.Array | pa.ChunkedArray, hive_type: HiveType, version: int) -> I32:
    """Per-row field hash of one column (null → 0): ``hashCodeMurmur`` for version 2, ``hashCode`` for 1.

    The Arrow array must hold the column's values (``hive_type.to_arrow()``; other Arrow types are cast).
    Assumptions where Hive's result depends on more than the value: binary hashes its exact bytes (Hive's v2
    hashes ``BytesWritable.getBytes()``, the whole backing array, which equals the value for writables built
    from an exact-size array), and v1 timestamps hash as in a JVM running in UTC (Hive rebuilds a
    ``java.sql.Timestamp`` from the wall-clock text in the JVM's zone).
    """
    if version not in (1, 2):
        raise ValueError(f"unsupported bucketing_version {version} (expected 1 or 2)")
    if isinstance(array, pa.ChunkedArray):
        parts = [_column_hashes(chunk, hive_type, version) for chunk in array.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    return _column_hashes(array, hive_type, version)


def _column_hashes(array: pa.Array, hive_type: HiveType, version: int) -> I32:
    array = _conform(array, hive_type)
    if len(array) == 0:
        return np.zeros(0, dtype=np.int32)
    if hive_type.is_primitive:
        table = _MURMUR if version == 2 else _LEGACY
        result = np.ascontiguousarray(table[hive_type.name](array, hive_type), dtype=np.int32)
    else:
        result = _COMPLEX[hive_type.name](array, hive_type, version)
    if array.null_count:
        result[~array.is_valid().to_numpy(zero_copy_only=False)] = 0
    return result


def _conform(array: pa.Array, hive_type: HiveType) -> pa.Array:
    """Cast to the Arrow type of ``hive_type`` unless it already has an equivalent layout."""
    t = array.type
    if hive_type.is_string_like and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return array
    if hive_type.name == "binary" and (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        return array
    if hive_type.name == "array" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return array
    if hive_type.name in ("map", "struct") and t.id == hive_type.to_arrow().id:
        return array
    target = hive_type.to_arrow()
    return array if t.equals(target) else array.cast(target)


# --- reading Arrow buffers ----------------------------------------------------------------------------------


def _values(array: pa.Array, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """The fixed-width values of ``array`` (nulls hold arbitrary values; callers zero them afterwards)."""
    buf = np.frombuffer(array.buffers()[1], dtype=dtype)
    return buf[array.offset : array.offset + len(array)]


def _byte_rows(array: pa.Array) -> ByteRows:
    """The variable-length values of a string/binary array, rebased onto their part of the data buffer."""
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    raw = np.frombuffer(array.buffers()[1], dtype=np.int64 if large else np.int32)
    offsets: I64 = raw[array.offset : array.offset + len(array) + 1].astype(np.int64)
    data_buf = array.buffers()[2]
    data = np.zeros(0, np.uint8) if data_buf is None else np.frombuffer(data_buf, dtype=np.uint8)
    first = int(offsets[0])
    return ByteRows(data[first : int(offsets[-1])], offsets[:-1] - first, np.diff(offsets))


def _matrix_rows(matrix: npt.NDArray[np.uint8], starts: I64, lengths: I64) -> ByteRows:
    """Rows stored right-aligned or left-aligned in a fixed-width byte matrix."""
    width = matrix.shape[1]
    return ByteRows(matrix.ravel(), np.arange(len(matrix), dtype=np.int64) * width + starts, lengths)


def _stripped(array: pa.Array) -> pa.Array:
    """``HiveCharWritable.getStrippedValue``: char values without trailing spaces (padding is not data)."""
    return pc.utf8_rtrim(array, characters=" ")


# --- bit helpers ---------------------------------------------------------------------------------------------


def _be_word(values: npt.NDArray[np.generic]) -> U32:
    """The little-endian block Murmur reads from a value Java's ByteBuffer wrote big-endian."""
    return values.astype(np.uint32).byteswap()


def _fold64(values: npt.NDArray[np.generic]) -> I32:
    """``(int) (v ^ (v >>> 32))``."""
    u = values.view(np.uint64)
    return ((u ^ (u >> np.uint64(32))) & _M32).astype(np.uint32).view(np.int32)


def _float_bits(values: npt.NDArray[np.float32]) -> npt.NDArray[np.int32]:
    """``Float.floatToIntBits``: every NaN becomes the canonical 0x7fc00000."""
    return np.where(np.isnan(values), np.int32(0x7FC00000), values.view(np.int32))


def _double_bits(values: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """``Double.doubleToLongBits``: every NaN becomes the canonical 0x7ff8000000000000."""
    return np.where(np.isnan(values), np.int64(0x7FF8000000000000), values.view(np.int64))


def _murmur_int(values: npt.NDArray[np.generic]) -> I32:
    return hash_words([_be_word(values)])


def _murmur_long(values: npt.NDArray[np.int64]) -> I32:
    return hash_words([_be_word(values >> np.int64(32)), _be_word(values & np.int64(0xFFFFFFFF))])


def _poly31(rows: ByteRows, init: int) -> I32:
    """``r = init; for each signed byte b: r = 31*r + b`` (String-style hash over UTF-8 bytes), 4 bytes a step.

    Rows shorter than the current block compute a discarded value (``np.where``) rather than being
    gathered out, which is cheaper for the usual similar-length keys.
    """
    h = np.full(len(rows.lengths), init, dtype=np.uint32)
    nblocks = rows.lengths >> 2
    p = [np.uint32(31**k % 2**32) for k in range(5)]
    for block in range(int(nblocks.max(initial=0))):
        w = rows.word(block)
        b = [sign_extended_byte(w, k).view(np.uint32) for k in range(4)]
        step = h * p[4] + b[0] * p[3] + b[1] * p[2] + b[2] * p[1] + b[3]
        h = np.where(nblocks > block, step, h)
    tail = rows.word_at(rows.starts + (nblocks << 2))
    for j in range(3):
        h = np.where((rows.lengths & 3) > j, h * p[1] + sign_extended_byte(tail, j).view(np.uint32), h)
    return h.view(np.int32)


# --- timestamp: TimestampWritableV2 serialized bytes -----------------------------------------------------------


def _split_timestamp(array: pa.Array) -> tuple[I64, I64]:
    """Epoch seconds of the wall clock read as UTC (``Timestamp.toEpochSecond``) and nanos in [0, 1e9)."""
    ns = _values(array, np.int64).astype(np.int64)
    seconds = np.floor_divide(ns, _NANOS)
    return seconds, ns - seconds * _NANOS


def _vlong(values: I64) -> tuple[npt.NDArray[np.uint8], I64]:
    """Hadoop ``WritableUtils.writeVLong`` encoding (1–9 bytes) of every value, left-aligned in a matrix."""
    n = len(values)
    out = np.zeros((n, 9), dtype=np.uint8)
    small = (values >= -112) & (values <= 127)
    neg = values < 0
    mag = np.where(neg, ~values, values)
    nbytes = np.ones(n, dtype=np.int64)
    for k in range(1, 8):
        nbytes += mag >= (1 << (8 * k))
    out[:, 0] = (
        np.where(small, values, np.where(neg, -120 - nbytes, -112 - nbytes)).astype(np.int8).view(np.uint8)
    )
    for j in range(8):
        shift = np.maximum(nbytes - 1 - j, 0) * 8
        byte = ((mag >> shift) & 0xFF).astype(np.uint8)
        out[:, 1 + j] = np.where(~small & (j < nbytes), byte, 0)
    return out, np.where(small, 1, 1 + nbytes)


def _timestamp_bytes(array: pa.Array) -> ByteRows:
    """``TimestampWritableV2.getBytes()``: 4-byte seconds/flag, reversed-nanos VInt, high-seconds VInt."""
    seconds, nanos = _split_timestamp(array)
    reversed_nanos = np.zeros_like(nanos)
    rest = nanos.copy()
    for _ in range(9):
        reversed_nanos = reversed_nanos * 10 + rest % 10
        rest //= 10
    has_second = (seconds < 0) | (seconds > 2**31 - 1)
    has_decimal = reversed_nanos != 0
    first = (seconds & 0xFFFFFFFF).astype(np.uint32)
    first = np.where(has_decimal | has_second, first | np.uint32(0x80000000), first & np.uint32(0x7FFFFFFF))
    n = len(seconds)
    matrix = np.zeros((n, 4 + 9 + 9), dtype=np.uint8)
    matrix[:, :4] = first.astype(">u4").view(np.uint8).reshape(n, 4)
    length = np.full(n, 4, dtype=np.int64)
    for present, value in (
        (has_second | has_decimal, np.where(has_second, -reversed_nanos - 1, reversed_nanos)),
        (has_second, seconds >> 31),
    ):
        encoded, size = _vlong(value)
        size = np.where(present, size, 0)
        for j in range(9):
            rows = np.flatnonzero(j < size)
            matrix[rows, length[rows] + j] = encoded[rows, j]
        length += size
    return _matrix_rows(matrix, np.zeros(n, dtype=np.int64), length)


# --- decimal: HiveDecimalWritable (normalised: no trailing fractional zeros) ---------------------------------------


def _decimal_parts(array: pa.Array, scale: int) -> tuple[npt.NDArray[np.bool_], list[_U64], I64]:
    """Sign, magnitude as four 32-bit limbs (most significant first) and scale, trailing zeros stripped."""
    raw = np.frombuffer(array.buffers()[1], dtype="<u8").reshape(-1, 2)[
        array.offset : array.offset + len(array)
    ]
    lo, hi = raw[:, 0].copy(), raw[:, 1].copy()
    negative = hi.view(np.int64) < 0
    lo_neg = ~lo + np.uint64(1)
    hi = np.where(negative, ~hi + (lo_neg == 0).astype(np.uint64), hi)
    lo = np.where(negative, lo_neg, lo)
    limbs = [hi >> np.uint64(32), hi & _M32, lo >> np.uint64(32), lo & _M32]
    scales = np.full(len(array), scale, dtype=np.int64)
    for _ in range(scale):
        quotient, remainder = _divmod10(limbs)
        strip = (remainder == 0) & (scales > 0)
        if not strip.any():
            break
        limbs = [np.where(strip, q, limb) for q, limb in zip(quotient, limbs, strict=True)]
        scales -= strip
    return negative, limbs, scales


def _divmod10(limbs: list[_U64]) -> tuple[list[_U64], _U64]:
    remainder = np.zeros_like(limbs[0])
    quotient = []
    for limb in limbs:
        current = (remainder << np.uint64(32)) | limb
        quotient.append(current // np.uint64(10))
        remainder = current % np.uint64(10)
    return quotient, remainder


def _decimal_bytes(array: pa.Array, hive_type: HiveType) -> ByteRows:
    """``HiveDecimalWritable.getInternalStorage()``: ``BigInteger.toByteArray()`` of the unscaled value."""
    negative, limbs, _ = _decimal_parts(array, hive_type.scale)
    hi = (limbs[0] << np.uint64(32)) | limbs[1]
    lo = (limbs[2] << np.uint64(32)) | limbs[3]
    # bitLength() of a negative BigInteger is that of |v| - 1; toByteArray has bitLength/8 + 1 bytes.
    borrow = (negative & (lo == 0)).astype(np.uint64)
    blen_lo = np.where(negative, lo - negative.astype(np.uint64), lo)
    blen_hi = np.where(negative, hi - borrow, hi)
    bit_length = np.where(blen_hi != 0, 64 + _bit_length64(blen_hi), _bit_length64(blen_lo))
    size = bit_length // 8 + 1
    lo_tc = np.where(negative, ~lo + np.uint64(1), lo)
    hi_tc = np.where(negative, ~hi + (lo_tc == 0).astype(np.uint64), hi)
    n = len(array)
    matrix = np.stack([hi_tc, lo_tc], axis=1).astype(">u8").view(np.uint8).reshape(n, 16)
    return _matrix_rows(matrix, 16 - size, size)


def _bit_length64(values: _U64) -> I64:
    high, low = values >> np.uint64(32), values & _M32
    return np.where(high != 0, 32 + _bit_length32(high), _bit_length32(low))


def _bit_length32(values: _U64) -> I64:
    """Exact for values < 2**32 (they are exact in float64, and frexp's exponent is the bit length)."""
    return np.frexp(values.astype(np.float64))[1].astype(np.int64)


def _decimal_legacy(array: pa.Array, hive_type: HiveType) -> I32:
    """``HiveDecimalWritable.hashCode()`` = ``BigDecimal.hashCode()`` = ``31*unscaled.hashCode() + scale``."""
    negative, limbs, scales = _decimal_parts(array, hive_type.scale)
    h = np.zeros(len(array), dtype=np.uint32)
    for limb in limbs:  # BigInteger.hashCode over its big-endian int magnitude words, times signum
        h = h * np.uint32(31) + limb.astype(np.uint32)
    h = np.where(negative, -h, h)
    return (h * np.uint32(31) + scales.astype(np.uint32)).view(np.int32)


# --- per-type tables -------------------------------------------------------------------------------------------

_Primitive = Callable[[pa.Array, HiveType], npt.NDArray[np.generic]]


def _bools(array: pa.Array, _: HiveType) -> npt.NDArray[np.generic]:
    return pc.fill_null(array, False).to_numpy(zero_copy_only=False).astype(np.int32)


def _smallint_murmur(array: pa.Array, _: HiveType) -> I32:
    v = _values(array, np.int16)
    return hash_tail2((v >> 8).astype(np.int8), (v & 0xFF).astype(np.uint8).view(np.int8))


def _float_murmur(array: pa.Array, _: HiveType) -> I32:
    # putFloat(Float.floatToIntBits(v)): the int bit pattern is *converted* to float before being written.
    return _murmur_int(_float_bits(_values(array, np.float32)).astype(np.float32).view(np.uint32))


def _double_murmur(array: pa.Array, _: HiveType) -> I32:
    return _murmur_long(_double_bits(_values(array, np.float64)).astype(np.float64).view(np.int64))


def _timestamp_legacy(array: pa.Array, _: HiveType) -> I32:
    seconds, nanos = _split_timestamp(array)
    return _fold64((seconds << 30) | nanos)


_MURMUR: dict[str, _Primitive] = {
    "boolean": _bools,
    "tinyint": lambda a, _: _values(a, np.int8).astype(np.int32),
    "smallint": _smallint_murmur,
    "int": lambda a, _: _murmur_int(_values(a, np.int32)),
    "bigint": lambda a, _: _murmur_long(_values(a, np.int64)),
    "float": _float_murmur,
    "double": _double_murmur,
    "string": lambda a, _: hash_rows(_byte_rows(a)),
    "varchar": lambda a, _: hash_rows(_byte_rows(a)),
    "char": lambda a, _: hash_rows(_byte_rows(_stripped(a))),
    "binary": lambda a, _: hash_rows(_byte_rows(a)),
    "date": lambda a, _: _murmur_int(_values(a, np.int32)),
    "timestamp": lambda a, _: hash_rows(_timestamp_bytes(a)),
    "decimal": lambda a, t: hash_rows(_decimal_bytes(a, t)),
}

_LEGACY: dict[str, _Primitive] = {
    "boolean": _bools,
    "tinyint": lambda a, _: _values(a, np.int8).astype(np.int32),
    "smallint": lambda a, _: _values(a, np.int16).astype(np.int32),
    "int": lambda a, _: _values(a, np.int32).copy(),
    "bigint": lambda a, _: _fold64(_values(a, np.int64)),
    "float": lambda a, _: _float_bits(_values(a, np.float32)),
    "double": lambda a, _: _fold64(_double_bits(_values(a, np.float64))),
    "string": lambda a, _: _poly31(_byte_rows(a), 0),  # Hive's own loop, starting at 0
    "varchar": lambda a, _: _poly31(_byte_rows(a), 1),  # Text.hashCode: WritableComparator.hashBytes, from 1
    "char": lambda a, _: _poly31(_byte_rows(_stripped(a)), 1),
    "binary": lambda a, _: _poly31(_byte_rows(a), 1),  # BytesWritable.hashCode, also hashBytes
    "date": lambda a, _: _values(a, np.int32).copy(),
    "timestamp": _timestamp_legacy,
    "decimal": _decimal_legacy,
}


# --- complex types (rare as bucket keys: per-row combination of vectorised child hashes) ---------------------------


def _list_hashes(array: pa.Array, hive_type: HiveType, version: int) -> I32:
    """``r = 31*r + hash(element)``."""
    child = field_hashes(array.values, hive_type.children[0], version).tolist()
    offsets = array.offsets.to_numpy(zero_copy_only=False).tolist()
    out = np.zeros(len(array), dtype=np.int32)
    for row in range(len(array)):
        r = 0
        for value in child[offsets[row] : offsets[row + 1]]:
            r = (31 * r + value) & 0xFFFFFFFF
        out[row] = r - (1 << 32) if r >= 1 << 31 else r
    return out


def _map_hashes(array: pa.Array, hive_type: HiveType, version: int) -> I32:
    """``r += hash(key) ^ hashCode(value)``: in v2 only the key uses Murmur, the value keeps the v1 hash."""
    keys = field_hashes(array.keys, hive_type.children[0], version).view(np.uint32)
    values = field_hashes(array.items, hive_type.children[1], 1).view(np.uint32)
    entries = np.concatenate([[0], np.cumsum(keys ^ values, dtype=np.uint32)])
    offsets = array.offsets.to_numpy(zero_copy_only=False)
    return (entries[offsets[1:]] - entries[offsets[:-1]]).astype(np.uint32).view(np.int32)


def _struct_hashes(array: pa.Array, hive_type: HiveType, version: int) -> I32:
    """``r = 31*r + hash(field)`` over the fields in declaration order."""
    h = np.zeros(len(array), dtype=np.uint32)
    for child, child_type in zip(array.flatten(), hive_type.children, strict=True):
        h = h * np.uint32(31) + field_hashes(child, child_type, version).view(np.uint32)
    return h.view(np.int32)


_COMPLEX: dict[str, Callable[[pa.Array, HiveType, int], I32]] = {
    "array": _list_hashes,
    "map": _map_hashes,
    "struct": _struct_hashes,
}
