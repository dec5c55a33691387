"""Throughput of the record writers' bulk parsers: 1M records per writer, printed as a markdown table.

Run: ``python bench/bench_record_parsing.py [records]``.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable

import pyarrow as pa

from _tuning import tuned
from acidstream.acid.types import parse_columns
from acidstream.streaming.records import split_records
from acidstream.streaming.writers import StrictDelimitedInputWriter, StrictJsonWriter, StrictRegexWriter

COLUMNS = parse_columns("id int, msg string")


def timed(run: Callable[[], int], repeat: int = 3) -> tuple[float, int]:
    """Best of ``repeat`` runs (the machine is shared; the minimum is the least disturbed)."""
    best, rows = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        rows = run()
        best = min(best, time.perf_counter() - start)
    return best, rows


def main(n: int) -> None:
    delimited = [b"%d,some message text" % i for i in range(n)]
    as_json = [b'{"id":%d,"msg":"some message text"}' % i for i in range(n)]
    delimited_arrow = pa.array(delimited, pa.large_binary())
    json_arrow = pa.array(as_json, pa.large_binary())
    stream = b"\n".join(delimited) + b"\n"
    delim = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build().bind(COLUMNS)
    js = StrictJsonWriter.builder().build().bind(COLUMNS)
    rx = StrictRegexWriter.builder().with_regex(r"(\d+),(.*)").build().bind(COLUMNS)

    def stream_rows() -> int:
        return sum(delim.parse_arrow(c).batch.num_rows for c in split_records(io.BytesIO(stream), r"[\r\n]"))

    cases: list[tuple[str, Callable[[], int]]] = [
        ("delimited (int,string), parse(list of bytes)", lambda: delim.parse(delimited).batch.num_rows),
        ("delimited (int,string), parse_arrow", lambda: delim.parse_arrow(delimited_arrow).batch.num_rows),
        ("delimited via write_stream split (1 MiB chunks)", stream_rows),
        ("json (int,string), parse_arrow", lambda: js.parse_arrow(json_arrow).batch.num_rows),
        ("regex `(\\d+),(.*)`, parse_arrow", lambda: rx.parse_arrow(delimited_arrow).batch.num_rows),
    ]
    print(f"| writer ({n:,} records, best of 3) | seconds | records/s |")
    print("|---|---:|---:|")
    for name, run in cases:
        seconds, rows = timed(run)
        assert rows == n, (name, rows)
        print(f"| {name} | {seconds:.3f} | {n / seconds:,.0f} |")


if __name__ == "__main__":
    tuned()
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
