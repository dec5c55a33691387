"""Metastore latency and throughput per transaction, 1 and 8 client processes, in two shapes:

* ``open+alloc+commit``: ``open_txns()``, ``allocate_table_write_ids``, ``commit_txn`` (three DB transactions);
* ``open_with_wids+commit``: ``open_txns_with_write_ids(1, ...)`` and ``commit_txn``;
* ``streaming begin+commit``: ``open_txns_with_write_ids_and_lock`` with the shared-read insert lock a streaming
  txn takes, and ``commit_txn`` (what a streaming connection with batch size 1 asks of the metastore per txn).

Run ``python bench/bench_metastore.py [--repeat N]``; prints a markdown table with the best of N runs (by
commits/s; the machine is shared) and the 1-minute load average when that row finished. PostgreSQL rows need the
server at ``ACIDSTREAM_BENCH_PG_URL`` (default ``postgresql://postgres@127.0.0.1:54329/test``, the cluster ``scripts/postgres.sh`` starts), else are skipped.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from _tuning import tuned
from acidstream.metastore import LockComponent, LockLevel, LockType, MetastoreFacade, OperationType

PG_URL = os.environ.get("ACIDSTREAM_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:54329/test")
TXNS_PER_CLIENT = {1: 1000, 8: 250}
WARMUP = 20
MODES = ("open+alloc+commit", "open_with_wids+commit", "streaming begin+commit")
STREAMING_LOCK = LockComponent(
    LockType.SHARED_READ, LockLevel.TABLE, "bench", "t", operation=OperationType.INSERT
)


def _cycle(ms: MetastoreFacade, mode: str) -> None:
    if mode == "open+alloc+commit":
        (txn,) = ms.open_txns()
        ms.allocate_table_write_ids([txn], "bench.t")
    elif mode == "open_with_wids+commit":
        ((txn, _wid),) = ms.open_txns_with_write_ids(1, "bench.t")
    else:
        ((txn, _wid),), _lock = ms.open_txns_with_write_ids_and_lock(1, "bench.t", [STREAMING_LOCK])
    ms.commit_txn(txn)


def _client(url: str, warehouse: str, mode: str, n: int, start: float) -> list[float]:
    """Run ``n`` cycles after a warm-up; returns per-txn latencies in seconds."""
    with MetastoreFacade.connect(url, warehouse=warehouse) as ms:
        for _ in range(WARMUP):
            _cycle(ms, mode)
        while time.time() < start:  # all clients start together
            time.sleep(0.001)
        latencies = []
        for _ in range(n):
            t0 = time.perf_counter()
            _cycle(ms, mode)
            latencies.append(time.perf_counter() - t0)
    return latencies


@contextmanager
def _sqlite() -> Iterator[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as wh:
        yield f"sqlite:///{wh}/metastore.db", wh


@contextmanager
def _postgres() -> Iterator[tuple[str, str]]:
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with tempfile.TemporaryDirectory() as wh:
            sep = "&" if "?" in PG_URL else "?"
            yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}", wh
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=3):
            return True
    except Exception:
        return False


Row = tuple[int, float, float, float]  # txns, p50 ms, p99 ms, commits/s


def run(backend: str, clients: int, mode: str) -> Row:
    with _sqlite() if backend == "sqlite" else _postgres() as (url, wh):
        with MetastoreFacade.connect(url, warehouse=wh) as ms:
            ms.execute("CREATE DATABASE bench")
            ms.execute("CREATE TABLE bench.t (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
        n = TXNS_PER_CLIENT[clients]
        start = time.time() + 2.0 + 0.2 * clients
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(clients) as pool:
            t0 = time.time()
            results = pool.starmap(_client, [(url, wh, mode, n, start)] * clients)
            wall = time.time() - max(start, t0)
    latencies = sorted(x for r in results for x in r)
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return len(latencies), p50, p99, len(latencies) / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best is printed")
    args = parser.parse_args()
    backends = ["sqlite"] + (["postgresql"] if _pg_available() else [])
    if "postgresql" not in backends:
        print(f"(PostgreSQL not reachable at {PG_URL}: its rows are skipped)", file=sys.stderr)
    print("| backend | shape | clients | txns | p50 ms | p99 ms | commits/s | load avg |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for backend in backends:
        for mode in MODES:
            for clients in (1, 8):
                n, p50, p99, rate = max(
                    (run(backend, clients, mode) for _ in range(args.repeat)), key=lambda r: r[3]
                )
                load = os.getloadavg()[0]
                print(
                    f"| {backend} | {mode} | {clients} | {n} | {p50:.2f} | {p99:.2f} | {rate:.0f} | {load:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    tuned()
    main()
