"""Bucketing: reference vectors (docs/format.md, Bucket ids and bucketing), Hive's testBucketing case, and the
vectorised path against a scalar reference transcribed line by line from Hive's Java (ObjectInspectorUtils,
TimestampWritableV2, HiveDecimalWritable/BigDecimal, Text/BytesWritable hashCode)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.bucketing import bucket_hash, bucket_numbers, bucketing_version_of, field_hashes
from acidstream.acid.murmur3 import murmur3_hash32
from acidstream.acid.types import HiveType, parse_type

# --- scalar reference, transcribed from Hive's Java -----------------------------------------------------------


def i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def signed_bytes(data: bytes) -> list[int]:
    return [b - 256 if b >= 128 else b for b in data]


def hash_bytes(data: bytes, init: int) -> int:
    """``r = init; r = r*31 + b`` over signed bytes (Hive's string loop with 0, hashBytes with 1)."""
    r = init
    for b in signed_bytes(data):
        r = i32(r * 31 + b)
    return r


def float_to_int_bits(v: float) -> int:
    return 0x7FC00000 if math.isnan(v) else struct.unpack(">i", struct.pack(">f", v))[0]


def double_to_long_bits(v: float) -> int:
    return 0x7FF8000000000000 if math.isnan(v) else struct.unpack(">q", struct.pack(">d", v))[0]


def fold(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return i32(v ^ (v >> 32))


def write_vlong(v: int) -> bytes:
    """Hadoop WritableUtils.writeVLong."""
    if -112 <= v <= 127:
        return struct.pack("b", v)
    length = -112
    if v < 0:
        v ^= -1
        length = -120
    tmp = v
    while tmp != 0:
        tmp >>= 8
        length -= 1
    out = struct.pack("b", length)
    length = -(length + 120) if length < -120 else -(length + 112)
    for idx in range(length, 0, -1):
        out += bytes([(v >> ((idx - 1) * 8)) & 0xFF])
    return out


def timestamp_bytes(ns: int) -> bytes:
    """TimestampWritableV2.convertTimestampToBytes of the wall clock ``ns`` read as UTC."""
    seconds, nanos = divmod(ns, 10**9)
    has_second = seconds < 0 or seconds > 2**31 - 1
    decimal_ = 0
    if nanos != 0:
        for _ in range(9):
            decimal_ = decimal_ * 10 + nanos % 10
            nanos //= 10
    nanos_part = b""
    if has_second or decimal_ != 0:
        nanos_part = write_vlong(-decimal_ - 1 if has_second else decimal_)
    first = seconds & 0xFFFFFFFF
    first = first | 0x80000000 if (decimal_ != 0 or has_second) else first & 0x7FFFFFFF
    out = first.to_bytes(4, "big") + nanos_part
    if has_second:
        out += write_vlong(seconds >> 31)
    return out


def normalised(d: decimal.Decimal) -> tuple[int, int]:
    """HiveDecimal keeps no trailing fractional zeros: (unscaled, scale)."""
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -exponent
    while scale > 0 and unscaled % 10 == 0:
        unscaled //= 10
        scale -= 1
    return unscaled, max(scale, 0)


def big_integer_bytes(v: int) -> bytes:
    """BigInteger.toByteArray."""
    bit_length = v.bit_length() if v >= 0 else (~v).bit_length()
    return v.to_bytes(bit_length // 8 + 1, "big", signed=True)


def big_decimal_hash(unscaled: int, scale: int) -> int:
    """BigDecimal.hashCode = 31*BigInteger.hashCode + scale; BigInteger hashes its 32-bit magnitude words."""
    mag, h = abs(unscaled), 0
    words = []
    while mag:
        words.insert(0, mag & 0xFFFFFFFF)
        mag >>= 32
    for w in words:
        h = i32(31 * h + w)
    h = i32(h * (-1 if unscaled < 0 else 1))
    return i32(31 * h + scale)


def ref_murmur(v: Any, t: HiveType) -> int:
    """ObjectInspectorUtils.hashCodeMurmur."""
    if v is None:
        return 0
    n = t.name
    if n == "boolean":
        return 1 if v else 0
    if n == "tinyint":
        return int(v)
    if n == "smallint":
        return murmur3_hash32(struct.pack(">h", v))
    if n in ("int", "date"):
        return murmur3_hash32(struct.pack(">i", v))
    if n == "bigint":
        return murmur3_hash32(struct.pack(">q", v))
    if n == "float":  # putFloat(Float.floatToIntBits(v)): int converted to float
        return murmur3_hash32(struct.pack(">f", float(float_to_int_bits(v))))
    if n == "double":
        return murmur3_hash32(struct.pack(">d", float(double_to_long_bits(v))))
    if n in ("string", "varchar"):
        return murmur3_hash32(v.encode())
    if n == "char":
        return murmur3_hash32(v.rstrip(" ").encode())
    if n == "binary":
        return murmur3_hash32(v)
    if n == "timestamp":
        return murmur3_hash32(timestamp_bytes(v))
    if n == "decimal":
        return murmur3_hash32(big_integer_bytes(normalised(v)[0]))
    if n == "array":
        r = 0
        for e in v:
            r = i32(31 * r + ref_murmur(e, t.children[0]))
        return r
    if n == "map":
        r = 0
        for k, val in v:
            r = i32(r + (ref_murmur(k, t.children[0]) ^ ref_legacy(val, t.children[1])))
        return r
    if n == "struct":
        r = 0
        for name, child in zip(t.field_names, t.children, strict=True):
            r = i32(31 * r + ref_murmur(v[name], child))
        return r
    raise AssertionError(n)


def ref_legacy(v: Any, t: HiveType) -> int:
    """ObjectInspectorUtils.hashCode."""
    if v is None:
        return 0
    n = t.name
    if n == "boolean":
        return 1 if v else 0
    if n in ("tinyint", "smallint", "int", "date"):
        return int(v)
    if n == "bigint":
        return fold(v)
    if n == "float":
        return float_to_int_bits(v)
    if n == "double":
        return fold(double_to_long_bits(v))
    if n == "string":
        return hash_bytes(v.encode(), 0)
    if n == "varchar":
        return hash_bytes(v.encode(), 1)
    if n == "char":
        return hash_bytes(v.rstrip(" ").encode(), 1)
    if n == "binary":
        return hash_bytes(v, 1)
    if n == "timestamp":  # TimestampWritable.hashCode, JVM in UTC
        seconds, nanos = divmod(v, 10**9)
        return fold((seconds << 30) | nanos)
    if n == "decimal":
        return big_decimal_hash(*normalised(v))
    if n == "array":
        r = 0
        for e in v:
            r = i32(31 * r + ref_legacy(e, t.children[0]))
        return r
    if n == "map":
        r = 0
        for k, val in v:
            r = i32(r + (ref_legacy(k, t.children[0]) ^ ref_legacy(val, t.children[1])))
        return r
    if n == "struct":
        r = 0
        for name, child in zip(t.field_names, t.children, strict=True):
            r = i32(31 * r + ref_legacy(v[name], child))
        return r
    raise AssertionError(n)


REFERENCE = {1: ref_legacy, 2: ref_murmur}


def to_arrow(values: list[Any], t: HiveType) -> pa.Array:
    if t.name == "date":
        return pa.array([None if v is None else dt.date(1970, 1, 1) + dt.timedelta(days=v) for v in values])
    if t.name == "timestamp":
        return pa.array(values, pa.int64()).cast(pa.timestamp("ns"))
    return pa.array(values, t.to_arrow())


# --- spec vectors ------------------------------------------------------------------------------------------------

SPEC_V2 = [
    ("int", 0, 1362653161, 1),
    ("int", 1, 1321152925, 1),
    ("int", -1, 1626716813, 1),
    ("int", 42, 1960085659, 3),
    ("int", 2147483647, 1133859967, 3),
    ("bigint", 0, 1754797035, 3),
    ("bigint", 1, -913662660, 0),
    ("bigint", -1, -237789309, 3),
    ("bigint", 42, -1236600470, 2),
    ("string", "", -965378730, 2),
    ("string", "a", 1086686554, 2),
    ("string", "abc", -885266671, 1),
    ("string", "abcd", -873246740, 0),
    ("string", "name0", 1700244152, 0),
    ("string", "héllo", 1190235422, 2),
    ("string", "é", -527561221, 3),
    ("smallint", 0, 134891328, None),
    ("smallint", 1, 1484957954, None),
    ("smallint", -1, -1220617012, None),
    ("float", 1.0, 1379734019, None),
    ("double", 1.0, 804388068, None),
]


@pytest.mark.parametrize(("type_text", "value", "hash_", "bucket"), SPEC_V2)
def test_spec_vectors(type_text: str, value: Any, hash_: int, bucket: int | None) -> None:
    t = parse_type(type_text)
    array = pa.array([value], t.to_arrow())
    assert field_hashes(array, t, 2).tolist() == [hash_]
    if bucket is not None:
        assert bucket_numbers([array], [t], 4, 2).tolist() == [bucket]
    if t.is_string_like:
        assert murmur3_hash32(value.encode()) == hash_


def test_hive_test_streaming_bucketing_case() -> None:
    """TestStreaming.testBucketing: 4 buckets clustered by (key1 string, key2 int)."""
    keys = [pa.array(["name0", "name2", "name4", "name5"]), pa.array([1, 2, 2, 2], pa.int32())]
    types = [parse_type("string"), parse_type("int")]
    assert bucket_numbers(keys, types, 4, 2).tolist() == [1, 2, 2, 3]
    assert bucket_numbers(keys, types, 4, 1).tolist() == [0, 3, 1, 0]
    assert bucket_hash(keys, types, 2).tolist()[0] == i32(31 * 1700244152 + 1321152925)


def test_bucket_number_arguments() -> None:
    keys, types = [pa.array([1], pa.int32())], [parse_type("int")]
    with pytest.raises(ValueError, match="Number of Buckets must be > 0"):
        bucket_numbers(keys, types, 0, 2)
    with pytest.raises(ValueError, match="bucketing_version 3"):
        bucket_numbers(keys, types, 4, 3)
    with pytest.raises(ValueError, match="one Hive type per bucket column"):
        bucket_hash(keys, [], 2)
    with pytest.raises(ValueError, match="differ in length"):
        bucket_hash([pa.array([1, 2], pa.int32()), pa.array([1], pa.int32())], types * 2, 2)
    h = bucket_hash([pa.array([-(2**31), -1, 7], pa.int32())], types, 1)
    assert bucket_numbers([pa.array([-(2**31), -1, 7], pa.int32())], types, 3, 1).tolist() == [
        (int(x) & 0x7FFFFFFF) % 3 for x in h
    ]


@pytest.mark.parametrize(
    ("props", "version"),
    [
        ({}, 1),
        ({"bucketing_version": "2"}, 2),
        ({"bucketing_version": "1"}, 1),
        ({"bucketing_version": "+2"}, 2),
    ]
    + [({"bucketing_version": text}, 1) for text in ("", " 2", "2.0", "two", "99999999999")]
    + [({"bucketing_version": "3"}, 3)],
)
def test_bucketing_version_of_follows_integer_parse_int(props: dict[str, str], version: int) -> None:
    assert bucketing_version_of(props) == version


# --- vectorised == scalar reference --------------------------------------------------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
TAIL_TEXT = st.tuples(
    st.text(max_size=7).filter(str.isascii), st.sampled_from(["", "é", "€", "\U0001f600", "ü"])
)


def values_for(t: HiveType) -> st.SearchStrategy[Any]:
    n = t.name
    if n == "boolean":
        return st.booleans()
    if n in ("tinyint", "smallint", "int", "bigint"):
        bits = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}[n]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if n == "float":
        return st.floats(width=32)
    if n == "double":
        return st.floats()
    if n in ("string", "varchar"):
        return TEXT | TAIL_TEXT.map("".join)
    if n == "char":
        return st.tuples(TEXT, st.integers(0, 3)).map(lambda p: p[0] + " " * p[1])
    if n == "binary":
        return st.binary(max_size=30)
    if n == "date":
        return st.dates().map(lambda d: (d - dt.date(1970, 1, 1)).days)
    if n == "timestamp":
        return st.integers(-(2**63) + 1, 2**63 - 1) | st.integers(-(10**18), 10**18).map(
            lambda s: s * 10**9 // 10**9
        )
    if n == "decimal":
        p, s = t.precision, t.scale
        unscaled = st.integers(-(10**p) + 1, 10**p - 1) | st.integers(
            -(10 ** (p - 3)) + 1, 10 ** (p - 3) - 1
        ).map(lambda u: u * 1000)
        return unscaled.map(lambda u: decimal.Decimal(f"{u}E-{s}"))  # exact: no context rounding
    raise AssertionError(n)


PRIMITIVES = [
    "boolean",
    "tinyint",
    "smallint",
    "int",
    "bigint",
    "float",
    "double",
    "string",
    "char(12)",
    "varchar(40)",
    "binary",
    "date",
    "timestamp",
    "decimal(5,5)",
    "decimal(10,2)",
    "decimal(18,4)",
    "decimal(19,0)",
    "decimal(38,10)",
    "decimal(38,0)",
]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("type_text", PRIMITIVES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_vectorised_equals_scalar_reference(type_text: str, version: int, data: st.DataObject) -> None:
    t = parse_type(type_text)
    values = data.draw(st.lists(st.none() | values_for(t), max_size=40))
    expected = [REFERENCE[version](v, t) for v in values]
    array = to_arrow(values, t)
    assert field_hashes(array, t, version).tolist() == expected
    cut = data.draw(st.integers(0, len(values)))  # slices and chunks must not change a row's hash
    assert field_hashes(array.slice(cut), t, version).tolist() == expected[cut:]
    chunked = pa.chunked_array([array.slice(0, cut), array.slice(cut)], type=array.type)
    assert field_hashes(chunked, t, version).tolist() == expected


@pytest.mark.parametrize("version", [1, 2])
def test_large_string_and_tz_timestamp_inputs(version: int) -> None:
    words = ["", "a", "héllo", "€€", "name0"]
    for t in ("string", "varchar(9)", "char(9)"):
        large = pa.array(words, pa.large_string())
        assert field_hashes(large, parse_type(t), version).tolist() == [
            REFERENCE[version](w, parse_type(t)) for w in words
        ]
    micros = [0, -1, 1_600_000_000_123_456]  # what Spark hands over: microseconds, tz=UTC
    utc = pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    expected = [REFERENCE[version](v * 1000, parse_type("timestamp")) for v in micros]
    assert field_hashes(utc, parse_type("timestamp"), version).tolist() == expected


COMPLEX = {
    "array<int>": st.lists(st.none() | values_for(parse_type("int")), max_size=5),
    "array<string>": st.lists(st.none() | TEXT, max_size=5),
    "map<string,bigint>": st.dictionaries(TEXT, st.none() | values_for(parse_type("bigint")), max_size=4).map(
        lambda d: list(d.items())
    ),
    "struct<a:string,b:double,c:array<int>>": st.fixed_dictionaries(
        {
            "a": st.none() | TEXT,
            "b": st.none() | st.floats(),
            "c": st.none() | st.lists(st.none() | values_for(parse_type("int")), max_size=3),
        }
    ),
}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("type_text", list(COMPLEX))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_complex_types_equal_scalar_reference(type_text: str, version: int, data: st.DataObject) -> None:
    t = parse_type(type_text)
    values = data.draw(st.lists(st.none() | COMPLEX[type_text], max_size=12))
    expected = [REFERENCE[version](v, t) for v in values]
    array = pa.array(values, t.to_arrow())
    assert field_hashes(array, t, version).tolist() == expected
    cut = data.draw(st.integers(0, len(values)))
    assert field_hashes(array.slice(cut), t, version).tolist() == expected[cut:]


def test_float_quirks_and_special_values() -> None:
    """NaN payloads collapse to Java's canonical NaN; -0.0 and 0.0 differ; the int→float conversion rounds."""
    t = parse_type("double")
    values = np.array([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 5e-324], dtype=np.float64)
    other_nan = np.array([0x7FF8000000000001], dtype=np.int64).view(np.float64)
    for version in (1, 2):
        hashes = field_hashes(pa.array(values), t, version).tolist()
        assert hashes == [REFERENCE[version](float(v), t) for v in values]
        assert hashes[0] != hashes[1]
        assert field_hashes(pa.array(other_nan), t, version).tolist() == [hashes[4]]
