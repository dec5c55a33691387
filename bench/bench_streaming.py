"""Streaming ingest throughput vs raw pyarrow CSV→ORC and deltalake appends.

Same data for every case: N delimited records ``id,msg`` (msg ~20 chars), committed in T transactions into a
table partitioned by (continent, country) and clustered by id into 5 buckets, static partition. Each case runs
in its own subprocess so that peak memory (max RSS) is its own. Prints a markdown table.

Steady state: every case first writes one untimed transaction's worth of the data to a target of its own (a
fresh process pays once for faulting in its libraries' code and first buffers — about 0.3 s here, more than a
tenth of a run); the first-transaction time of each case is reported beside the steady-state rate.

    python bench/bench_streaming.py [--records 1000000] [--txns 100] [--rounds 3] [--dir D] [--match fsync]
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from _busy import add_busy_option, busy, load_note
from _memory import peak_rss_mib
from _subprocess import run_script
from _tuning import tuned


def make_records(n: int) -> list[bytes]:
    return [f"{i},message number {i:08d}".encode() for i in range(n)]


def _table(root: Path, db_dir: Path | None = None):  # type: ignore[no-untyped-def]
    """The ``alerts`` and ``warmup`` tables in a SQLite metastore under ``db_dir`` (default: ``root``), their
    files under ``root``."""
    from acidstream import Metastore

    ms = Metastore.connect(f"sqlite:///{(db_dir or root) / 'metastore.db'}", warehouse=str(root / "wh"))
    ms.execute("CREATE DATABASE testing")
    for name in ("alerts", "warmup"):
        ms.execute(
            f"CREATE TABLE testing.{name} (id int, msg string) PARTITIONED BY (continent string, country string) "
            "CLUSTERED BY (id) INTO 5 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
    return ms


def _connect(ms, table: str = "alerts", batch_size: int = 1, config: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    from acidstream import StreamingConnection, StrictDelimitedInputWriter

    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("testing")
        .with_table(table)
        .with_static_partition_values(["Asia", "India"])
        .with_transaction_batch_size(batch_size)
        .with_record_writer(writer)
        .with_configuration(config or {})
        .connect()
    )


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def case_acidstream_write(
    root: Path, n: int, txns: int, batch_size: int = 1, config: dict[str, Any] | None = None
) -> dict[str, float]:
    records = make_records(n)
    ms = _table(root)
    per = n // txns

    def warm_up() -> None:
        with _connect(ms, "warmup", batch_size, config) as warm:
            warm.begin_transaction()
            for rec in records[:per]:
                warm.write(rec)
            warm.commit_transaction()

    first = _timed(warm_up)
    conn = _connect(ms, batch_size=batch_size, config=config)
    commits = []
    start = time.perf_counter()
    for t in range(txns):
        conn.begin_transaction()
        write = conn.write
        for rec in records[t * per : (t + 1) * per]:
            write(rec)
        c0 = time.perf_counter()
        conn.commit_transaction()
        commits.append(time.perf_counter() - c0)
    conn.close()
    elapsed = time.perf_counter() - start
    rows = ms.table("testing.alerts").scan(columns=["id"]).count()
    assert rows == per * txns, rows
    return {
        "seconds": elapsed,
        "records_per_s": per * txns / elapsed,
        "first_txn_s": first,
        "commit_p50_ms": float(np.percentile(commits, 50) * 1000),
        "commit_p99_ms": float(np.percentile(commits, 99) * 1000),
        "peak_rss_mib": peak_rss_mib(),
    }


def case_acidstream_write_batch(root: Path, n: int, txns: int) -> dict[str, float]:
    import pyarrow as pa

    ids = np.arange(n, dtype=np.int32)
    msgs = pa.array([f"message number {i:08d}" for i in range(n)])
    ms = _table(root)
    per = n // txns

    def batch(t: int) -> pa.Table:
        return pa.table({"id": ids[t * per : (t + 1) * per], "msg": msgs[t * per : (t + 1) * per]})

    def warm_up() -> None:
        with _connect(ms, "warmup") as warm:
            warm.begin_transaction()
            warm.write_batch(batch(0))
            warm.commit_transaction()

    first = _timed(warm_up)
    conn = _connect(ms)
    start = time.perf_counter()
    for t in range(txns):
        conn.begin_transaction()
        conn.write_batch(batch(t))
        conn.commit_transaction()
    conn.close()
    elapsed = time.perf_counter() - start
    return {
        "seconds": elapsed,
        "records_per_s": per * txns / elapsed,
        "first_txn_s": first,
        "peak_rss_mib": peak_rss_mib(),
    }


def csv_batches(records: list[bytes], txns: int) -> Iterator[Any]:
    """The records as one Arrow table per transaction, parsed by pyarrow's CSV reader. The records are made
    before the clock starts, as for acidstream's cases: making 1M of them takes ~0.5 s."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    per = len(records) // txns
    opts = pcsv.ReadOptions(column_names=["id", "msg"])
    conv = pcsv.ConvertOptions(column_types={"id": pa.int32(), "msg": pa.string()})
    for t in range(txns):
        data = b"\n".join(records[t * per : (t + 1) * per])
        yield pcsv.read_csv(io.BytesIO(data), read_options=opts, convert_options=conv)


def case_pyarrow_csv_orc(root: Path, n: int, txns: int) -> dict[str, float]:
    import pyarrow.orc as po

    records = make_records(n)

    def warm_up() -> None:
        po.write_table(
            next(csv_batches(records[: n // txns], 1)), str(root / "warmup.orc"), compression="zlib"
        )

    first = _timed(warm_up)
    start = time.perf_counter()
    for t, table in enumerate(csv_batches(records, txns)):
        po.write_table(table, str(root / f"part-{t}.orc"), compression="zlib")
    elapsed = time.perf_counter() - start
    return {
        "seconds": elapsed,
        "records_per_s": n // txns * txns / elapsed,
        "first_txn_s": first,
        "peak_rss_mib": peak_rss_mib(),
    }


def case_deltalake(root: Path, n: int, txns: int) -> dict[str, float]:
    import pyarrow as pa
    from deltalake import write_deltalake

    def append(target: str, table: pa.Table) -> None:
        rows = table.num_rows
        table = table.append_column("continent", pa.repeat("Asia", rows)).append_column(
            "country", pa.repeat("India", rows)
        )
        write_deltalake(target, table, mode="append", partition_by=["continent", "country"])

    records = make_records(n)
    first = _timed(lambda: append(str(root / "warmup"), next(csv_batches(records[: n // txns], 1))))
    start = time.perf_counter()
    for table in csv_batches(records, txns):
        append(str(root / "delta"), table)
    elapsed = time.perf_counter() - start
    return {
        "seconds": elapsed,
        "records_per_s": n // txns * txns / elapsed,
        "first_txn_s": first,
        "peak_rss_mib": peak_rss_mib(),
    }


def case_acidstream_write_batch_of_10(root: Path, n: int, txns: int) -> dict[str, float]:
    """Hive's transaction batches: 10 txns share one file per bucket (intermediate footer + side file each)."""
    return case_acidstream_write(root, n, txns, batch_size=10)


def case_acidstream_write_fsync(root: Path, n: int, txns: int) -> dict[str, float]:
    """``fsync``: every commit first fsyncs the 5 bucket files, their directories and the table's (the
    warehouse must be on a disk, not a tmpfs, for this to measure anything: see ``--dir``)."""
    return case_acidstream_write(root, n, txns, config={"fsync": True})


def case_acidstream_write_batch_of_10_fsync(root: Path, n: int, txns: int) -> dict[str, float]:
    """The same with batches of 10: the side files too."""
    return case_acidstream_write(root, n, txns, batch_size=10, config={"fsync": True})


CASES = {
    "acidstream write() per record": case_acidstream_write,
    "acidstream write(), fsync": case_acidstream_write_fsync,
    "acidstream write(), transaction batch size 10": case_acidstream_write_batch_of_10,
    "acidstream write(), transaction batch size 10, fsync": case_acidstream_write_batch_of_10_fsync,
    "acidstream write_batch (Arrow)": case_acidstream_write_batch,
    "pyarrow CSV→ORC, no txns": case_pyarrow_csv_orc,
    "deltalake append": case_deltalake,
}


def run_case(name: str, records: int, txns: int, directory: str | None) -> dict[str, float]:
    where = ["--dir", directory] if directory else []
    return run_script(__file__, ["--case", name, "--records", str(records), "--txns", str(txns), *where])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--txns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--dir", help="where the cases write (default: the system's temporary directory)")
    parser.add_argument(
        "--match", action="append", help="run only the cases whose name contains this (and the first case)"
    )
    add_busy_option(parser)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            print(json.dumps(CASES[args.case](Path(tmp), args.records, args.txns)))
        return
    base_name = "acidstream write() per record"
    names = [n for n in CASES if n == base_name or not args.match or any(m in n for m in args.match)]
    # This machine's speed drifts by tens of percent within minutes: every round runs each case once, so
    # the cases of one round share the machine's state, and ratios are medians of per-round ratios.
    # The order of the cases alternates from round to round (the first after a pause runs on a cooler machine).
    rounds: list[dict[str, dict[str, float]]] = []
    started, load0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load_note(args.busy)
    with busy(args.busy):
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            rounds.append({name: run_case(name, args.records, args.txns, args.dir) for name in order})
            print(
                f"round {r + 1}: "
                + ", ".join(f"{n} {v['records_per_s']:,.0f}/s" for n, v in rounds[-1].items()),
                file=sys.stderr,
            )
        load1 = load_note(args.busy)
    print(
        f"\n{args.records:,} records, {args.txns} txns, median (min-max) of {args.rounds} interleaved rounds; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {started}; at the start {load0}; "
        f"at the end {load1}\n"
    )
    print(
        "| case | records/s (steady) | acidstream write() vs it | seconds | first txn s | peak RSS MiB "
        "| commit p50/p99 ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in names:
        runs = [rnd[name] for rnd in rounds]
        med = {k: float(np.median([run[k] for run in runs])) for k in runs[0]}
        ratio = float(
            np.median([rnd[base_name]["records_per_s"] / rnd[name]["records_per_s"] for rnd in rounds])
        )
        commit = f"{med['commit_p50_ms']:.1f} / {med['commit_p99_ms']:.1f}" if "commit_p50_ms" in med else ""
        rates = [run["records_per_s"] for run in runs]
        print(
            f"| {name} | {med['records_per_s']:,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | {ratio:.2f}x | "
            f"{med['seconds']:.2f} | "
            f"{med['first_txn_s']:.2f} | {med['peak_rss_mib']:.0f} | {commit} |"
        )


if __name__ == "__main__":
    tuned()
    main()
