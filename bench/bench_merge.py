"""Merge by key against deltalake's merge, scans before/after it, and the Spark merge.

The table: ``id bigint, name string, c0..c9 double`` partitioned by ``p`` (``id % 4``) and clustered by id into
8 buckets, N rows loaded in T committed transactions (streaming ``write_batch``); the same rows are appended
to a deltalake table partitioned by ``p`` in T commits. Two change sets keyed by ``id``:

* upsert: 1% of the rows updated (new values for every column) plus 1% new rows — acidstream
  ``Table.merge(source, on=["id"])``, deltalake ``merge(...).when_matched_update_all()
  .when_not_matched_insert_all()``;
* delete: 1% of the rows — ``Table.merge(keys, on=["id"], when_matched="delete", when_not_matched=None)``,
  deltalake ``merge(...).when_matched_delete()``.

Every case runs in its own subprocess (its peak RSS is its own) on a fresh copy of the loaded tables, cases
interleaved ``--repeat`` times (rounds); each case's median is reported, and each ratio is the median of the
per-round ratios. The merges are timed from the call on, both libraries imported before (a process that merges
pays its imports once); their first-call costs in a fresh process are timed (a second merge in the same
process takes about as long). Spark cases (``acidstream.spark.merge``, local[2]) time the merge call after the
same merge into a twin table, :data:`WARM_MERGES` times (JVM start, Python workers and JIT compilation excluded:
a Spark application merging periodically runs warm); their CPU time
and peak RSS are sums over the driver's process tree (JVM, Python workers), the RSS an upper bound. The Python
merge runs a worker per core (``workers=None``), forks of the process's fork server, which the case starts
before the timing as it imports (a process that merges starts it once); its CPU time includes the workers' (and
the server's), its peak RSS is the merging process's (the workers' is not measured). ``acidstream upsert cold`` is the first merge of a process whose server is
not up yet: it merges alone while the server starts. Scans drain
``table.scan().to_batches()`` before and after the change sets. Goals: acidstream merge >= 3x deltalake in wall
time; scan after >= 50% of scan before; Spark merge within 2x of the Python merge. Prints a markdown table.

    python bench/bench_merge.py [--rows 2000000] [--txns 10] [--percent 1] [--repeat 3] [--dir DIR]
    python bench/bench_merge.py --rows 200000 --repeat 1      # a quick run at a tenth of the size
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from _busy import add_busy_option, busy, load_note
from _memory import peak_rss_mib, process_cpu_seconds, tree_cpu_seconds, tree_peak_rss_mib
from _subprocess import run_script
from _tuning import tuned
from bench_compaction import restore, snapshot
from bench_read import TABLE, _metastore

DOUBLES = [f"c{i}" for i in range(10)]
#: The Spark cases first merge into this twin of the table (untimed), this many times: until the JVM's
#: compilers have settled. Methods of Spark's planning, scheduling and Arrow paths keep crossing the C2 threshold
#: for many merges — on 2 cores C2's CPU per merge was 0.1-0.3 s up to the 11th merge and 0.02-0.1 s from about
#: the 20th, and that compiling competes with the Python tasks (docs/benchmarks.md, "Mutation").
WARM_TABLE = "bench.t_warm"
WARM_MERGES = 20
PARTITIONS = 4


def rows_for(ids: np.ndarray, seed: int) -> pa.Table:
    """Rows with these ids: a name, ten doubles, and their partition ``p = id % 4``."""
    rng = np.random.default_rng(seed)
    values = rng.random((len(DOUBLES), len(ids)))
    columns: dict[str, Any] = {"id": pa.array(ids, pa.int64()), "name": pa.array(np.char.mod("name-%d", ids))}
    columns.update({c: values[i] for i, c in enumerate(DOUBLES)})
    columns["p"] = pa.array(ids % PARTITIONS, pa.int32())
    return pa.table(columns)


def create_table(ms: Any, name: str) -> None:
    columns = ", ".join(["id bigint", "name string", *(f"{c} double" for c in DOUBLES)])
    ms.execute(
        f"CREATE TABLE {name} ({columns}) PARTITIONED BY (p int) CLUSTERED BY (id) INTO 8 BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )


def load(ms: Any, name: str, per_txn: int, txns: int) -> None:
    """``txns`` committed streaming transactions of ``per_txn`` rows (ids in order)."""
    from acidstream import StreamingConnection, StrictDelimitedInputWriter

    db, table = name.split(".")
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database(db)
        .with_table(table)
        .with_record_writer(StrictDelimitedInputWriter.builder().build())  # unused: write_batch takes Arrow
        .connect()
    )
    with conn:
        for t in range(txns):
            conn.begin_transaction()
            conn.write_batch(rows_for(np.arange(t * per_txn, (t + 1) * per_txn), t))
            conn.commit_transaction()


def build(root: Path, rows: int, txns: int, percent: float) -> None:
    """Load both tables in ``txns`` commits; write the change sets as parquet."""
    from deltalake import write_deltalake

    ms = _metastore(root)
    ms.execute("CREATE DATABASE bench")
    per_txn = rows // txns
    for name in (TABLE, WARM_TABLE):
        create_table(ms, name)
        load(ms, name, per_txn, txns)
    ms.close()
    for t in range(txns):
        ids = np.arange(t * per_txn, (t + 1) * per_txn)
        write_deltalake(root / "delta", rows_for(ids, t), mode="append", partition_by=["p"])

    loaded = per_txn * txns
    changed = int(loaded * percent / 100)
    rng = np.random.default_rng(42)
    updated = np.sort(rng.choice(loaded, changed, replace=False))
    upsert = pa.concat_tables([rows_for(updated, 1000), rows_for(np.arange(loaded, loaded + changed), 1001)])
    pq.write_table(upsert, root / "upsert.parquet")
    deleted = np.sort(rng.choice(loaded, changed, replace=False))
    pq.write_table(pa.table({"id": pa.array(deleted, pa.int64())}), root / "delete.parquet")


def save_delta(root: Path) -> None:
    shutil.copytree(root / "delta", root / "saved" / "delta")


def _warm_location(root: Path) -> Path:
    ms = _metastore(root)
    try:
        return Path(ms.table(WARM_TABLE).location)
    finally:
        ms.close()


def save_warm(root: Path) -> None:
    """Keep the twin's files: restoring the metastore rewinds its write ids too."""
    shutil.copytree(_warm_location(root), root / "saved" / "warm")


def restore_warm(root: Path) -> None:
    location = _warm_location(root)
    shutil.rmtree(location)
    shutil.copytree(root / "saved" / "warm", location)


def restore_delta(root: Path) -> None:
    shutil.rmtree(root / "delta")
    shutil.copytree(root / "saved" / "delta", root / "delta")


def acid_merge(ms: Any, kind: str, source: pa.Table) -> dict[str, int]:
    table = ms.table(TABLE)
    if kind == "upsert":
        return dict(table.merge(source, on=["id"]))
    return dict(table.merge(source, on=["id"], when_matched="delete", when_not_matched=None))


def apply_changes(root: Path, kinds: list[str]) -> None:
    ms = _metastore(root)
    for kind in kinds:
        acid_merge(ms, kind, pq.read_table(root / f"{kind}.parquet"))
    ms.close()


def delta_merge(root: Path, kind: str, source: pa.Table) -> dict[str, int]:
    from deltalake import DeltaTable

    merger = DeltaTable(str(root / "delta")).merge(
        source, predicate="t.id = s.id", source_alias="s", target_alias="t"
    )
    if kind == "upsert":
        merger = merger.when_matched_update_all().when_not_matched_insert_all()
    else:
        merger = merger.when_matched_delete()
    metrics = merger.execute()
    return {
        "inserted": metrics["num_target_rows_inserted"],
        "updated": metrics["num_target_rows_updated"],
        "deleted": metrics["num_target_rows_deleted"],
    }


def spark_merge(root: Path, kind: str) -> tuple[float, float, dict[str, int]]:
    """(seconds, CPU seconds of the driver's process tree, counts) of the Spark merge, after the same merge into
    a twin table restored before each of :data:`WARM_MERGES` (JVM start, Python workers and the JIT-compiled code
    paths of a merge this size)."""
    from acidstream import spark as acid

    session = acid.session("bench-merge", master="local[2]")
    location: dict[str, Any] = {
        "metastore": f"sqlite:///{root / 'metastore.db'}",
        "warehouse": str(root / "wh"),
    }
    source = session.read.parquet(str(root / f"{kind}.parquet"))
    kwargs: dict[str, Any] = {} if kind == "upsert" else {"when_matched": "delete", "when_not_matched": None}
    for _ in range(WARM_MERGES):
        restore_warm(root)  # its files only: each warm merge does the timed merge's work
        acid.merge(session, WARM_TABLE, source, on=["id"], **kwargs, **location)
    start, cpu = time.perf_counter(), tree_cpu_seconds()
    counts = acid.merge(session, TABLE, source, on=["id"], **kwargs, **location)
    return time.perf_counter() - start, tree_cpu_seconds() - cpu, counts


def scan(ms: Any) -> int:
    rows = 0
    for batch in ms.table(TABLE).scan().to_batches():
        rows += batch.num_rows
    return rows


def case(root: Path, name: str) -> dict[str, Any]:
    """Run one case in this process on a fresh copy of the tables: rows, seconds, CPU seconds, peak RSS."""
    engine, _, kind = name.partition(" ")
    restore(root)
    if engine == "deltalake":
        import deltalake  # noqa: F401  # imported before the timing, as acidstream's merge code is

        restore_delta(root)
        source = pq.read_table(root / f"{kind}.parquet")
        start, cpu = time.perf_counter(), time.process_time()
        counts = delta_merge(root, kind, source)
    elif engine == "spark":
        seconds, cpu_seconds, counts = spark_merge(root, kind)
        return {"seconds": seconds, "cpu": cpu_seconds, "rss_mib": tree_peak_rss_mib(), **counts}
    elif engine == "acidstream":
        import acidstream.mutate.merge  # noqa: F401  # imported before the timing, as deltalake is
        from acidstream.mutate.forkserver import fork_server

        warm = not kind.endswith(" cold")
        if warm:
            fork_server().ready(wait=True)  # before the timing too: a process starts it once
        kind = kind.removesuffix(" cold")
        ms = _metastore(root)
        source = pq.read_table(root / f"{kind}.parquet")
        workers = process_cpu_seconds(fork_server().pid) if warm else 0.0
        start, cpu = time.perf_counter(), time.process_time()
        counts = acid_merge(ms, kind, source)
        seconds = time.perf_counter() - start
        cpu = (
            time.process_time() - cpu + process_cpu_seconds(fork_server().pid) - workers
        )  # with the workers'
        rss = peak_rss_mib()
        return {"seconds": seconds, "cpu": cpu, "rss_mib": rss, **counts}
    elif engine == "scan":
        if kind != "before":  # in a child process: the merges' memory is not the scan's
            child = multiprocessing.get_context("fork").Process(
                target=apply_changes, args=(root, kind.split("+"))
            )
            child.start()
            child.join()
            assert child.exitcode == 0, f"applying {kind} failed"
        ms = _metastore(root)
        start, cpu = time.perf_counter(), time.process_time()
        counts = {"rows": scan(ms)}
    else:
        raise ValueError(name)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu": cpu, "rss_mib": peak_rss_mib(), **counts}


CASES = {
    "acidstream upsert": "deltalake upsert",
    "acidstream upsert cold": "acidstream upsert",
    "deltalake upsert": None,
    "spark upsert": "acidstream upsert",
    "acidstream delete": "deltalake delete",
    "deltalake delete": None,
    "spark delete": "acidstream delete",
    "scan before": None,
    "scan upsert": "scan before",
    "scan upsert+delete": "scan before",
}


def run_rounds(root: Path, names: list[str], rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Each case in a fresh subprocess (``--case NAME``), all cases once per round, ``rounds`` rounds; odd rounds
    run the cases in reverse order, so neither side of a ratio always runs first."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            runs[name].append(run_script(__file__, ["--case", name, "--dir", str(root)]))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--txns", type=int, default=10)
    parser.add_argument("--percent", type=float, default=1.0, help="rows updated, inserted and deleted, each")
    parser.add_argument("--repeat", type=int, default=3, help="rounds")
    parser.add_argument("--cases", help="comma list of cases to run (default: all)")
    parser.add_argument("--dir", type=Path, help="work directory (kept; default: a temporary one)")
    add_busy_option(parser)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case(args.dir, args.case)))
        return
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench_merge_"))
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    build(root, args.rows, args.txns, args.percent)
    snapshot(root)
    save_delta(root)
    save_warm(root)
    print(
        f"built {args.rows:,} rows in {args.txns} txns, both tables, in {time.perf_counter() - start:.1f} s ({root})"
    )
    names = args.cases.split(",") if args.cases else list(CASES)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = load_note(args.busy)
    with busy(args.busy):
        runs = run_rounds(root, names, args.repeat)
        load1 = load_note(args.busy)
    print(
        f"\n{args.rows:,} rows in {args.txns} txns, {args.percent:g}% changes; {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, started {started}; at the start "
        f"{load0}; at the end {load1}; medians of {args.repeat} rounds\n"
    )
    print("| case | rows (ins/upd/del or scanned) | wall s | CPU s | peak RSS MiB | compared with | ratio |")
    print("|---|---|---:|---:|---:|---|---:|")
    for name in names:
        mine, ref = runs[name], CASES[name]
        r = mine[0]
        counts = f"{r['rows']:,}" if "rows" in r else f"{r['inserted']:,}/{r['updated']:,}/{r['deleted']:,}"
        ratio = ""
        if ref in runs:
            ratios = [b["seconds"] / a["seconds"] for a, b in zip(mine, runs[ref], strict=True)]
            ratio = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        print(
            f"| {name} | {counts} | {statistics.median(x['seconds'] for x in mine):.2f} | "
            f"{statistics.median(x['cpu'] for x in mine):.2f} | {max(x['rss_mib'] for x in mine):.0f} | "
            f"{ref if ref in runs else ''} | {ratio} |"
        )


if __name__ == "__main__":
    tuned()
    main()
