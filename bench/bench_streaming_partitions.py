"""Streaming into dynamic partitions: records spread over P partitions per transaction, against deltalake.

Each record ``id,msg,continent,country`` names its partition (``country`` takes P values, round robin); the table
is clustered by id into 5 buckets, so a transaction writes P x 5 bucket files (Hive's layout: one delta directory
per partition). deltalake appends the same rows partitioned by (continent, country): one file per partition.

Like for like, row by row:

* **per record**: the records as bytes, handed over one at a time: acidstream's ``write()``; for deltalake each
  is appended to the transaction's list, which is parsed by pyarrow's CSV reader and appended at its end.
* **bulk**: one Arrow table per transaction (parsed before the clock): acidstream's ``write_batch()`` against
  ``write_deltalake``.
* **durability** ``none``: neither side syncs anything (deltalake's commit is a rename of an unsynced log file):
  acidstream without ``fsync`` and with its SQLite metastore on a tmpfs (``/dev/shm``), where its commit's log
  fsync costs nothing. ``full``: both sides sync what a commit names before it returns: acidstream with
  ``fsync`` on and its metastore on disk; deltalake's files, its log entry and their directories are fsync'd
  by the benchmark after each append (timed), side by side in 8 threads as acidstream syncs its own.

Partitions exist before the clock on both sides: each side first appends one untimed transaction to the timed
table (on acidstream's timed connection, which then knows them) and one to a warm-up table. Records and tables
are made before the clock. Every case runs in its own process; rounds interleave the cases, their order
alternating from round to round; each row gives the median and the range over rounds, each ratio the median of
per-round ratios. ``--busy N`` runs N CPU-bound processes beside every case. Both sides' tables go under
``--dir`` (default: the system's temporary directory), and the machine's dirty pages are written out (``sync``)
between cases, untimed: on ext4 without a journal, creating a file skips every inode of its block group freed
in the last ~30 s whose table block is still dirty, so one case's deleted files (thousands, for acidstream's
Hive layout) made the next case's creates cost up to 1 ms each. Each case reports the CPU
seconds of its process (all threads) and the seconds its threads waited runnable for a core (the run queue) in
the timed part: on a busy machine the wall time is mostly the latter.

    python bench/bench_streaming_partitions.py [--records 200000] [--txns 20] [--partitions 1,10,50]
        [--durability none,full] [--rounds 3] [--busy N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from _busy import Clocks, add_busy_option, busy, load_note
from _subprocess import run_script
from _tuning import tuned
from bench_streaming import _table, _timed

NAMES = ["id", "msg", "continent", "country"]
#: A tmpfs for the metastore when neither side syncs (see the module's docstring).
TMPFS = Path("/dev/shm")


def make_records(n: int, partitions: int) -> list[bytes]:
    return [f"{i},message number {i:08d},Asia,country{i % partitions:03d}".encode() for i in range(n)]


def parse(records: list[bytes]) -> Any:
    """The records as one Arrow table, by pyarrow's CSV reader."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    opts = pcsv.ReadOptions(column_names=NAMES)
    conv = pcsv.ConvertOptions(column_types={"id": pa.int32(), **{c: pa.string() for c in NAMES[1:]}})
    return pcsv.read_csv(io.BytesIO(b"\n".join(records)), read_options=opts, convert_options=conv)


def _steady(
    txn: Callable[[int], None], first: Callable[[], None], txns: int, records: int
) -> dict[str, float]:
    """Time ``txns`` calls of ``txn`` after the untimed ``first``."""
    first_s = _timed(first)
    clocks = Clocks()
    for t in range(txns):
        txn(t)
    spent = clocks.read()
    elapsed = spent["wall_s"]
    return {
        "records_per_s": records / elapsed,
        "ms_per_txn": elapsed / txns * 1000,
        "first_s": first_s,
        **spent,
    }


def case_acidstream(
    root: Path, n: int, txns: int, partitions: int, bulk: bool, durable: bool
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=None if durable else TMPFS) as db_dir:
        ms = _table(root, Path(db_dir))
        try:
            return stream(ms, "alerts", "warmup", n, txns, partitions, bulk, durable)
        finally:
            ms.close()


def stream(
    ms: Any, table: str, warmup: str | None, n: int, txns: int, partitions: int, bulk: bool, durable: bool
) -> dict[str, float]:
    """acidstream's side into ``testing.<table>`` of ``ms``: an untimed first txn on the timed connection (and
    one on a connection to ``warmup``, if given), then ``txns`` timed ones."""
    from acidstream import StreamingConnection, StrictDelimitedInputWriter

    records = make_records(n + n // txns, partitions)  # one txn's worth more: the untimed first txn
    per = n // txns
    tables = [parse(records[t * per : (t + 1) * per]) for t in range(txns + 1)] if bulk else []
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()

    def connect(name: str) -> StreamingConnection:
        builder = StreamingConnection.builder().with_metastore(ms).with_database("testing").with_table(name)
        return builder.with_record_writer(writer).with_configuration({"fsync": durable}).connect()

    def txn(conn: StreamingConnection, t: int) -> None:
        conn.begin_transaction()
        if bulk:
            conn.write_batch(tables[t])
        else:
            write = conn.write
            for rec in records[t * per : (t + 1) * per]:
                write(rec)
        conn.commit_transaction()

    conn = connect(table)

    def first() -> None:  # the partitions' creation, on the timed connection, and a warm-up table's
        if warmup is not None:
            with connect(warmup) as warm:
                txn(warm, 0)
        txn(conn, txns)

    result = _steady(lambda t: txn(conn, t), first, txns, per * txns)
    conn.close()
    assert ms.table(f"testing.{table}").scan(columns=["id"]).count() == per * (txns + 1)
    return result


def case_deltalake(
    root: Path, n: int, txns: int, partitions: int, bulk: bool, durable: bool
) -> dict[str, float]:
    from deltalake import DeltaTable, write_deltalake

    records = make_records(n + n // txns, partitions)
    per = n // txns
    tables = [parse(records[t * per : (t + 1) * per]) for t in range(txns + 1)] if bulk else []

    def append(target: Path, t: int) -> None:
        if bulk:
            table = tables[t]
        else:
            rows: list[bytes] = []
            add = rows.append
            for rec in records[t * per : (t + 1) * per]:
                add(rec)
            table = parse(rows)
        write_deltalake(str(target), table, mode="append", partition_by=["continent", "country"])
        if durable:
            sync_delta_commit(target, DeltaTable(str(target)).version())

    timed = root / "delta"
    return _steady(
        lambda t: append(timed, t),
        lambda: (append(root / "warmup", 0), append(timed, txns)),
        txns,
        per * txns,
    )


def sync_delta_commit(table: Path, version: int) -> None:
    """fsync what deltalake's commit ``version`` names: its added files, its log entry, their directories."""
    log = table / "_delta_log" / f"{version:020d}.json"
    paths = {log, log.parent, table}
    for line in log.read_text().splitlines():
        add = json.loads(line).get("add")
        if add is not None:
            path = table / add["path"]
            paths.add(path)
            paths.update(p for p in path.parents if table in p.parents)
    with ThreadPoolExecutor(8) as pool:  # side by side, as acidstream syncs a commit's paths
        list(pool.map(_fsync, sorted(paths)))


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def case_acidstream_thrift(uri: str, table: str, n: int, txns: int, partitions: int) -> dict[str, float]:
    """acidstream's ``write()`` per record into a Hive Metastore's table, as ``--hive`` runs it."""
    from bench_hive_streaming import metastore

    with metastore(uri) as ms:
        return stream(ms, table, None, n, txns, partitions, bulk=False, durable=False)


#: Untimed transactions Hive's client writes first (the JIT's warm-up; the first makes the partitions).
HIVE_WARMUP_TXNS = 3


def hive_rounds(args: argparse.Namespace, counts: list[int]) -> None:
    """``--hive``: acidstream's ``write()`` per record against Hive's Java ``HiveStreamingConnection.write()``
    (Hive 3.1.3's client, as ``bench_hive_streaming.py`` drives it), both into fresh tables of one standalone
    Hive 4 metastore, the same layout (``alerts``: 5 buckets, partitioned by continent and country)."""
    from bench_hive_streaming import create_table, hive_sh, java_command

    home = Path(hive_sh("fetch"))
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    started, load0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load_note(args.busy)
    with tempfile.TemporaryDirectory(prefix="bench-partitions-hive-") as tmp, busy(args.busy):
        classes = Path(tmp) / "classes"
        source = Path(__file__).with_name("HivePartitionsBench.java")
        jars = str(home / "streaming3" / "*")
        subprocess.run(["javac", "-nowarn", "-cp", jars, "-d", str(classes), str(source)], check=True)
        state = Path(tmp) / "metastore"
        uri = hive_sh("start", str(state))
        try:
            for r in range(args.rounds):
                for p in counts:
                    for side in ["hive", "acidstream"] if r % 2 == 0 else ["acidstream", "hive"]:
                        table = f"alerts_r{r}_p{p}_{side}"
                        create_table(uri, table)
                        if side == "hive":
                            command = java_command(
                                f"{classes}:{jars}",
                                "HivePartitionsBench",
                                *(uri, "testing", table, args.records, args.txns, p, HIVE_WARMUP_TXNS),
                            )
                            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                            result = dict(json.loads(out.strip().splitlines()[-1]))
                        else:
                            case = json.dumps(["thrift", uri, table, p])
                            common = ["--records", str(args.records), "--txns", str(args.txns)]
                            result = run_script(__file__, [*common, "--case", case])
                        runs.setdefault((side, p), []).append(result)
                print(f"round {r + 1} done, {load_note(args.busy)}", file=sys.stderr)
        finally:
            hive_sh("stop", str(state))
        load1 = load_note(args.busy)
    print(
        f"\n{args.records:,} records in {args.txns} txns, per record, batches of one txn, one Hive 4.0.1 metastore "
        f"(Derby); {args.rounds} rounds (order alternating); {os.cpu_count()} cores, {started}; at the start "
        f"{load0}; at the end {load1}\n"
    )
    print(
        "| partitions per txn | case | records/s median (min–max) | ms per txn | CPU ms per txn | acidstream vs it |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    labels = {"acidstream": "acidstream write()", "hive": "Hive's HiveStreamingConnection.write() (Java)"}
    for p in counts:
        ours = runs[("acidstream", p)]
        for side in ("acidstream", "hive"):
            mine = runs[(side, p)]
            rates = [run["records_per_s"] for run in mine]
            ms = float(np.median([run["ms_per_txn"] for run in mine]))
            cpu = float(np.median([run["cpu_s"] for run in mine])) * 1000 / args.txns
            ratio = float(
                np.median([a["records_per_s"] / b["records_per_s"] for a, b in zip(ours, mine, strict=True)])
            )
            print(
                f"| {p} | {labels[side]} | {np.median(rates):,.0f} ({min(rates):,.0f}–{max(rates):,.0f}) | "
                f"{ms:.1f} | {cpu:.1f} | {ratio:.2f}x |"
            )


CASES = {"acidstream": case_acidstream, "deltalake": case_deltalake}
MODES = {"per record": False, "bulk": True}
LABELS = {
    ("acidstream", False): "acidstream write() per record",
    ("acidstream", True): "acidstream write_batch() (Arrow)",
    ("deltalake", False): "deltalake, records to CSV per txn",
    ("deltalake", True): "deltalake write_deltalake (Arrow)",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--txns", type=int, default=20)
    parser.add_argument("--partitions", default="1,10,50", help="comma-separated partitions per transaction")
    parser.add_argument("--modes", default="per record,bulk", help="comma-separated: per record, bulk")
    parser.add_argument("--durability", default="none,full", help="comma-separated: none, full")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds, case order alternating")
    parser.add_argument(
        "--hive", action="store_true", help="against Hive's Java client, over a Hive 4 metastore (per record)"
    )
    add_busy_option(parser)
    parser.add_argument(
        "--dir", default=None, help="where both sides' tables go (default: the temp directory)"
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        name, *rest = json.loads(args.case)
        if name == "thrift":
            uri, table, p = rest
            print(json.dumps(case_acidstream_thrift(uri, table, args.records, args.txns, p)))
            return
        p, bulk, durable = rest
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            print(json.dumps(CASES[name](Path(tmp), args.records, args.txns, p, bulk, durable)))
        return
    counts = [int(p) for p in args.partitions.split(",")]
    if args.hive:
        hive_rounds(args, counts)
        return
    modes = [MODES[m.strip()] for m in args.modes.split(",")]
    durabilities = [d.strip() == "full" for d in args.durability.split(",")]
    keys = [(p, bulk, durable) for p in counts for bulk in modes for durable in durabilities]
    runs: dict[tuple[str, int, bool, bool], list[dict[str, float]]] = {}
    started, load0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load_note(args.busy)
    with busy(args.busy):
        for r in range(args.rounds):
            for p, bulk, durable in keys:
                order = list(CASES) if r % 2 == 0 else list(reversed(CASES))
                for name in order:
                    case = json.dumps([name, p, bulk, durable])
                    common = ["--records", str(args.records), "--txns", str(args.txns)]
                    common += ["--dir", args.dir] if args.dir else []
                    runs.setdefault((name, p, bulk, durable), []).append(
                        run_script(__file__, [*common, "--case", case])
                    )
                    os.sync()  # the case's deleted files written out (see the module's docstring)
            print(f"round {r + 1} done, {load_note(args.busy)}", file=sys.stderr)
        load1 = load_note(args.busy)
    print(
        f"\n{args.records:,} records in {args.txns} txns after an untimed one, {args.rounds} rounds (order "
        f"alternating); {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {started}; "
        f"tables under {args.dir or tempfile.gettempdir()}; "
        f"at the start {load0}; at the end {load1}\n"
    )
    print(
        "| partitions per txn | durability | case | records/s median (min–max) | ms per txn | CPU / run-queue ms "
        "per txn | acidstream vs it |"
    )
    print("|---:|---|---|---:|---:|---|---:|")
    for p, bulk, durable in keys:
        ours = runs[("acidstream", p, bulk, durable)]
        for name in CASES:
            mine = runs[(name, p, bulk, durable)]
            rates = [run["records_per_s"] for run in mine]
            ms = float(np.median([run["ms_per_txn"] for run in mine]))
            cpu, queue = (
                float(np.median([run[k] for run in mine])) * 1000 / args.txns
                for k in ("cpu_s", "run_queue_s")
            )
            ratio = float(
                np.median([a["records_per_s"] / b["records_per_s"] for a, b in zip(ours, mine, strict=True)])
            )
            print(
                f"| {p} | {'full' if durable else 'none'} | {LABELS[(name, bulk)]} | {np.median(rates):,.0f} "
                f"({min(rates):,.0f}–{max(rates):,.0f}) | {ms:.1f} | {cpu:.1f} / {queue:.1f} | {ratio:.2f}x |"
            )


if __name__ == "__main__":
    tuned()
    main()
