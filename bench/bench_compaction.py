"""Major compaction against raw pyarrow, and scans before/after it.

The table is bench_read's: ``id int, msg string`` clustered into 5 buckets, N rows streamed as T committed
transactions (T deltas of 5 bucket files), then D% of the rows deleted in one more transaction. Each round runs
every case, each in its own subprocess (so its peak RSS is its own), on the same files:

1. ``raw``: pyarrow reads every insert file the compaction reads and writes their rows as plain ORC, one file
   per bucket, as many buckets at once as the compactor's worker (no ACID logic: no merge, no deletes);
2. ``major``: a major compaction (claim, plan, merge and write every bucket, publish) of the streamed table;
   compared with ``raw`` in input rows per second (goal >= 60%);
3. ``scan before``: ``table.scan().to_batches()`` drained on the streamed table;
4. then, untimed, the table is compacted and cleaned, and ``scan after`` is the same scan ("vs before" goal
   >= 3x) and ``pyarrow after`` a plain ``pyarrow.orc`` read of the compacted base's files (``scan after``
   against it: goal >= 80%).

Every case but the last two starts from a copy of the streamed table. Ratios are medians of the per-round
ratios (the machine's speed drifts between rounds); times are medians too. Also reported: file and directory
counts before and after. Prints a markdown table.

    python bench/bench_compaction.py [--rows 5000000] [--txns 100] [--delete-pct 5] [--rounds 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _memory import peak_rss_mib
from _subprocess import run_script
from _tuning import tuned
from bench_read import TABLE, _metastore, add_deletes, build


def _location(root: Path) -> Path:
    ms = _metastore(root)
    try:
        return Path(ms.table(TABLE).location)
    finally:
        ms.close()


def snapshot(root: Path) -> None:
    """Keep a copy of the streamed table and its metastore, to restore before each compaction run."""
    shutil.copytree(_location(root), root / "saved" / "table")
    shutil.copy2(root / "metastore.db", root / "saved" / "metastore.db")


def restore(root: Path) -> None:
    location = _location(root)
    shutil.rmtree(location)
    shutil.copytree(root / "saved" / "table", location)
    for suffix in ("-wal", "-shm"):
        Path(f"{root / 'metastore.db'}{suffix}").unlink(missing_ok=True)
    shutil.copy2(root / "saved" / "metastore.db", root / "metastore.db")


def counts(root: Path) -> tuple[int, int]:
    """(directories, files) under the table (hidden ones included)."""
    location = _location(root)
    dirs = sum(1 for p in location.rglob("*") if p.is_dir())
    return dirs, sum(1 for p in location.rglob("*") if p.is_file())


def case(root: Path, name: str) -> dict[str, float]:
    """Run one case in this process: rows, seconds, CPU seconds, peak RSS."""
    import pyarrow as pa
    import pyarrow.orc as po

    from acidstream.compactor import Compactor, CompactorConfig

    config = CompactorConfig(retention=0)
    if name in ("raw", "major", "scan before"):
        restore(root)  # the streamed table, as before any compaction (a previous case may have compacted it)
    ms = _metastore(root)
    scan = ms.table(TABLE).scan()
    plan = scan.plan_files()
    scan.close()
    out = root / "raw_out"
    pa.array([0]).to_numpy()  # pyarrow imports pandas on a process's first to_numpy: not part of any case
    start, cpu = time.perf_counter(), time.process_time()
    rows = 0
    if name == "raw":
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()

        def copy(task: Any) -> int:
            tables = [po.ORCFile(f.path).read(columns=["row"]) for f in task.insert_files]
            flat = pa.concat_tables(tables).column("row").combine_chunks().flatten()
            plain = pa.table(flat, names=["id", "msg"])
            po.write_table(plain, out / f"bucket_{task.bucket_id:05d}", compression="zlib")
            return plain.num_rows

        with ThreadPoolExecutor(config.parallelism) as pool:
            rows = sum(pool.map(copy, plan.tasks))
    elif name == "major":
        outcome = Compactor(ms, config).compact(TABLE, kind="major")
        assert outcome.info.state == "ready for cleaning", outcome.info
        rows = sum(r.events_read for r in outcome.results)  # input rows, as raw's
    elif name.startswith("scan"):
        for batch in ms.table(TABLE).scan().to_batches():
            rows += batch.num_rows
    elif name == "pyarrow after":
        for task in plan.tasks:
            for f in task.insert_files:
                rows += po.ORCFile(f.path).read().num_rows
    else:
        raise ValueError(name)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    ms.close()
    return {"rows": rows, "seconds": seconds, "cpu": cpu, "rss_mib": peak_rss_mib()}


def compacted(root: Path) -> tuple[int, int]:
    """The streamed table, major-compacted and cleaned (untimed); its (directories, files)."""
    from acidstream.compactor import Compactor, CompactorConfig

    restore(root)
    ms = _metastore(root)
    compactor = Compactor(ms, CompactorConfig(retention=0))
    assert compactor.compact(TABLE, kind="major").info.state == "ready for cleaning"
    assert all(c.state == "succeeded" for c in compactor.clean())
    ms.close()
    return counts(root)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--txns", type=int, default=100)
    parser.add_argument("--delete-pct", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="work directory (kept; default: a temporary one)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case(args.dir, args.case)))
        return
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench_compaction_"))
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    build(root, args.rows, args.txns)
    deleted = add_deletes(root, args.delete_pct)
    print(
        f"built {args.rows:,} rows in {args.txns} txns, deleted {deleted:,} ({args.delete_pct:g}%) in "
        f"{time.perf_counter() - start:.1f} s ({root})"
    )
    snapshot(root)
    before_counts = counts(root)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name in CASES[:3]:
            runs[name].append(run_script(__file__, ["--case", name, "--dir", str(root)]))
        after_counts = compacted(root)
        for name in CASES[3:]:
            runs[name].append(run_script(__file__, ["--case", name, "--dir", str(root)]))
    from acidstream.compactor import CompactorConfig

    print(
        f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, medians of {args.rounds} rounds; worker parallelism "
        f"{CompactorConfig().parallelism}\n"
    )
    print("| case | rows | wall s | CPU s | M rows/s | compared with | ratio | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    against = {"major": "raw", "scan after": "scan before"}
    for name, rs in runs.items():
        ref = against.get(name)
        ratio = "" if ref is None else f"{_median_ratio(runs[ref], rs):.2f}x"
        med = {k: statistics.median(r[k] for r in rs) for k in ("rows", "seconds", "cpu", "rss_mib")}
        print(
            f"| {name} | {med['rows']:,.0f} | {med['seconds']:.2f} | {med['cpu']:.2f} | "
            f"{med['rows'] / med['seconds'] / 1e6:.2f} | {ref or ''} | {ratio} | {med['rss_mib']:.0f} |"
        )
    scan_vs_pyarrow = _median_ratio(runs["pyarrow after"], runs["scan after"])
    print(f"\nscan after vs pyarrow after (same files): {scan_vs_pyarrow:.0%}")
    print(
        f"directories/files before: {before_counts[0]}/{before_counts[1]}, after: {after_counts[0]}/{after_counts[1]}"
    )


CASES = ["raw", "major", "scan before", "scan after", "pyarrow after"]


def _median_ratio(peer: list[dict[str, float]], ours: list[dict[str, float]]) -> float:
    """Median over rounds of our throughput (input rows per second) over the peer's."""
    return statistics.median(
        (o["rows"] / o["seconds"]) / (p["rows"] / p["seconds"]) for p, o in zip(peer, ours, strict=True)
    )


if __name__ == "__main__":
    tuned()
    main()
