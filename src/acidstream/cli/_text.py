"""Rows printed the way Hive's CLI prints them: tab separated, NULL for nulls, complex values as JSON; times
as ISO-8601 in UTC."""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable
from typing import Any

from rich.console import Console

#: Width of a console that is no terminal: wide enough that no line is wrapped or cut.
_UNBOUNDED = 100_000


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


def iso_utc(epoch_ms: int, timespec: str = "milliseconds") -> str:
    """``2026-11-27T12:30:31.123Z``: a metastore time (epoch milliseconds) as a person reads it."""
    when = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return when.isoformat(timespec=timespec).replace("+00:00", "Z")


def console(*, stderr: bool = False) -> Console:
    """A rich console; one that is no terminal (a pipe, a log file) wraps and cuts nothing, as rich would at 80
    columns: a summary stays one line, a path stays whole."""
    out = Console(stderr=stderr)
    if not out.is_terminal and "COLUMNS" not in os.environ:  # a width asked for is kept
        out.width = _UNBOUNDED
    return out
