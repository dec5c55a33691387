"""Render Arrow values the way Hive 2.3's ``OrcStruct.toString`` prints them, to compare whole rows with Hive."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pandas as pd

from acidstream.acid.types import Column, HiveType


def _java_string_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def _hashmap_order(keys: list[str]) -> list[int]:
    """Iteration order of a small java.util.HashMap<String, _> (16 buckets, no collisions in our data)."""

    def bucket(k: str) -> int:
        h = _java_string_hash(k)
        return (h ^ (h >> 16)) & 15

    return sorted(range(len(keys)), key=lambda i: bucket(keys[i]))


def hive_str(value: Any, t: HiveType) -> str:
    if value is None:
        return "null"
    if t.name == "boolean":
        return "true" if value else "false"
    if t.name == "char":
        return str(value).ljust(t.length)
    if t.name == "date":
        assert isinstance(value, datetime.date)
        return value.isoformat()
    if t.name == "timestamp":
        ts = pd.Timestamp(value)
        nanos = ts.microsecond * 1000 + ts.nanosecond
        frac = f".{nanos:09d}".rstrip("0") if nanos else ""  # TimestampWritable prints no ".0"
        return f"{ts.strftime('%Y-%m-%d %H:%M:%S')}{frac}"
    if t.name == "decimal":
        assert isinstance(value, decimal.Decimal)
        return format(value.normalize(decimal.Context(prec=60)), "f") if value else "0"
    if t.name == "binary":
        return " ".join(f"{b:02x}" for b in value)
    if t.name == "array":
        return "[" + ", ".join(hive_str(v, t.children[0]) for v in value) + "]"
    if t.name == "map":
        keys = [k for k, _ in value]
        order = _hashmap_order([str(k) for k in keys])
        items = [value[i] for i in order]
        return (
            "{"
            + ", ".join(f"{hive_str(k, t.children[0])}={hive_str(v, t.children[1])}" for k, v in items)
            + "}"
        )
    if t.name == "struct":
        return (
            "{"
            + ", ".join(hive_str(value[n], c) for n, c in zip(t.field_names, t.children, strict=True))
            + "}"
        )
    return repr(value) if isinstance(value, float) else str(value)


def hive_row(row: dict[str, Any] | None, columns: list[Column]) -> str:
    if row is None:
        return "{" + ", ".join("null" for _ in columns) + "}"
    return "{" + ", ".join(hive_str(row[c.name], c.type) for c in columns) + "}"
