"""Bucketing checked against Hive's own Java classes (pyspark's JVM, see tests/support/hivejvm.py).

What Java validates here:
* ``Murmur3.hash32`` itself (storage-api 2.8.1, the class Hive 3 uses): seed, body and sign-extended tail;
* bucketing v1 end to end: Hive 2.3.10's ``ObjectInspectorUtils.hashCode`` per field and
  ``getBucketNumber(Object[], ObjectInspector[], int)`` (v1 semantics in 2.3) over writables of every
  primitive type, and ``getBucketNumber(int, int)``;
* the v2 byte layouts Hive 3 feeds to Murmur: ``HiveDecimalWritable.getInternalStorage()`` (storage-api
  2.8.1), ``TimestampWritable.getBytes()`` (same format as Hive 3's ``TimestampWritableV2``), big-endian
  ``ByteBuffer`` ints/longs/shorts, and the hash of string/binary bytes.

Hive 2.3 has no ``hashCodeMurmur``; the v2 per-type *dispatch* (which bytes each type hashes, the float/double
int-to-float quirk, char stripping, map values keeping the v1 hash) is checked only against the spec's vectors
and the scalar transcription in test_bucketing.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from acidstream.acid.bucketing import bucket_hash, bucket_numbers, field_hashes
from acidstream.acid.murmur3 import murmur3_hash32
from acidstream.acid.types import HiveType, parse_type

ROWS = 300


@pytest.fixture(scope="module")
def hive(spark: Any) -> Any:
    return _Hive(spark)


class _Hive:
    """Builders for Hive writables and their writable ObjectInspectors through py4j."""

    def __init__(self, spark: Any) -> None:
        self.gateway = spark.sparkContext._gateway
        self.jvm = spark._jvm
        serde2 = self.jvm.org.apache.hadoop.hive.serde2
        self.oiu = serde2.objectinspector.ObjectInspectorUtils
        self.factory = serde2.objectinspector.primitive.PrimitiveObjectInspectorFactory
        self.type_info = serde2.typeinfo.TypeInfoUtils
        self.converters = serde2.objectinspector.ObjectInspectorConverters
        self.murmur3 = self.jvm.org.apache.hive.common.util.Murmur3

    def inspector(self, hive_type: HiveType) -> Any:
        return self.factory.getPrimitiveWritableObjectInspector(
            self.type_info.getTypeInfoFromTypeString(str(hive_type))
        )

    def writable(self, value: Any, hive_type: HiveType) -> Any:
        """The writable Hive's streaming writer would hold for ``value`` (None stays null)."""
        if value is None:
            return None
        j, io, serde_io = self.jvm, self.jvm.org.apache.hadoop.io, self.jvm.org.apache.hadoop.hive.serde2.io
        name = hive_type.name
        if name in ("tinyint", "smallint", "float"):  # py4j cannot narrow: convert from a wider writable
            source = io.IntWritable(value) if name != "float" else serde_io.DoubleWritable(float(value))
            source_oi = (
                self.factory.writableIntObjectInspector
                if name != "float"
                else self.factory.writableDoubleObjectInspector
            )
            return self.converters.getConverter(source_oi, self.inspector(hive_type)).convert(source)
        if name == "timestamp":
            seconds, nanos = divmod(value, 10**9)
            ts = j.java.sql.Timestamp(seconds * 1000)
            ts.setNanos(nanos)
            return serde_io.TimestampWritable(ts)
        if name == "char":
            return serde_io.HiveCharWritable(
                j.org.apache.hadoop.hive.common.type.HiveChar(value, hive_type.length)
            )
        if name == "varchar":
            return serde_io.HiveVarcharWritable(
                j.org.apache.hadoop.hive.common.type.HiveVarchar(value, hive_type.length)
            )
        builders: dict[str, Callable[[Any], Any]] = {
            "boolean": io.BooleanWritable,
            "int": io.IntWritable,
            "bigint": io.LongWritable,
            "double": serde_io.DoubleWritable,
            "string": io.Text,
            "binary": lambda v: io.BytesWritable(bytearray(v)),
            "date": serde_io.DateWritable,
            "decimal": lambda v: serde_io.HiveDecimalWritable(str(v)),
        }
        return builders[name](value)


# --- random values (Python side: Arrow scalars; Java side: the same values as writables) ------------------------


def _text(rng: random.Random, max_len: int = 12) -> str:
    alphabet = "aZ0 _é€ü中\U0001f600"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len)))


def _random_value(rng: random.Random, hive_type: HiveType) -> Any:
    name = hive_type.name
    if name == "boolean":
        return rng.random() < 0.5
    if name in ("tinyint", "smallint", "int", "bigint"):
        bits = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}[name]
        edge = [0, 1, -1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1))]
        return (
            rng.choice(edge) if rng.random() < 0.2 else rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        )
    if name in ("float", "double"):
        special = [0.0, -0.0, 1.0, float("inf"), float("-inf"), float("nan"), 1e-30]
        value = rng.choice(special) if rng.random() < 0.3 else rng.uniform(-1e6, 1e6)
        return float(np.float32(value)) if name == "float" else value
    if name in ("string", "varchar"):
        return _text(rng)
    if name == "char":
        return _text(rng, hive_type.length).rstrip(" ") + " " * rng.randint(0, 2)
    if name == "binary":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 10)))
    if name == "date":
        return rng.randint(-200_000, 200_000)
    if name == "timestamp":
        seconds = rng.randint(-3_000_000_000, 4_000_000_000)
        nanos = rng.choice([0, 1, 500_000_000, 123_456_789, 999_999_999, rng.randrange(10**9)])
        return seconds * 10**9 + nanos
    if name == "decimal":
        unscaled = rng.randint(-(10**hive_type.precision) + 1, 10**hive_type.precision - 1)
        if rng.random() < 0.3:  # trailing zeros, which Hive strips before hashing
            unscaled = int(unscaled / 1000) * 1000
        return decimal.Decimal(f"{unscaled}E-{hive_type.scale}")  # exact: no context rounding
    raise AssertionError(name)


def _arrow(values: list[Any], hive_type: HiveType) -> pa.Array:
    if hive_type.name == "date":
        values = [None if v is None else dt.date(1970, 1, 1) + dt.timedelta(days=v) for v in values]
        return pa.array(values, pa.date32())
    if hive_type.name == "timestamp":
        return pa.array(values, pa.int64()).cast(pa.timestamp("ns"))
    return pa.array(values, hive_type.to_arrow())


MIXED_TYPES = [
    "string",
    "int",
    "bigint",
    "smallint",
    "tinyint",
    "boolean",
    "float",
    "double",
    "decimal(10,2)",
    "decimal(38,18)",
    "decimal(18,0)",
    "date",
    "timestamp",
    "char(10)",
    "varchar(20)",
    "binary",
]


def test_murmur3_hash32_matches_storage_api(hive: _Hive) -> None:
    rng = random.Random(7)
    assert hive.murmur3.DEFAULT_SEED == 104729
    for length in list(range(12)) + [rng.randint(12, 80) for _ in range(100)]:
        data = bytes(rng.randrange(256) for _ in range(length))
        assert murmur3_hash32(data) == hive.murmur3.hash32(bytearray(data), length), data.hex()
    strings = ["", "a", "é", "aé", "abcé", "€", "x€"] + [_text(rng, 30) for _ in range(200)]
    java = [hive.murmur3.hash32(bytearray(s.encode()), len(s.encode())) for s in strings]
    assert field_hashes(pa.array(strings), parse_type("string"), 2).tolist() == java


@pytest.mark.parametrize("type_text", MIXED_TYPES)
def test_legacy_field_hash_matches_hive_2_3(hive: _Hive, type_text: str) -> None:
    hive_type = parse_type(type_text)
    rng = random.Random(type_text)
    values = [None if rng.random() < 0.05 else _random_value(rng, hive_type) for _ in range(ROWS // 3)]
    inspector = hive.inspector(hive_type)
    java = [hive.oiu.hashCode(hive.writable(v, hive_type), inspector) for v in values]
    assert field_hashes(_arrow(values, hive_type), hive_type, 1).tolist() == java


def test_legacy_bucket_numbers_match_hive_2_3_on_mixed_rows(hive: _Hive) -> None:
    rng = random.Random(11)
    for round_ in range(4):
        types = [parse_type(t) for t in rng.sample(MIXED_TYPES, rng.randint(1, 4))]
        columns = [
            [None if rng.random() < 0.05 else _random_value(rng, t) for _ in range(ROWS // 4)] for t in types
        ]
        inspectors = hive.gateway.new_array(
            hive.jvm.org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector, len(types)
        )
        for i, t in enumerate(types):
            inspectors[i] = hive.inspector(t)
        num_buckets = [1, 4, 7, 64][round_]
        expected_hash, expected_bucket = [], []
        for row in range(len(columns[0])):
            objects = hive.gateway.new_array(hive.jvm.java.lang.Object, len(types))
            for i, t in enumerate(types):
                objects[i] = hive.writable(columns[i][row], t)
            expected_hash.append(hive.oiu.getBucketHashCode(objects, inspectors))
            expected_bucket.append(hive.oiu.getBucketNumber(objects, inspectors, num_buckets))
        arrays = [_arrow(c, t) for c, t in zip(columns, types, strict=True)]
        assert bucket_hash(arrays, types, 1).tolist() == expected_hash, [str(t) for t in types]
        assert bucket_numbers(arrays, types, num_buckets, 1).tolist() == expected_bucket


def test_bucket_number_of_hash_matches_hive(hive: _Hive) -> None:
    rng = random.Random(3)
    hashes = [rng.randint(-(2**31), 2**31 - 1) for _ in range(200)] + [-(2**31), -1, 0, 2**31 - 1]
    for n in (1, 2, 3, 4, 31, 1024):
        # A single int column's v1 field hash is the value itself, so the combined hash is exactly ``h``.
        got = bucket_numbers([pa.array(hashes, pa.int32())], [parse_type("int")], n, 1).tolist()
        assert got == [hive.oiu.getBucketNumber(h, n) for h in hashes], n


def test_murmur_byte_layouts_match_hive_writables(hive: _Hive) -> None:
    """v2 hashes Murmur3 over Hive's serialized bytes; build those bytes with Hive's classes and compare."""
    rng = random.Random(5)
    m = hive.murmur3
    buffer = hive.jvm.java.nio.ByteBuffer

    def murmur_of(write: Callable[[Any], Any], size: int) -> int:
        bb = buffer.allocate(8)
        write(bb)
        return int(m.hash32(bb.array(), size))

    checks: dict[str, tuple[list[Any], Callable[[Any], int]]] = {
        "int": (
            [_random_value(rng, parse_type("int")) for _ in range(50)],
            lambda v: murmur_of(lambda bb: bb.putInt(v), 4),
        ),
        "bigint": (
            [_random_value(rng, parse_type("bigint")) for _ in range(50)],
            lambda v: murmur_of(lambda bb: bb.putLong(v), 8),
        ),
        "date": (
            [_random_value(rng, parse_type("date")) for _ in range(50)],
            lambda v: murmur_of(lambda bb: bb.putInt(hive.writable(v, parse_type("date")).getDays()), 4),
        ),
        "timestamp": (
            [_random_value(rng, parse_type("timestamp")) for _ in range(150)],
            lambda v: int(m.hash32(hive.writable(v, parse_type("timestamp")).getBytes())),
        ),
        "binary": (
            [_random_value(rng, parse_type("binary")) for _ in range(50)],
            lambda v: int(m.hash32(bytearray(v), len(v))),
        ),
    }
    for precision, scale in [(10, 2), (38, 18), (18, 0), (5, 5), (38, 0)]:
        t = parse_type(f"decimal({precision},{scale})")
        values = [_random_value(rng, t) for _ in range(80)] + [decimal.Decimal(0)]
        checks[str(t)] = (
            values,
            lambda v: int(m.hash32(hive.writable(v, parse_type("decimal(38,18)")).getInternalStorage())),
        )
    for type_text, (values, java) in checks.items():
        t = parse_type(type_text)
        assert field_hashes(_arrow(values, t), t, 2).tolist() == [java(v) for v in values], type_text
    shorts = [rng.randint(-(2**15), 2**15 - 1) for _ in range(50)] + [0, 1, -1, 255, -256]
    java_shorts = []
    for v in shorts:
        bytes_ = bytearray(v.to_bytes(2, "big", signed=True))
        java_shorts.append(int(m.hash32(bytes_, 2)))
    assert field_hashes(pa.array(shorts, pa.int16()), parse_type("smallint"), 2).tolist() == java_shorts
