"""Streaming and scans beside a CPU-busy Python thread: the GIL convoy, measured against the peers.

An application often has other Python threads at work (a consumer decoding messages, a web handler). Each call
that releases the GIL (every pyarrow and numpy kernel, every SQLite statement) must win it back from such a
thread, which can take Python's whole switch interval (5 ms). A commit that makes hundreds of those calls pays for
each. acidstream shortens the switch interval while it works (``acidstream.runtime``); one case turns that off to
show what it saves. This runs the streaming cases of ``bench_streaming.py`` and a scan of the streamed table,
each alone and beside a thread spinning in pure Python, in subprocesses of their own, and prints the slowdown.

    python bench/bench_streaming_contention.py [--records 300000] [--txns 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import bench_streaming
from _tuning import tuned


def case_acidstream_default_switch_interval(root: Path, n: int, txns: int) -> dict[str, float]:
    """acidstream with its switch-interval shortening turned off (how every release before it behaved)."""
    return bench_streaming.case_acidstream_write(root, n, txns, config={"gil_switch_interval": None})


def _streamed_table(root: Path, n: int, txns: int):  # type: ignore[no-untyped-def]
    """The table ``case_acidstream_write`` leaves behind: ``txns`` deltas of 5 bucket files each."""
    ms = bench_streaming._table(root)
    records, per = bench_streaming.make_records(n), n // txns
    with bench_streaming._connect(ms) as conn:
        for t in range(txns):
            with conn.transaction():
                for rec in records[t * per : (t + 1) * per]:
                    conn.write(rec)
    return ms.table("testing.alerts")


def _best_of_3(n: int, read: Callable[[], int]) -> dict[str, float]:
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        assert read() == n
        seconds.append(time.perf_counter() - start)
    return {"records_per_s": n / min(seconds), "seconds": min(seconds)}


def case_acidstream_scan(root: Path, n: int, txns: int) -> dict[str, float]:
    """A snapshot scan (ACID visibility and delete merge) of the streamed table, to Arrow; best of 3."""
    table = _streamed_table(root, n, txns)
    return _best_of_3(n, lambda: table.scan().to_arrow().num_rows)


def case_pyarrow_orc_read(root: Path, n: int, txns: int) -> dict[str, float]:
    """The peer of the scan: pyarrow reads the same bucket files (no visibility logic); best of 3."""
    import pyarrow as pa
    import pyarrow.orc as po

    table = _streamed_table(root, n, txns)
    files = sorted(str(p) for p in Path(table.location).rglob("bucket_*"))
    return _best_of_3(n, lambda: pa.concat_tables([po.read_table(f) for f in files]).num_rows)


CASES = {
    "acidstream write() per record": bench_streaming.case_acidstream_write,
    "acidstream, switch interval left at 5 ms": case_acidstream_default_switch_interval,
    "deltalake append": bench_streaming.case_deltalake,
    "pyarrow CSV→ORC, no txns": bench_streaming.case_pyarrow_csv_orc,
    "acidstream scan to Arrow (reads)": case_acidstream_scan,
    "pyarrow.orc read of the same files": case_pyarrow_orc_read,
}


def run_case(name: str, busy: bool, records: int, txns: int) -> dict[str, float]:
    """One case in this process, with a spinning Python thread beside it when ``busy``."""
    stop = threading.Event()

    def spin() -> None:
        count = 0
        while not stop.is_set():
            count += 1

    if busy:
        threading.Thread(target=spin, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return CASES[name](Path(tmp), records, txns)
    finally:
        stop.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--txns", type=int, default=30)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--busy", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.busy, args.records, args.txns)))
        return
    print(
        f"\n{args.records:,} records, {args.txns} txns; {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}\n\n"
        "| case | alone, records/s | beside a busy Python thread | slowdown | commit p50 alone / beside |\n"
        "|---|---:|---:|---:|---|"
    )
    for name in CASES:
        results = []
        for busy in (False, True):
            cmd = [sys.executable, __file__, "--case", name, "--records", str(args.records)]
            cmd += ["--txns", str(args.txns)] + (["--busy"] if busy else [])
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
        alone, beside = results
        commit = (
            f"{alone['commit_p50_ms']:.1f} / {beside['commit_p50_ms']:.1f} ms"
            if "commit_p50_ms" in alone
            else ""
        )
        print(
            f"| {name} | {alone['records_per_s']:,.0f} | {beside['records_per_s']:,.0f} | "
            f"{alone['records_per_s'] / beside['records_per_s']:.1f}× | {commit} |",
            flush=True,
        )


if __name__ == "__main__":
    tuned()
    main()
