"""The Spark merge and the Spark compaction on a Spark standalone cluster on loopback: one worker of 2 cores
against two workers of 1 core (the same cores; each worker an executor JVM with its Python workers, on a
loopback host of its own), at two table sizes, with how the work divides between the driver and the executors.

The table is ``bench_merge.py``'s (``id bigint, name string, c0..c9 double``, partitioned by ``p = id % 4``,
clustered by id into 8 buckets), grown as streaming tables grow: ``--rows-per-txn`` rows a transaction, so the
larger table has as many more files as rows (32 bucket files a transaction). Each case is one Spark application
(a driver process of its own, on a fresh copy of the table), which first runs ``--warm`` merges and one major
compaction of a small twin table (executors, Python workers and the JVMs' compilers warmed), then times:

* **merge**: ``acidstream.spark.merge`` of 1% updated rows (every column new) plus 1% new rows, keyed by id;
* **compaction**: ``acidstream.spark.compact(..., "major")`` of the table the merge left (every partition).

For each: wall time; the driver's share (the wall time outside Spark jobs, from the job timeline of Spark's REST
API: planning before the first job, the commit after the last); the jobs' tasks (count, run time, the bytes of
the table's files each reads, from the files and the merge's own bucket-to-task plan); CPU of the driver's Python
process, of its JVM and of the executors (the workers' process trees: executor JVMs and their Python workers);
and the peak RSS of the driver's Python process and of its JVM during the operation (each reset before it,
``/proc/<pid>/clear_refs``), which must not grow with the table. Rounds alternate the order of the
configurations and of the sizes; figures are medians over rounds (ranges in brackets), ratios medians of the
per-round ratios. Prints markdown tables.

    python bench/bench_spark_cluster.py [--sizes 1000000,4000000] [--rows-per-txn 100000] [--repeat 3]
    python bench/bench_spark_cluster.py --sizes 200000,400000 --repeat 1       # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from _busy import add_busy_option, busy, load_note
from _memory import tree_cpu_seconds
from _sparkcluster import Cluster, free_port, standalone
from _tuning import tuned
from bench_compaction import restore, snapshot
from bench_merge import WARM_TABLE, create_table, load, restore_warm, rows_for, save_warm
from bench_read import TABLE, _metastore

#: The warm-up twin's rows (2 transactions) and the configurations: (workers, cores each).
WARM_ROWS = 100_000
CONFIGS = ((1, 2), (2, 1))
BUCKET_FILE = re.compile(r"bucket_(\d+)$")
#: Seconds Spark's listener has to report every job of an operation finished, and the executors to register.
REST_DEADLINE = 60.0
#: Each case's figures, a JSON object a line, in the work directory (``--report`` prints them again).
RESULTS = "cases.jsonl"
EXECUTOR_DEADLINE = 180.0


def build(root: Path, rows: int, per_txn: int, percent: float) -> None:
    """The table (``rows`` in ``rows / per_txn`` commits), its twin, and both change sets as parquet."""
    ms = _metastore(root)
    ms.execute("CREATE DATABASE bench")
    create_table(ms, TABLE)
    load(ms, TABLE, per_txn, rows // per_txn)
    create_table(ms, WARM_TABLE)
    load(ms, WARM_TABLE, WARM_ROWS // 2, 2)
    ms.close()
    for name, loaded in (("upsert", rows // per_txn * per_txn), ("warm", WARM_ROWS)):
        changed = int(loaded * percent / 100)
        rng = np.random.default_rng(42)
        updated = np.sort(rng.choice(loaded, changed, replace=False))
        new = np.arange(loaded, loaded + changed)
        pq.write_table(
            pa.concat_tables([rows_for(updated, 1000), rows_for(new, 1001)]), root / f"{name}.parquet"
        )


def file_bytes(location: Path) -> dict[tuple[str, int], int]:
    """Bytes of the table's bucket files by (partition directory, bucket)."""
    sizes: dict[tuple[str, int], int] = {}
    for folder, _, names in os.walk(location):
        for name in names:
            found = BUCKET_FILE.match(name)
            if found:
                key = (Path(folder).parent.name, int(found.group(1)))
                sizes[key] = sizes.get(key, 0) + os.path.getsize(os.path.join(folder, name))
    return sizes


def merge_task_bytes(location: Path, parallelism: int) -> list[int]:
    """Bytes of table files each merge task reads: the merge's own spread of buckets over tasks."""
    from acidstream.spark.mutate.by_bucket import bucket_tasks

    by_bucket: dict[int, int] = {}
    for (_, bucket), size in file_bytes(location).items():
        by_bucket[bucket] = by_bucket.get(bucket, 0) + size
    task_of = bucket_tasks(by_bucket, 8, parallelism)
    return [sum(s for b, s in by_bucket.items() if task_of[b] == t) for t in range(max(task_of) + 1)]


# --- the driver: one Spark application per case ---------------------------------------------------------------


def _rest(ui: str, path: str) -> Any:
    with urllib.request.urlopen(f"{ui}/api/v1/{path}", timeout=30) as answer:
        return json.load(answer)


def _when(stamp: str) -> float:
    """A REST API date (``2026-11-28T19:10:00.123GMT``) as seconds since the epoch."""
    return datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def _rss_mib(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _union_seconds(spans: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


class Measured:
    """One operation's clocks, CPU, peaks and Spark jobs (all jobs of its job group)."""

    def __init__(self, spark: Any, group: str, worker_pids: Sequence[int]) -> None:
        self.spark, self.group, self.workers = spark, group, worker_pids
        self.jvm = spark.sparkContext._gateway.proc.pid

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        for pid in (os.getpid(), self.jvm):
            with open(f"/proc/{pid}/clear_refs", "w") as refs:
                refs.write("5")  # resets the peak RSS (VmHWM) to the current RSS
        self.base = {"py": _rss_mib(os.getpid(), "VmRSS"), "jvm": _rss_mib(self.jvm, "VmRSS")}
        self.spark.sparkContext.setJobGroup(self.group, self.group)
        executors = sum(tree_cpu_seconds(p) for p in self.workers)
        driver, python = tree_cpu_seconds(), time.process_time()
        self.start, wall = time.time(), time.perf_counter()
        yield
        self.wall = time.perf_counter() - wall
        self.end = self.start + self.wall
        self.cpu = {
            "py": time.process_time() - python,
            "jvm": tree_cpu_seconds() - driver - (time.process_time() - python),
            "executors": sum(tree_cpu_seconds(p) for p in self.workers) - executors,
        }
        self.peak = {"py": _rss_mib(os.getpid(), "VmHWM"), "jvm": _rss_mib(self.jvm, "VmHWM")}

    def report(self, task_bytes: list[int]) -> dict[str, Any]:
        """The figures, with the job timeline from the REST API (waiting for the listener to catch up)."""
        sc = self.spark.sparkContext
        ui, app = sc.uiWebUrl, sc.applicationId
        deadline = time.monotonic() + REST_DEADLINE
        while True:
            jobs = [j for j in _rest(ui, f"applications/{app}/jobs") if j.get("jobGroup") == self.group]
            if all("completionTime" in j for j in jobs) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        spans = [
            (_when(j["submissionTime"]), _when(j["completionTime"])) for j in jobs if "completionTime" in j
        ]
        stage_ids = {s for j in jobs for s in j["stageIds"]}
        tasks: list[dict[str, Any]] = []
        for stage in _rest(ui, f"applications/{app}/stages"):
            if stage["stageId"] not in stage_ids or stage["status"] != "COMPLETE":
                continue
            listed = _rest(
                ui,
                f"applications/{app}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=100000",
            )
            tasks.extend({**t, "stageId": stage["stageId"]} for t in listed)
        first_launch = {  # per job: its submission to its first task's launch (the driver planning the job)
            j["jobId"]: min(
                (_when(t["launchTime"]) for t in tasks if t.get("stageId") in j["stageIds"]), default=None
            )
            for j in jobs
        }
        metrics = [t["taskMetrics"] for t in tasks]
        in_jobs = _union_seconds(spans)
        return {
            "wall": self.wall,
            "driver_only": self.wall - in_jobs,
            "before_jobs": (min(a for a, _ in spans) - self.start) if spans else self.wall,
            "after_jobs": (self.end - max(b for _, b in spans)) if spans else 0.0,
            "job_to_task": sum(
                f - _when(j["submissionTime"]) for j in jobs if (f := first_launch[j["jobId"]]) is not None
            ),
            "jobs": len(jobs),
            "stages": len(stage_ids),
            "tasks": len(tasks),
            "task_run": [m["executorRunTime"] / 1000 for m in metrics],
            "task_deserialize": [m["executorDeserializeTime"] / 1000 for m in metrics],
            "scheduler_delay": [t.get("schedulerDelay", 0) / 1000 for t in tasks],
            "result_bytes": sum(m["resultSize"] for m in metrics),
            "shuffle_bytes": sum(m["shuffleWriteMetrics"]["bytesWritten"] for m in metrics),
            "executors": sorted({t["executorId"] for t in tasks}),
            "task_bytes": task_bytes,
            "cpu": self.cpu,
            "base_mib": self.base,
            "peak_mib": self.peak,
        }


def plan_files(location: dict[str, str]) -> dict[str, float]:
    """What the merge's driver plans before its job, on its own: the files of the table's snapshot listed into
    bucket tasks (seconds, files, and the plan's pickled bytes, which go to the executors with the job)."""
    from acidstream import Metastore

    ms = Metastore.connect(location["metastore"], warehouse=location["warehouse"])
    try:
        start = time.perf_counter()
        plan = ms.table(TABLE).scan(columns=["id"], with_row_id=True).plan_files()
        seconds = time.perf_counter() - start
    finally:
        ms.close()
    files = sum(len(t.insert_files) + len(t.delete_files) for t in plan.tasks)
    return {"seconds": seconds, "files": files, "pickled": len(pickle.dumps(plan.tasks))}


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    """In the driver's process: warm up on the twin, then time the merge and the compaction of the table."""
    from acidstream import spark as acid
    from acidstream.spark.session import session

    root = Path(spec["root"])
    started = time.perf_counter()
    conf = {**spec["conf"], "spark.ui.enabled": "true", "spark.ui.port": str(free_port())}
    spark = session("bench-spark-cluster", master=conf["spark.master"], extra_conf=conf)
    try:
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
        deadline = time.monotonic() + EXECUTOR_DEADLINE
        while executors.size() < spec["workers"] + 1:  # the driver counts as one
            if time.monotonic() > deadline:
                raise RuntimeError(f"{executors.size() - 1} of {spec['workers']} executors registered")
            time.sleep(0.2)
            executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
        location = {"metastore": f"sqlite:///{root / 'metastore.db'}", "warehouse": str(root / "wh")}
        setup = {"start": time.perf_counter() - started}
        warm_source = spark.read.parquet(str(root / "warm.parquet"))
        for _ in range(spec["warm"]):
            acid.merge(spark, WARM_TABLE, warm_source, ["id"], **location)
        acid.compact(spark, WARM_TABLE, "major", **location)
        setup["warm"] = time.perf_counter() - started - setup["start"]
        table_dir = root / "wh" / "bench.db" / TABLE.split(".")[1]
        out: dict[str, Any] = {"setup": setup}

        planning = plan_files(location)
        merge = Measured(spark, "merge", spec["worker_pids"])
        task_bytes = merge_task_bytes(table_dir, spark.sparkContext.defaultParallelism)
        source = spark.read.parquet(str(root / "upsert.parquet"))
        with merge.timing():
            counts = acid.merge(spark, TABLE, source, ["id"], **location)
        out["merge"] = {**merge.report(task_bytes), "counts": counts, "planning": planning}

        compaction = Measured(spark, "compaction", spec["worker_pids"])
        task_bytes = list(file_bytes(table_dir).values())
        with compaction.timing():
            outcomes = acid.compact(spark, TABLE, "major", **location)
        out["compaction"] = {
            **compaction.report(task_bytes),
            "states": sorted({o.info.state for o in outcomes}),
        }
        return out
    finally:
        spark.stop()


# --- the rounds ---------------------------------------------------------------------------------------------


def drive(root: Path, cluster: Cluster, warm: int) -> dict[str, Any]:
    """One case: a fresh copy of the table at ``root``, a driver process of its own on ``cluster``."""
    restore(root)
    restore_warm(root)
    spec = {
        "root": str(root),
        "conf": cluster.driver_conf(),
        "workers": cluster.workers,
        "worker_pids": list(cluster.worker_pids),
        "warm": warm,
    }
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    done = subprocess.run(
        [sys.executable, __file__, "--case", json.dumps(spec)],
        capture_output=True, text=True, cwd=root, env=env, check=False,
    )  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"the driver failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _med(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """Median and range of ``values``."""
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def _peak(rs: Sequence[dict[str, Any]], process: str) -> str:
    """The largest peak RSS of ``process`` over the rounds, and the most the operation added to it."""
    added = max(r["peak_mib"][process] - r["base_mib"][process] for r in rs)
    return f"{max(r['peak_mib'][process] for r in rs):.0f} (+{added:.0f})"


def _label(workers: int, cores: int) -> str:
    return f"{workers} worker{'s' if workers > 1 else ''} × {cores} core{'s' if cores > 1 else ''}"


def print_tables(
    runs: dict[tuple[str, int, tuple[int, int]], list[dict[str, Any]]], sizes: list[int]
) -> None:
    print("| operation | rows | cluster | wall s | driver only s (before / after jobs) | jobs / stages / tasks | "
          "table MiB per task | task run s (median, max) | CPU s: driver Python / driver JVM / executors | "
          "driver peak RSS MiB (added by the operation): Python / JVM |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for op in ("merge", "compaction"):
        for size in sizes:
            for config in CONFIGS:
                rs = runs[(op, size, config)]
                last = rs[-1]
                mib = [b / 2**20 for b in last["task_bytes"]] or [0.0]
                print(
                    f"| {op} | {size:,} | {_label(*config)} | {_med([r['wall'] for r in rs])} | "
                    f"{_med([r['driver_only'] for r in rs])} ({statistics.median(r['before_jobs'] for r in rs):.2f}"
                    f" / {statistics.median(r['after_jobs'] for r in rs):.2f}) | "
                    f"{last['jobs']} / {last['stages']} / {last['tasks']} | "
                    f"{statistics.median(mib):.1f} ({min(mib):.1f}–{max(mib):.1f}) | "
                    f"{statistics.median(t for r in rs for t in r['task_run']):.2f}, "
                    f"{max(t for r in rs for t in r['task_run']):.2f} | "
                    f"{statistics.median(r['cpu']['py'] for r in rs):.2f} / "
                    f"{statistics.median(r['cpu']['jvm'] for r in rs):.2f} / "
                    f"{statistics.median(r['cpu']['executors'] for r in rs):.2f} | "
                    f"{_peak(rs, 'py')} / {_peak(rs, 'jvm')} |"
                )
    print("\n| operation | rows | 2 workers × 1 core / 1 worker × 2 cores, wall | the same, driver only | "
          "executors used (1×2, 2×1) | job submitted → first task, s | scheduler delay per task, ms (median) | "
          "task results KiB | shuffle KiB |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    one, two = CONFIGS
    for op in ("merge", "compaction"):
        for size in sizes:
            a, b = runs[(op, size, one)], runs[(op, size, two)]
            wall = [y["wall"] / x["wall"] for x, y in zip(a, b, strict=False)]
            drv = [y["driver_only"] / x["driver_only"] for x, y in zip(a, b, strict=False)]
            both = a + b
            print(
                f"| {op} | {size:,} | {_med(wall)}× | {_med(drv)}× | "
                f"{len(a[-1]['executors'])}, {len(b[-1]['executors'])} | "
                f"{_med([r['job_to_task'] for r in both])} | "
                f"{statistics.median(d for r in both for d in r['scheduler_delay']) * 1000:.0f} | "
                f"{statistics.median(r['result_bytes'] for r in both) / 1024:.1f} | "
                f"{statistics.median(r['shuffle_bytes'] for r in both) / 1024:.1f} |"
            )
    print("\nThe merge's planning on the driver, alone (the table's snapshot listed into bucket tasks):\n")
    print("| rows | files | seconds | plan pickled KiB |")
    print("|---:|---:|---:|---:|")
    for size in sizes:
        plans = [r["planning"] for c in CONFIGS for r in runs[("merge", size, c)]]
        print(
            f"| {size:,} | {plans[0]['files']:,} | {_med([p['seconds'] for p in plans])} | "
            f"{plans[0]['pickled'] / 1024:.0f} |"
        )
    small, large = sizes[0], sizes[-1]
    print(f"\nGrowth from {small:,} to {large:,} rows ({large / small:g}× the rows and files), medians over "
          "both clusters and all rounds:\n")  # fmt: skip
    print("| operation | wall | driver only | driver CPU (Python + JVM) | driver Python peak RSS | "
          "driver JVM peak RSS | executors' CPU |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")

    def grown(op: str, pick: Any) -> str:
        before = statistics.median(pick(r) for c in CONFIGS for r in runs[(op, small, c)])
        after = statistics.median(pick(r) for c in CONFIGS for r in runs[(op, large, c)])
        ratio = f"{after / before:.2f}×" if before > 0.005 else "—"
        return f"{ratio} ({before:.2f} → {after:.2f})"

    for op in ("merge", "compaction"):
        print(
            f"| {op} | {grown(op, lambda r: r['wall'])} | {grown(op, lambda r: r['driver_only'])} | "
            f"{grown(op, lambda r: r['cpu']['py'] + r['cpu']['jvm'])} | "
            f"{grown(op, lambda r: r['peak_mib']['py'])}, added {grown(op, lambda r: r['peak_mib']['py'] - r['base_mib']['py'])} | "
            f"{grown(op, lambda r: r['peak_mib']['jvm'])}, added {grown(op, lambda r: r['peak_mib']['jvm'] - r['base_mib']['jvm'])} | "
            f"{grown(op, lambda r: r['cpu']['executors'])} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000000,4000000", help="table sizes in rows, comma-separated")
    parser.add_argument("--rows-per-txn", type=int, default=100_000)
    parser.add_argument("--percent", type=float, default=1.0, help="rows updated and rows inserted, each")
    parser.add_argument("--repeat", type=int, default=3, help="rounds")
    parser.add_argument("--warm", type=int, default=1, help="warm-up merges of the twin per application")
    parser.add_argument("--dir", type=Path, help="work directory (kept; default: a temporary one)")
    add_busy_option(parser)
    parser.add_argument("--report", action="store_true", help="print the tables of the cases kept in --dir")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(json.loads(args.case))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench_spark_cluster_"))
    if args.report:
        report(root / RESULTS, sizes)
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the clusters on the way out
    start = time.perf_counter()
    for size in sizes:
        if not (root / str(size) / "saved").exists():  # a kept --dir's tables serve again
            (root / str(size)).mkdir(parents=True, exist_ok=True)
            build(root / str(size), size, args.rows_per_txn, args.percent)
            snapshot(root / str(size))
            save_warm(root / str(size))
    print(f"built {', '.join(f'{s:,}' for s in sizes)} rows in {time.perf_counter() - start:.1f} s ({root})")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    header = (
        f"{', '.join(f'{s:,}' for s in sizes)} rows ({args.rows_per_txn:,} a txn), {args.percent:g}% updated + "
        f"{args.percent:g}% new; {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"started {started}; at the start {load_note(args.busy)}; {args.warm} warm-up merges per application"
    )
    results = root / RESULTS
    results.write_text(json.dumps({"header": header}) + "\n")
    with contextlib.ExitStack() as stack, busy(args.busy):
        clusters = {c: stack.enter_context(standalone(root / f"cluster-{c[0]}x{c[1]}", *c)) for c in CONFIGS}
        for r in range(args.repeat):
            for config in CONFIGS if r % 2 == 0 else CONFIGS[::-1]:
                for size in sizes if r % 2 == 0 else sizes[::-1]:
                    case_start = time.perf_counter()
                    out = drive(root / str(size), clusters[config], args.warm)
                    with open(results, "a") as saved:
                        saved.write(json.dumps({"size": size, "config": config, "out": out}) + "\n")
                    print(f"round {r + 1}, {_label(*config)}, {size:,} rows, {time.perf_counter() - case_start:.0f} s: "
                          f"application and executors up {out['setup']['start']:.1f} s, warm-up "
                          f"{out['setup']['warm']:.1f} s, merge {out['merge']['wall']:.2f} s, compaction "
                          f"{out['compaction']['wall']:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
        print(f"took {time.perf_counter() - start:.0f} s")
    report(results, sizes)


def report(results: Path, sizes: list[int]) -> None:
    """The tables of the cases saved in ``results`` (one JSON object a line), rounds as they came."""
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    runs: dict[tuple[str, int, tuple[int, int]], list[dict[str, Any]]] = {}
    for case in lines[1:]:
        for op in ("merge", "compaction"):
            runs.setdefault((op, case["size"], tuple(case["config"])), []).append(case["out"][op])
    rounds = min(len(v) for v in runs.values())
    print(
        f"\n{lines[0]['header']}; at the end {load_note(0)}; medians of {rounds} rounds (ranges in brackets)\n"
    )
    print_tables(runs, sizes)


if __name__ == "__main__":
    tuned()
    main()
