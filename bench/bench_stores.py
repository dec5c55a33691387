"""The same jobs on a local disk, on S3 (moto's server on loopback, in a child process) and on HDFS (Hadoop's
MiniDFSCluster, ``scripts/hdfs.sh``), beside the nearest peer on the same store, with the requests each commit
costs.

Jobs, each on each store:

* ``streaming``: N records (``id int, msg string``, 5 buckets) in T txns of ``write_batch`` (Arrow) against
  deltalake ``write_deltalake(mode="append")`` of the same batches, T commits;
* ``merge``: a table of M rows (bench_merge's: 12 columns, 4 partitions, 8 buckets) loaded in 10 txns, then
  ``Table.merge`` of 1% updated plus 1% new rows against deltalake's merge of the same rows into the same
  table (``when_matched_update_all().when_not_matched_insert_all()``);
* ``compaction``: a major compaction of the streaming job's table (T deltas) against pyarrow reading the same
  insert files and writing their rows as plain ORC, one file per bucket, on the same store (no ACID logic).

The S3 server counts the requests it serves by kind (``bench/_s3server.py``). On HDFS, proxies in front of the
NameNode count (``bench/_hdfsproxy.py``): acidstream's WebHDFS requests by operation, with the DataNode requests
a CREATE, APPEND or OPEN is redirected to (``DN``), and deltalake's Hadoop RPC calls to the NameNode by method
(its native client streams block data to the DataNode, uncounted). Each commit is counted from its txn's start
to its end, so a request per commit costs the peer as much as acidstream (about a millisecond: both are timed
with it). The goal: a commit costs O(files it writes) requests, never O(files in the table),
shown by the streaming commits' requests early (the first tenth of the txns) against late (the last tenth),
when the table holds ten times the files. Each job runs ``--rounds`` times (3) on fresh tables, acidstream's
side first in even rounds and the peer's in odd ones; the table gives each side's median seconds with their
min-max, the median ratio (the peer's time over acidstream's, per round; above 1: acidstream faster) with its
min-max, the load average before and after the rounds, and the last round's requests by kind for both sides
(counts do not depend on the load). Prints a markdown table; ``--json`` writes the figures too.

    python bench/bench_stores.py [--records 1000000] [--txns 100] [--merge-rows 2000000] [--rounds 3]
                                 [--stores local,s3,hdfs]
    python bench/bench_stores.py --records 100000 --merge-rows 200000 --rounds 1   # a quick run at a tenth
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
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from _hdfsproxy import HdfsCluster, hdfs_cluster
from _s3server import S3Server, s3_server
from _tuning import tuned
from bench_merge import create_table, load, rows_for

BUCKET = "bench"
STREAMED, MERGED = "bench.streamed", "bench.merged"


class Store:
    """Where one run's tables live, and the requests they cost there (none counted on a local disk). On HDFS,
    ``server`` is the cluster's counting proxy (an :class:`S3Server` in what it counts)."""

    def __init__(self, name: str, root: Path, server: S3Server | None) -> None:
        self.name, self.root, self.server = name, root, server
        run = uuid.uuid4().hex[:8]
        if server is None:
            self.base = str(root)
        else:
            self.base = f"{server.uri}/{run}" if isinstance(server, HdfsCluster) else f"s3://{BUCKET}/{run}"
        self.delta_options = None if server is None else server.storage_options()

    def location(self, name: str) -> str:
        return f"{self.base}/{name}"

    @contextmanager
    def counted(self) -> Iterator[Counter[str]]:
        if self.server is None:
            yield Counter()
        else:
            with self.server.counted() as spent:
                yield spent

    def metastore(self) -> Any:
        from acidstream import Metastore

        return Metastore.connect(f"sqlite:///{self.root / 'metastore.db'}", warehouse=self.location("wh"))

    def objects(self, location: str) -> int:
        """Files under ``location`` (uncounted listing of the table, for the report)."""
        import pyarrow.fs as pafs

        from acidstream.storage import table_filesystem

        fs, path = table_filesystem(location)
        return sum(
            1
            for i in fs.get_file_info(pafs.FileSelector(path, recursive=True))
            if i.type == pafs.FileType.File
        )


def _streaming_rows(n: int, txns: int) -> Callable[[int], pa.Table]:
    ids = np.arange(n, dtype=np.int32)
    msgs = pa.array([f"message number {i:08d}" for i in range(n)])
    per = n // txns
    return lambda t: pa.table({"id": ids[t * per : (t + 1) * per], "msg": msgs[t * per : (t + 1) * per]})


def _connect(ms: Any, table: str) -> Any:
    from acidstream import StreamingConnection, StrictDelimitedInputWriter

    db, name = table.split(".")
    writer = StrictDelimitedInputWriter.builder().build()  # unused: write_batch takes Arrow
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database(db)
        .with_table(name)
        .with_record_writer(writer)
        .connect()
    )


def streaming(store: Store, n: int, txns: int, acid_first: bool) -> dict[str, Any]:
    """Both libraries' T commits (after one untimed warm-up commit each): seconds and requests per commit."""
    from deltalake import write_deltalake

    batch = _streaming_rows(n, txns)
    ms = store.metastore()
    ms.execute("CREATE DATABASE IF NOT EXISTS bench")
    for name in (STREAMED, "bench.warmup"):
        ms.execute(
            f"CREATE TABLE {name} (id int, msg string) CLUSTERED BY (id) INTO 5 BUCKETS "
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
    with _connect(ms, "bench.warmup") as warm, warm.transaction():
        warm.write_batch(batch(0))
    write_deltalake(store.location("delta-warmup"), batch(0), storage_options=store.delta_options)
    target = store.location("delta-streamed")

    def ours() -> tuple[float, list[Counter[str]]]:
        acid: list[Counter[str]] = []
        conn = _connect(ms, STREAMED)
        start = time.perf_counter()
        for t in range(txns):
            with store.counted() as spent:
                conn.begin_transaction()
                conn.write_batch(batch(t))
                conn.commit_transaction()
            acid.append(spent)
        conn.close()
        return time.perf_counter() - start, acid

    def theirs() -> tuple[float, list[Counter[str]]]:
        delta: list[Counter[str]] = []
        start = time.perf_counter()
        for t in range(txns):
            with store.counted() as spent:
                write_deltalake(target, batch(t), mode="append", storage_options=store.delta_options)
            delta.append(spent)
        return time.perf_counter() - start, delta

    (acid_s, acid), (delta_s, delta) = _in_order(ours, theirs, acid_first)
    ms.close()
    return {
        "acidstream_s": acid_s,
        "peer_s": delta_s,
        "acidstream_requests": _early_late(acid),
        "peer_requests": _early_late(delta),
        "acidstream_files": store.objects(_table_location(store, STREAMED)),
        "peer_files": store.objects(target),
    }


T = TypeVar("T")
U = TypeVar("U")


def _in_order(ours: Callable[[], T], theirs: Callable[[], U], acid_first: bool) -> tuple[T, U]:
    """Both sides' timed parts, acidstream's first or the peer's (rounds alternate: neither side always meets
    the store, the page cache or the machine's load first)."""
    if acid_first:
        mine = ours()
        return mine, theirs()
    other = theirs()
    return ours(), other


def _early_late(per_commit: list[Counter[str]]) -> dict[str, dict[str, float]]:
    """Mean requests per commit by kind over the first and the last tenth of the commits."""
    tenth = max(1, len(per_commit) // 10)

    def mean(commits: list[Counter[str]]) -> dict[str, float]:
        kinds = sorted(set().union(*commits))
        return {k: sum(c[k] for c in commits) / len(commits) for k in kinds}

    return {"early": mean(per_commit[:tenth]), "late": mean(per_commit[-tenth:])}


def _table_location(store: Store, table: str) -> str:
    ms = store.metastore()
    try:
        return str(ms.table(table).location)
    finally:
        ms.close()


def merge(store: Store, rows: int, acid_first: bool) -> dict[str, Any]:
    """Load both tables (untimed), then each library's upsert of 1% updated and 1% new rows."""
    from deltalake import DeltaTable, write_deltalake

    from acidstream.mutate.forkserver import fork_server

    txns = 10
    per_txn = rows // txns
    ms = store.metastore()
    ms.execute("CREATE DATABASE IF NOT EXISTS bench")
    create_table(ms, MERGED)
    load(ms, MERGED, per_txn, txns)
    target = store.location("delta-merged")
    for t in range(txns):
        ids = np.arange(t * per_txn, (t + 1) * per_txn)
        write_deltalake(
            target, rows_for(ids, t), mode="append", partition_by=["p"], storage_options=store.delta_options
        )
    loaded = per_txn * txns
    changed = loaded // 100
    updated = np.sort(np.random.default_rng(42).choice(loaded, changed, replace=False))
    source = pa.concat_tables([rows_for(updated, 1000), rows_for(np.arange(loaded, loaded + changed), 1001)])

    fork_server().ready(wait=True)  # a process that merges starts its workers' server once

    def ours() -> tuple[float, Counter[str]]:
        start = time.perf_counter()
        with store.counted() as acid:
            counts = ms.table(MERGED).merge(source, on=["id"])
        took = time.perf_counter() - start
        assert (counts["inserted"], counts["updated"]) == (changed, changed), counts
        return took, acid

    def theirs() -> tuple[float, Counter[str]]:
        start = time.perf_counter()
        with store.counted() as delta:
            metrics = (
                DeltaTable(target, storage_options=store.delta_options)
                .merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        took = time.perf_counter() - start
        assert metrics["num_target_rows_updated"] == changed, metrics
        return took, delta

    (acid_s, acid), (delta_s, delta) = _in_order(ours, theirs, acid_first)
    ms.close()
    return {
        "acidstream_s": acid_s,
        "peer_s": delta_s,
        "acidstream_requests": dict(acid),
        "peer_requests": dict(delta),
        "acidstream_files": store.objects(_table_location(store, MERGED)),
        "peer_files": store.objects(target),
    }


def compaction(store: Store, acid_first: bool) -> dict[str, Any]:
    """pyarrow's plain copy of the streamed table's insert files, then the major compaction of that table."""
    import pyarrow.orc as po

    from acidstream.compactor import Compactor, CompactorConfig
    from acidstream.storage import table_filesystem

    config = CompactorConfig(retention=0)
    ms = store.metastore()
    scan = ms.table(STREAMED).scan()
    plan = scan.plan_files()
    scan.close()
    fs, out = table_filesystem(store.location("raw"))

    def copy(task: Any) -> int:
        tables = []
        for f in task.insert_files:
            with fs.open_input_file(f.path) as source:
                tables.append(po.ORCFile(source).read(columns=["row"]))
        flat = pa.concat_tables(tables).column("row").combine_chunks().flatten()
        plain = pa.table(flat, names=["id", "msg"])
        with fs.open_output_stream(f"{out}/bucket_{task.bucket_id:05d}") as sink:
            po.write_table(plain, sink, compression="zlib")
        return plain.num_rows

    if store.server is None:
        Path(out).mkdir(parents=True, exist_ok=True)

    def theirs() -> tuple[float, int, Counter[str]]:
        start = time.perf_counter()
        with store.counted() as raw, ThreadPoolExecutor(config.parallelism) as pool:
            raw_rows = sum(pool.map(copy, plan.tasks))
        return time.perf_counter() - start, raw_rows, raw

    def ours() -> tuple[float, Any, Counter[str]]:
        start = time.perf_counter()
        with store.counted() as acid:
            outcome = Compactor(ms, config).compact(STREAMED, kind="major")
        return time.perf_counter() - start, outcome, acid

    (acid_s, outcome, acid), (raw_s, raw_rows, raw) = _in_order(ours, theirs, acid_first)
    assert outcome.info.state == "ready for cleaning", outcome.info
    rows = sum(r.events_read for r in outcome.results)
    ms.close()
    assert rows == raw_rows, (rows, raw_rows)
    return {
        "acidstream_s": acid_s,
        "peer_s": raw_s,
        "rows": rows,
        "files_read": sum(len(t.insert_files) for t in plan.tasks),
        "acidstream_requests": dict(acid),
        "peer_requests": dict(raw),
    }


JOBS = ("streaming", "merge", "compaction")


def run(store: Store, args: argparse.Namespace, acid_first: bool) -> dict[str, Any]:
    """One round of every job on ``store``, with the load average before and after it."""
    before = os.getloadavg()[0]
    jobs = {
        "streaming": lambda: streaming(store, args.records, args.txns, acid_first),
        "merge": lambda: merge(store, args.merge_rows, acid_first),
        "compaction": lambda: compaction(store, acid_first),
    }
    out: dict[str, Any] = {job: jobs[job]() for job in args.jobs}
    out["load"] = (before, os.getloadavg()[0])
    out["acidstream_first"] = acid_first
    return out


def _requests(counts: dict[str, float]) -> str:
    total = sum(counts.values())
    parts = " ".join(f"{k} {v:g}" for k, v in counts.items())
    return f"{total:g} ({parts})" if total else ""


def _progress(store: str, i: int, result: dict[str, Any]) -> None:
    """One line per job as each round ends (a long run's rounds so far survive its interruption)."""
    first = "acidstream" if result["acidstream_first"] else "peer"
    for job in (j for j in JOBS if j in result):
        r = result[job]
        print(
            f"round {i + 1} {store} {job} ({first} first, load {result['load'][0]:.1f}-{result['load'][1]:.1f}): "
            f"acidstream {r['acidstream_s']:.2f} s, peer {r['peer_s']:.2f} s, "
            f"ratio {r['peer_s'] / r['acidstream_s']:.2f}",
            flush=True,
        )


def _spread(values: list[float], fmt: str) -> str:
    """Median, then min-max when there is more than one value."""
    med = format(statistics.median(values), fmt)
    return med if len(values) == 1 else f"{med} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def report(results: dict[str, list[dict[str, Any]]]) -> None:
    """Per job and store: median (min-max) seconds of each side over the rounds, the ratio's, the load, and
    the requests by kind of the last round (a count does not depend on the machine's load)."""
    peers = {"streaming": "deltalake append", "merge": "deltalake merge", "compaction": "pyarrow ORC copy"}
    print(
        "| job | store | acidstream s | peer | peer s | ratio | load | acidstream requests | peer requests |"
    )
    print("|---|---|---:|---|---:|---:|---:|---|---|")
    for job in JOBS:
        for store, rounds in results.items():
            if job not in rounds[0]:
                continue
            runs = [r[job] for r in rounds]
            ratios = [r["peer_s"] / r["acidstream_s"] for r in runs]
            loads = [x for r in rounds for x in r["load"]]
            last = runs[-1]
            if job == "streaming":
                ours = "per commit, early → late: " + " → ".join(
                    _requests(last["acidstream_requests"][w]) for w in ("early", "late")
                )
                theirs = " → ".join(_requests(last["peer_requests"][w]) for w in ("early", "late"))
            else:
                ours, theirs = _requests(last["acidstream_requests"]), _requests(last["peer_requests"])
            print(
                f"| {job} | {store} | {_spread([r['acidstream_s'] for r in runs], '.2f')} | {peers[job]} | "
                f"{_spread([r['peer_s'] for r in runs], '.2f')} | {_spread(ratios, '.2f')}x | "
                f"{min(loads):.1f}-{max(loads):.1f} | {ours} | {theirs} |"
            )
    for store, rounds in results.items():
        last = rounds[-1]
        parts = []
        if "streaming" in last:
            parts.append(
                f"streamed table {last['streaming']['acidstream_files']} files at the end "
                f"(deltalake's {last['streaming']['peer_files']})"
            )
        if "merge" in last:
            parts.append(
                f"merged table {last['merge']['acidstream_files']} files after the merge (deltalake's "
                f"{last['merge']['peer_files']})"
            )
        if "compaction" in last:
            parts.append(
                f"the compaction read {last['compaction']['files_read']} files, "
                f"{last['compaction']['rows']:,} rows"
            )
        print(f"\n{store}: " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="streamed records")
    parser.add_argument("--txns", type=int, default=100, help="streaming txns (and deltalake commits)")
    parser.add_argument("--merge-rows", type=int, default=2_000_000)
    parser.add_argument("--stores", default="local,s3", help="comma list of local, s3, hdfs")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, acidstream first in even ones")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--jobs",
        default=",".join(JOBS),
        help="comma list of streaming, merge, compaction (the compaction's table is the streaming job's)",
    )
    args = parser.parse_args()
    args.jobs = [j for j in JOBS if j in args.jobs.split(",")]
    if "compaction" in args.jobs and "streaming" not in args.jobs:
        parser.error("--jobs compaction compacts the streaming job's table: add streaming")
    stores = args.stores.split(",")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in stores}
    with ExitStack() as started_stores:  # first: merge workers fork from a server that inherits the settings
        servers: dict[str, S3Server | None] = {
            "local": None,
            **({"s3": started_stores.enter_context(s3_server(BUCKET))} if "s3" in stores else {}),
            **({"hdfs": started_stores.enter_context(hdfs_cluster())} if "hdfs" in stores else {}),
        }
        for i in range(args.rounds):
            for name in stores:
                root = Path(tempfile.mkdtemp(prefix=f"bench_stores_{name}_"))
                try:
                    store = Store(name, root, servers[name])
                    results[name].append(run(store, args, acid_first=i % 2 == 0))
                    _progress(name, i, results[name][-1])
                finally:
                    shutil.rmtree(root, ignore_errors=True)
    import deltalake
    import pyarrow

    print(
        f"\n{args.records:,} records in {args.txns} txns; merge into {args.merge_rows:,} rows; "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, pyarrow "
        f"{pyarrow.__version__}, deltalake {deltalake.__version__}, started {started}, load average "
        f"{os.getloadavg()[0]:.1f} at the end; {args.rounds} round(s), peer order alternated; S3: moto on loopback; HDFS: MiniDFSCluster "
        "on loopback, acidstream and pyarrow through WebHDFS, deltalake through its native client\n"
    )
    report(results)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"started": started, "args": vars(args) | {"json": str(args.json)}, "results": results},
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    tuned()
    main()
