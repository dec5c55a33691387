"""Rows printed the way Hive's CLI prints them: tab separated, NULL for nulls, complex values as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def hive_text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def hive_row(values: Iterable[Any]) -> str:
    return "\t".join(hive_text(v) for v in values)
