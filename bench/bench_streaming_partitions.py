"""Streaming into dynamic partitions: records spread over P partitions per transaction, against deltalake.

Each record ``id,msg,continent,country`` names its partition (``country`` takes P values, round robin); the table
is clustered by id into 5 buckets, so a transaction writes P x 5 bucket files (Hive's layout: one delta directory
per partition). deltalake appends the same rows partitioned by (continent, country): one file per partition.
Per-record ``write()``, records made before the clock, each case in its own subprocess, rounds interleaved.

    python bench/bench_streaming_partitions.py [--records 200000] [--txns 20] [--partitions 1,10,50]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _subprocess import run_script
from _tuning import tuned
from bench_streaming import _table, _timed


def make_records(n: int, partitions: int) -> list[bytes]:
    return [f"{i},message number {i:08d},Asia,country{i % partitions:03d}".encode() for i in range(n)]


def case_acidstream(root: Path, n: int, txns: int, partitions: int) -> dict[str, float]:
    from acidstream import StreamingConnection, StrictDelimitedInputWriter

    records = make_records(n, partitions)
    ms = _table(root)  # the same tables as bench_streaming's, written without static partition values
    per = n // txns
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()

    def connect(table: str) -> StreamingConnection:
        builder = StreamingConnection.builder().with_metastore(ms).with_database("testing").with_table(table)
        return builder.with_record_writer(writer).connect()

    def txn(conn: StreamingConnection, batch: list[bytes]) -> None:
        conn.begin_transaction()
        write = conn.write
        for rec in batch:
            write(rec)
        conn.commit_transaction()

    def warm_up() -> None:  # and the partitions' creation, which the steady state does not repeat
        with connect("warmup") as warm:
            txn(warm, records[:per])
        with connect("alerts") as first:
            txn(first, records[:per])

    first = _timed(warm_up)
    conn = connect("alerts")
    start = time.perf_counter()
    for t in range(txns):
        txn(conn, records[t * per : (t + 1) * per])
    conn.close()
    elapsed = time.perf_counter() - start
    assert ms.table("testing.alerts").scan(columns=["id"]).count() == per * (txns + 1)
    return {"records_per_s": per * txns / elapsed, "ms_per_txn": elapsed / txns * 1000, "first_s": first}


def case_deltalake(root: Path, n: int, txns: int, partitions: int) -> dict[str, float]:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    from deltalake import write_deltalake

    records = make_records(n, partitions)
    per = n // txns
    names = ["id", "msg", "continent", "country"]
    opts = pcsv.ReadOptions(column_names=names)
    conv = pcsv.ConvertOptions(column_types={"id": pa.int32(), **{c: pa.string() for c in names[1:]}})

    def append(target: str, batch: list[bytes]) -> None:
        table = pcsv.read_csv(io.BytesIO(b"\n".join(batch)), read_options=opts, convert_options=conv)
        write_deltalake(target, table, mode="append", partition_by=["continent", "country"])

    first = _timed(
        lambda: (append(str(root / "warmup"), records[:per]), append(str(root / "delta"), records[:per]))
    )
    start = time.perf_counter()
    for t in range(txns):
        append(str(root / "delta"), records[t * per : (t + 1) * per])
    elapsed = time.perf_counter() - start
    return {"records_per_s": per * txns / elapsed, "ms_per_txn": elapsed / txns * 1000, "first_s": first}


CASES = {"acidstream write() per record": case_acidstream, "deltalake append": case_deltalake}


def run_case(name: str, records: int, txns: int, partitions: int) -> dict[str, float]:
    args = ["--case", name, "--records", str(records), "--txns", str(txns), "--partitions", str(partitions)]
    return run_script(__file__, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--txns", type=int, default=20)
    parser.add_argument("--partitions", default="1,10,50", help="comma-separated partitions per transaction")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        with tempfile.TemporaryDirectory() as tmp:
            result = CASES[args.case](Path(tmp), args.records, args.txns, int(args.partitions))
            print(json.dumps(result))
        return
    counts = [int(p) for p in args.partitions.split(",")]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {(c, p): [] for p in counts for c in CASES}
    for r in range(args.rounds):
        for p in counts:
            for name in CASES:
                runs[(name, p)].append(run_case(name, args.records, args.txns, p))
        print(f"round {r + 1} done", file=sys.stderr)
    print(
        f"\n{args.records:,} records in {args.txns} txns after a warm-up txn, median of {args.rounds} interleaved "
        f"rounds; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}\n"
    )
    print("| partitions per txn | files per txn | case | records/s | ms per txn | acidstream vs it |")
    print("|---:|---:|---|---:|---:|---:|")
    ours = "acidstream write() per record"
    for p in counts:
        for name in CASES:
            rate = float(np.median([run["records_per_s"] for run in runs[(name, p)]]))
            ms = float(np.median([run["ms_per_txn"] for run in runs[(name, p)]]))
            ratio = float(
                np.median(
                    [
                        a["records_per_s"] / b["records_per_s"]
                        for a, b in zip(runs[(ours, p)], runs[(name, p)], strict=True)
                    ]
                )
            )
            files = p * 5 if name == ours else p
            print(f"| {p} | {files} | {name} | {rate:,.0f} | {ms:.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    tuned()
    main()
