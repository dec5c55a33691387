"""Snapshot-reader throughput against pyarrow reading the same ORC files with no ACID logic.

The table: ``id int, msg string`` clustered into 5 buckets, written by StreamingConnection.write_batch as T
committed transactions of N/T rows (so T deltas of 5 bucket files). Cases, each in its own subprocess so that
its peak memory (max RSS) is its own, all on the same files in the same run:

1. ``pyarrow``: ``pyarrow.orc.ORCFile(path).read()`` of every bucket file the reader uses (no ACID logic);
   "vs pyarrow" is pyarrow's time over the case's time on the same files (throughput over the same input),
   in wall-clock and in CPU time (the latter is steadier on a loaded machine);
2. ``acid``: ``table.scan().to_batches()`` drained (write-id filter, ROW__ID-free projection);
3. ``acid_count``: ``table.scan().count()``;
then D% of the rows are deleted (delete_delta files written with AcidWriter.delete, one committed txn) and
1 and 2 run again (pyarrow also reads the delete files). Goals: acid ≥ 70% of pyarrow without deletes,
≥ 50% with deletes. Prints a markdown table.

    python bench/bench_read.py [--rows 10000000] [--txns 20] [--delete-pct 10] [--dir DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from _memory import peak_rss_mib
from _subprocess import run_script
from _tuning import tuned

TABLE = "bench.t"


def _metastore(root: Path) -> Any:
    from acidstream import Metastore

    return Metastore.connect(f"sqlite:///{root / 'metastore.db'}", warehouse=str(root / "wh"))


def build(root: Path, rows: int, txns: int) -> None:
    """Stream the table: ``txns`` committed transactions of ``rows / txns`` rows each."""
    from acidstream import StreamingConnection, StrictDelimitedInputWriter

    ms = _metastore(root)
    ms.execute("CREATE DATABASE bench")
    ms.execute(
        "CREATE TABLE bench.t (id int, msg string) CLUSTERED BY (id) INTO 5 BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    per_txn = rows // txns
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("bench")
        .with_table("t")
        .with_record_writer(writer)
        .connect()
    )
    with conn:
        for t in range(txns):
            ids = np.arange(t * per_txn, (t + 1) * per_txn, dtype=np.int32)
            msg = pa.array(np.char.mod("message number %010d", ids))
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": ids, "msg": msg}))
            conn.commit_transaction()
    ms.close()


def add_deletes(root: Path, percent: float) -> int:
    """Delete ``percent`` of the rows (random ROW__IDs) in one committed txn; returns the number deleted."""
    import pyarrow.fs as pafs

    from acidstream.acid.codec import decode_writer_ids
    from acidstream.acid.names import bucket_file, delete_delta_dir
    from acidstream.acid.orc import AcidWriter, WriterOptions

    ms = _metastore(root)
    table = ms.table(TABLE)
    ids = table.scan(columns=[], with_row_id=True).to_arrow().column("ROW__ID").combine_chunks()
    rng = np.random.default_rng(7)
    chosen = np.sort(rng.choice(len(ids), size=int(len(ids) * percent / 100), replace=False))
    picked = ids.take(pa.array(chosen))
    keys = pa.table(
        {
            "originalTransaction": picked.field("writeid"),
            "bucket": picked.field("bucketid"),
            "rowId": picked.field("rowid"),
        }
    ).sort_by([("originalTransaction", "ascending"), ("bucket", "ascending"), ("rowId", "ascending")])
    txn = ms.open_txns(1)[0]
    [(_, write_id)] = ms.allocate_table_write_ids([txn], TABLE)
    fs = pafs.LocalFileSystem()
    writers = decode_writer_ids(keys.column("bucket").to_numpy())
    for bucket in np.unique(writers):
        part = keys.filter(pa.array(writers == bucket))
        path = f"{table.location}/{delete_delta_dir(write_id, write_id)}/{bucket_file(int(bucket))}"
        writer = AcidWriter(fs, path, table.columns, options=WriterOptions(), side_file=False)
        writer.delete(write_id, part)
        writer.close()
    ms.commit_txn(txn)
    ms.close()
    return len(chosen)


def case(root: Path, name: str) -> dict[str, float]:
    """Run one case in this process: rows, seconds, peak RSS."""
    import pyarrow.orc as po

    ms = _metastore(root)
    scan = ms.table(TABLE).scan()
    files = [f.path for t in scan.plan_files().tasks for f in (*t.insert_files, *t.delete_files)]
    start, cpu = time.perf_counter(), time.process_time()
    rows = 0
    if name == "pyarrow":
        for path in files:
            rows += po.ORCFile(path).read().num_rows
    elif name == "acid":
        for batch in scan.to_batches():
            rows += batch.num_rows
    elif name == "acid_count":
        rows = scan.count()
    else:
        raise ValueError(name)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"rows": rows, "seconds": seconds, "cpu": cpu, "rss_mib": peak_rss_mib()}


def run_cases(
    root: Path, names: list[str], repeat: int, script: str = __file__
) -> dict[str, dict[str, float]]:
    """Each case in a fresh subprocess (``script --case NAME --dir ROOT``), cases interleaved ``repeat`` times
    (so load from other processes hits them alike); per case the fastest run."""
    best: dict[str, dict[str, float]] = {}
    for _ in range(repeat):
        for name in names:
            run = run_script(script, ["--case", name, "--dir", str(root)])
            if name not in best or run["seconds"] < best[name]["seconds"]:
                best[name] = run
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--txns", type=int, default=20)
    parser.add_argument("--delete-pct", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="work directory (kept; default: a temporary one)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case(args.dir, args.case)))
        return
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench_read_"))
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    build(root, args.rows, args.txns)
    print(f"built {args.rows:,} rows in {args.txns} txns in {time.perf_counter() - start:.1f} s ({root})")
    names = ["pyarrow", "acid", "acid_count"]
    results = list(run_cases(root, names, args.repeat).items())
    deleted = add_deletes(root, args.delete_pct)
    print(f"deleted {deleted:,} rows ({args.delete_pct}%)")
    after = run_cases(root, names, args.repeat)
    results += [(f"{name} +{args.delete_pct:g}% deleted", r) for name, r in after.items()]
    print(
        f"\n{platform.processor() or platform.machine()}, Python {platform.python_version()}, best of {args.repeat}\n"
    )
    print(
        "| case | rows out | wall s | CPU s | M rows out/s | vs pyarrow (wall) | vs pyarrow (CPU) | peak RSS MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    base: dict[str, float] = {}
    for name, r in results:
        if name.startswith("pyarrow"):
            base = r
        print(
            f"| {name} | {r['rows']:,.0f} | {r['seconds']:.2f} | {r['cpu']:.2f} | "
            f"{r['rows'] / r['seconds'] / 1e6:.2f} | {base['seconds'] / r['seconds']:.0%} | "
            f"{base['cpu'] / r['cpu']:.0%} | {r['rss_mib']:.0f} |"
        )


if __name__ == "__main__":
    tuned()
    main()
