"""Shared data for the ORC event-file tests: every Hive type, with nulls."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from acidstream.acid.types import Column, parse_columns

ALL_TYPES = (
    "id int, ti tinyint, si smallint, bi bigint, bo boolean, f float, db double, s string, "
    "vc varchar(10), ch char(3), dt date, ts timestamp, dec decimal(10,2), big decimal(38,6), bin binary, "
    "l array<int>, m map<string,bigint>, st struct<a:int,b:string>"
)


@pytest.fixture
def fs() -> pafs.FileSystem:
    return pafs.LocalFileSystem()


@pytest.fixture
def all_columns() -> list[Column]:
    return parse_columns(ALL_TYPES)


def all_type_rows(columns: list[Column], n: int, start: int = 0) -> pa.Table:
    """``n`` rows covering every type; every 4th row is all nulls; timestamps carry nanoseconds."""
    data: dict[str, list[object]] = {c.name: [] for c in columns}
    for i in range(start, start + n):
        null = i % 4 == 3
        values: dict[str, object] = {
            "id": i,
            "ti": (i % 250) - 125,
            "si": -i,
            "bi": i * 10_000_000_000,
            "bo": i % 2 == 0,
            "f": i + 0.5,
            "db": -i / 3,
            "s": f"str-{i}-é",
            "vc": f"v{i}"[:10],
            "ch": f"c{i % 10}",
            "dt": datetime.date(1969, 12, 31) + datetime.timedelta(days=i),
            # even rows after 1970 with nanos; odd rows before 1970, whole seconds (see orc/timestamps.py)
            "ts": pa.scalar(
                1_577_836_800_123_456_789 + i * 1_000_000_007 if i % 2 == 0 else -(i * 86_400 + 1) * 10**9,
                pa.timestamp("ns"),
            ),
            "dec": decimal.Decimal(f"{i}.{i % 100:02d}"),
            "big": decimal.Decimal(f"-{i % 1000}12345678901234567890123456789.123456"),
            "bin": bytes([i % 256, 0, 255]),
            "l": [i, None, -i],
            "m": [("k", i), ("z", None)],
            "st": {"a": i, "b": None if i % 2 else f"b{i}"},
        }
        for c in columns:
            data[c.name].append(None if null else values[c.name])
    return pa.table({c.name: pa.array(data[c.name], c.type.to_arrow()) for c in columns})


def write_path(
    tmp_path: Path, directory: str = "delta_0000001_0000001_0000", bucket: str = "bucket_00000"
) -> str:
    d = tmp_path / directory
    d.mkdir(parents=True, exist_ok=True)
    return str(d / bucket)
