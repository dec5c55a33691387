"""Replication lag under a steady streaming load.

A streaming writer commits at a steady rate (default 200k records/s, ``--commits-per-second`` commits of equal
size, transaction batches of 10: every batch file stays open across 10 commits) into ``id int, msg string``
clustered into 4 buckets, while ``acidstream repl sync --follow`` runs in its own process, replicating to another
warehouse and metastore. Every ``--sample`` seconds the replica's lag is sampled (``repl.status``): events
published on the source and not yet applied, and the age of the oldest of them. Reported: lag p50/p99 in
seconds and events, the rate the writer achieved, and bytes copied (the sync's count, re-copies included)
against bytes written (the source's data files; goal <= 1.05: byte ranges, not whole growing files).

    python bench/bench_replication.py [--rate 200000] [--seconds 30] [--dir DIR]
    python bench/bench_replication.py --quick      # reduced size: 20000 records/s for 8 s
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from _tuning import tuned
from acidstream import StreamingConnection, StrictDelimitedInputWriter, repl
from acidstream.catalog import Metastore

TABLE = "default.events"


def _writer(
    source: Metastore, rate: int, seconds: float, commits_per_second: int, batch: int
) -> dict[str, float]:
    """Commit ``rate / commits_per_second`` records every ``1 / commits_per_second`` s for ``seconds``."""
    per_commit = max(1, rate // commits_per_second)
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    conn = (
        StreamingConnection.builder()
        .with_metastore(source)
        .with_database("default")
        .with_table("events")
        .with_record_writer(writer)
        .with_transaction_batch_size(batch)
        .connect()
    )
    ids = np.arange(per_commit, dtype=np.int32)
    msgs = pa.array([f"message {i:08d}" for i in range(per_commit)])
    start = time.monotonic()
    commits = 0
    behind = 0.0
    try:
        while (now := time.monotonic()) - start < seconds:
            due = start + commits / commits_per_second
            if now < due:
                time.sleep(due - now)
            else:
                behind = max(behind, now - due)
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": ids + commits * per_commit, "msg": msgs}))
            conn.commit_transaction()
            commits += 1
    finally:
        conn.close()
    elapsed = time.monotonic() - start
    return {"records": commits * per_commit, "commits": commits, "seconds": elapsed, "max_behind_s": behind}


def _sampler(
    source: Metastore, target: Metastore, every: float, stop: threading.Event, out: list[Any]
) -> None:
    while not stop.wait(every):
        status = repl.status(target, source)
        if status is not None and status.lag_events is not None:
            out.append((status.lag_events, status.lag_seconds))


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-repl-"))
    src_wh, dst_wh = root / "source", root / "replica"
    src_url, dst_url = f"sqlite:///{src_wh / 'metastore.db'}", f"sqlite:///{dst_wh / 'metastore.db'}"
    with Metastore.connect(src_url, warehouse=src_wh) as source:
        source.execute(
            f"CREATE TABLE {TABLE} (id int, msg string) CLUSTERED BY (id) INTO 4 BUCKETS STORED AS ORC "
            "TBLPROPERTIES ('transactional'='true')"
        )
    sync = subprocess.Popen(
        [
            *(sys.executable, "-m", "acidstream.cli", "repl", "sync", src_url, dst_url),
            *("--target-warehouse", str(dst_wh), "--source-warehouse", str(src_wh)),
            *("--follow", "--poll-interval", str(args.poll)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    samples: list[tuple[int, float]] = []
    try:
        with (
            Metastore.connect(src_url, warehouse=src_wh) as source,
            Metastore.connect(dst_url, warehouse=dst_wh) as target,
        ):
            while target.repl_state("default") is None or not target.repl_state("default").last_event_id:  # type: ignore[union-attr]
                time.sleep(0.05)  # bootstrapped
            stop = threading.Event()
            sampler = threading.Thread(target=_sampler, args=(source, target, args.sample, stop, samples))
            sampler.start()
            written = _writer(source, args.rate, args.seconds, args.commits_per_second, args.batch)
            stop.set()
            sampler.join()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # catch up, then stop the follower
                status = repl.status(target, source)
                if status is not None and status.lag_events == 0:
                    break
                time.sleep(0.1)
            same = target.table(TABLE).scan().count() == source.table(TABLE).scan().count()
    finally:
        sync.send_signal(signal.SIGTERM)
        out, err = sync.communicate(timeout=60)
    match = re.search(r"(\d+) bytes copied", out)
    if match is None:
        raise RuntimeError(f"repl sync printed no byte count: {out!r} {err!r}")
    copied = int(match.group(1))
    data = sum(
        p.stat().st_size
        for p in (src_wh / "events").rglob("bucket_*")
        if not p.name.endswith("_flush_length")
    )
    lag_events = np.array([s[0] for s in samples] or [0])
    lag_seconds = np.array([s[1] for s in samples] or [0.0])
    return {
        "machine": f"{platform.node()} ({os.cpu_count()} cores)",
        "rate_asked": args.rate,
        "rate_achieved": round(written["records"] / written["seconds"]),
        "commits": written["commits"],
        "batch_size": args.batch,
        "samples": len(samples),
        "lag_p50_s": round(float(np.percentile(lag_seconds, 50)), 3),
        "lag_p99_s": round(float(np.percentile(lag_seconds, 99)), 3),
        "lag_p50_events": float(np.percentile(lag_events, 50)),
        "lag_p99_events": float(np.percentile(lag_events, 99)),
        "bytes_written": data,
        "bytes_copied": copied,
        "copied_vs_written": round(copied / data, 4) if data else None,
        "replica_equal": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=200_000, help="records per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--commits-per-second", type=int, default=10)
    parser.add_argument("--batch", type=int, default=10, help="transaction batch size")
    parser.add_argument("--poll", type=float, default=0.05, help="the follower's poll interval")
    parser.add_argument("--sample", type=float, default=0.1, help="seconds between lag samples")
    parser.add_argument("--quick", action="store_true", help="reduced size: 20000 records/s for 8 s")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    if args.quick:
        args.rate, args.seconds = 20_000, 8.0
    result = run(args)
    print("| metric | value |\n|---|---|")
    for key, value in result.items():
        print(f"| {key} | {value} |")
    print(json.dumps(result))


if __name__ == "__main__":
    tuned()
    main()
