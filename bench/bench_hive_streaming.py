"""Streaming ingest into a Hive 4 metastore's table: acidstream against Hive's own Java streaming client.

One standalone Hive 4.0.1 metastore (``scripts/hive.sh start``), the ``alerts`` table of Hive's streaming docs
(``id int, msg string``, partitioned by ``continent, country``, clustered by ``id`` into 5 buckets, full-ACID ORC),
created through the metastore's thrift ``create_table`` as Hive's DDL would, fresh for every case. N delimited
records ``id,message number %08d`` in T transactions into the static partition (Asia, India), transaction
batches of 1 and of 10:

* Hive's ``HiveStreamingConnection.write`` with ``StrictDelimitedInputWriter``, a JVM timing itself
  (``interop/hive/streaming3``, ``StreamingBench``). The client is Hive 3.1.3's: no Hive 4 release publishes a
  ``hive-streaming`` artifact, and 3.1.3's is the same API over the same metastore calls (see that pom).
* acidstream's ``StreamingConnection.write()`` per record and ``write_batch()`` (one Arrow table a transaction)
  over ``Metastore.connect("thrift://...")``, in a Python subprocess timing itself the same way.

Every case runs in a fresh process and first writes ``--warmup-txns`` untimed transactions into a warm-up table
of its own (the JVM's JIT compiles the hot paths then; reported as "warm-up s"). The timed part runs from after
``connect`` to after ``close``. CPU seconds: the client process's (all its threads: the JVM's JIT and GC
included) in the timed part, the whole process's at its end, and the metastore's in the timed part. Rounds
interleave the cases; figures are medians over rounds, ratios medians of per-round ratios against Hive's client
with the same batch size. Afterwards our reader counts each table's rows at the metastore's snapshot.

    python bench/bench_hive_streaming.py [--records 1000000] [--txns 100] [--rounds 1] [--warmup-txns 10]

``--kerberos`` measures instead what SASL costs per call and per connection: the tests' MIT KDC
(``scripts/kdc.sh``) and, beside an open metastore, a kerberized one (``hive.sh start --kerberos``, QOP privacy
or authentication); ``--calls`` round trips of ``get_open_txns`` on one connection, and ``--connections``
connections each opened and used for one call, through acidstream's client: open, Kerberos with QOP ``auth``,
Kerberos with ``auth-conf`` (every message sealed), and a delegation token (DIGEST-MD5).

    python bench/bench_hive_streaming.py --kerberos [--calls 2000] [--connections 100]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from _subprocess import run_script
from _tuning import tuned

ROOT = Path(__file__).resolve().parents[1]
HIVE_SH = ROOT / "scripts" / "hive.sh"
DB = "testing"
PARTITION = ["Asia", "India"]
#: The JVM's module openings, as the hive4 tests' streaming client passes them (Hive predates JDK 17).
ADD_OPENS = ("java.lang", "java.net", "java.util", "java.nio", "java.util.concurrent", "java.io")


def metastore(uri: str) -> Any:
    """The one place the bench makes acidstream's metastore client: the façade every user gets."""
    from acidstream import Metastore

    return Metastore.connect(uri)


def hive_sh(*args: str) -> str:
    """``scripts/hive.sh``'s output (the cache directory, a thrift URI). The metastore runs with Hive's default
    of no DML events, so both clients make the same calls (Hive 3.1.3's client never sends write notifications,
    acidstream's sends them only where the metastore logs DML events, as Hive 4's)."""
    env = {**os.environ, "ACIDSTREAM_HIVE_DML_EVENTS": "false"}
    done = subprocess.run(["bash", str(HIVE_SH), *args], check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


def cpu_seconds(pid: int) -> float:
    """A process's user plus system CPU seconds, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def create_table(uri: str, name: str) -> None:
    """``CREATE TABLE testing.<name> (id int, msg string) PARTITIONED BY (continent string, country string)
    CLUSTERED BY (id) INTO 5 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')``, as the thrift
    ``Table`` Hive 4's DDL sends."""
    from hive_metastore import ttypes as hms

    from acidstream.errors import AlreadyExistsException

    sd = hms.StorageDescriptor(
        cols=[hms.FieldSchema("id", "int", None), hms.FieldSchema("msg", "string", None)],
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=hms.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
        numBuckets=5,
        bucketCols=["id"],
        sortCols=[],
        parameters={},
    )
    table = hms.Table(
        tableName=name,
        dbName=DB,
        owner="acidstream",
        tableType="MANAGED_TABLE",
        sd=sd,
        partitionKeys=[
            hms.FieldSchema("continent", "string", None),
            hms.FieldSchema("country", "string", None),
        ],
        parameters={"transactional": "true", "transactional_properties": "default", "bucketing_version": "2"},
    )
    with metastore(uri) as client:
        raw = client.backend.connection
        with contextlib.suppress(AlreadyExistsException):
            raw.call(
                "create_database",
                lambda c: c.create_database(hms.Database(name=DB, parameters={})),
                idempotent=False,
            )
        raw.call("create_table", lambda c: c.create_table(table), idempotent=False)


def rows_and_id_sum(uri: str, name: str) -> tuple[int, int]:
    """The table's rows at the metastore's snapshot now, read by acidstream's reader: their count and the sum of
    their ids."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from acidstream.read.planning import plan_partition
    from acidstream.read.scan import bucket_readers
    from acidstream.storage import table_filesystem

    with metastore(uri) as client:
        table = client.backend.get_table(f"{DB}.{name}")
        txns = client.snapshot()
        write_ids = client.get_valid_write_ids(table.full_name, snapshot=txns)
    fs, path = table_filesystem(table.location)
    part = f"continent={PARTITION[0]}/country={PARTITION[1]}"
    tasks, _ = plan_partition(fs, f"{path}/{part}", write_ids, txns, tuple(PARTITION), part)
    schema = pa.schema([pa.field("id", pa.int32())])
    count = total = 0
    for reader in bucket_readers(table, tasks, write_ids, schema, with_row_id=False):
        for batch in reader.batches():
            count += batch.num_rows
            total += int(pc.sum(batch.column(0).cast(pa.int64())).as_py() or 0)
    return count, total


# --- acidstream's side, in a subprocess -------------------------------------------------------------------------


def _connect(client, table: str, batch: int):  # type: ignore[no-untyped-def]
    from acidstream import StreamingConnection, StrictDelimitedInputWriter

    return (
        StreamingConnection.builder()
        .with_metastore(client)
        .with_database(DB)
        .with_table(table)
        .with_static_partition_values(PARTITION)
        .with_agent_info("acidstream-bench")
        .with_transaction_batch_size(batch)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )


def case_acidstream(
    uri: str, table: str, warmup: str, n: int, txns: int, batch: int, warmup_txns: int, api: str, ms_pid: int
) -> dict[str, float]:
    """``api``: ``write`` (a record at a time, as bytes) or ``write_batch`` (an Arrow table a transaction)."""
    import pyarrow as pa

    per = n // txns
    if api == "write":
        records = [f"{i},message number {i:08d}".encode() for i in range(per * txns)]

        def write_txn(conn: Any, t: int) -> None:
            write = conn.write
            for rec in records[t * per : (t + 1) * per]:
                write(rec)

    else:
        ids = pa.array(np.arange(per * txns, dtype=np.int32))
        msgs = pa.array([f"message number {i:08d}" for i in range(per * txns)])
        tables = [
            pa.table({"id": ids[t * per : (t + 1) * per], "msg": msgs[t * per : (t + 1) * per]})
            for t in range(txns)
        ]

        def write_txn(conn: Any, t: int) -> None:
            conn.write_batch(tables[t])

    def run(conn: Any, count: int) -> list[float]:
        commits = []
        for t in range(count):
            conn.begin_transaction()
            write_txn(conn, t)
            c0 = time.perf_counter()
            conn.commit_transaction()
            commits.append(time.perf_counter() - c0)
        return commits

    client = metastore(uri)
    warm0 = time.perf_counter()
    with _connect(client, warmup, batch) as warm:
        run(warm, min(warmup_txns, txns))
    warmup_s = time.perf_counter() - warm0
    conn = _connect(client, table, batch)
    ms0, cpu0, start = cpu_seconds(ms_pid), time.process_time(), time.perf_counter()
    commits = run(conn, txns)
    conn.close()
    seconds, cpu, ms_cpu = time.perf_counter() - start, time.process_time() - cpu0, cpu_seconds(ms_pid) - ms0
    client.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "seconds": seconds,
        "records_per_s": per * txns / seconds,
        "warmup_s": warmup_s,
        "commit_p50_ms": float(np.percentile(commits, 50) * 1000),
        "commit_p95_ms": float(np.percentile(commits, 95) * 1000),
        "cpu_s": cpu,
        "process_cpu_s": usage.ru_utime + usage.ru_stime,
        "metastore_cpu_s": ms_cpu,
    }


# --- the cases --------------------------------------------------------------------------------------------------


def run_java(
    uri: str, table: str, warmup: str, n: int, txns: int, batch: int, warmup_txns: int, ms_pid: int, log: Path
) -> dict[str, float]:
    """Hive's client in a JVM of its own; its stderr goes to ``log``."""
    home = Path(hive_sh("fetch"))
    command = java_command(
        str(home / "streaming3" / "*"),
        "acidstream.hive.streaming.StreamingBench",
        *(uri, DB, table, warmup, n, txns, batch, warmup_txns, ms_pid, os.sysconf("SC_CLK_TCK")),
    )
    with log.open("ab") as err:
        out = subprocess.run(command, check=True, stdout=subprocess.PIPE, stderr=err, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def java_command(classpath: str, main: str, *args: object) -> list[str]:
    """A JVM for Hive's streaming client: the JVM's defaults but the heap, full JIT, Hive's module openings."""
    java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"
    return [
        java,
        "-Xmx2g",
        f"-Dlog4j.configurationFile={ROOT / 'interop' / 'hive' / 'log4j2.properties'}",
        *(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in ADD_OPENS),
        "-cp",
        classpath,
        main,
        *map(str, args),
    ]


def run_ours(api: str) -> Callable[..., dict[str, float]]:
    def run(
        uri: str,
        table: str,
        warmup: str,
        n: int,
        txns: int,
        batch: int,
        warmup_txns: int,
        ms_pid: int,
        log: Path,
    ) -> dict[str, float]:
        args = [uri, table, warmup, n, txns, batch, warmup_txns, api, ms_pid]
        return run_script(__file__, ["--case", json.dumps(args)])

    return run


CLIENTS = {
    "Hive's HiveStreamingConnection.write() (Java)": run_java,
    "acidstream write()": run_ours("write"),
    "acidstream write_batch() (Arrow)": run_ours("write_batch"),
}
JAVA = next(iter(CLIENTS))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--txns", type=int, default=100)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 10], help="transaction batch sizes")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds; medians are reported")
    parser.add_argument("--warmup-txns", type=int, default=10, help="untimed txns each case writes first")
    parser.add_argument("--kerberos", action="store_true", help="SASL's cost per call and per connection")
    parser.add_argument("--calls", type=int, default=2000, help="with --kerberos: calls on one connection")
    parser.add_argument("--connections", type=int, default=100, help="with --kerberos: connections opened")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case_acidstream(*json.loads(args.case))))
        return
    if args.kerberos:
        sasl_costs(args.calls, args.connections)
        return
    hive_sh("fetch")
    load0 = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-hive-streaming-") as tmp:
        state = Path(tmp) / "metastore"
        uri = hive_sh("start", str(state))
        try:
            ms_pid = int((state / "pid").read_text())
            for r in range(args.rounds):
                for batch in args.batches:
                    for c, (client, run) in enumerate(CLIENTS.items()):
                        name = f"alerts_r{r}_b{batch}_c{c}"
                        create_table(uri, name)
                        create_table(uri, f"{name}_warmup")
                        result = run(
                            uri,
                            name,
                            f"{name}_warmup",
                            args.records,
                            args.txns,
                            batch,
                            args.warmup_txns,
                            ms_pid,
                            Path(tmp) / "java.log",
                        )
                        per = args.records // args.txns
                        expected = (per * args.txns, per * args.txns * (per * args.txns - 1) // 2)
                        found = rows_and_id_sum(uri, name)
                        assert found == expected, (
                            f"{client}, batch {batch}: {found} rows/id sum, not {expected}"
                        )
                        results.setdefault((client, batch), []).append(result)
                        print(
                            f"round {r + 1}, batch {batch}: {client} {result['records_per_s']:,.0f} rec/s, "
                            f"commit p50 {result['commit_p50_ms']:.1f} ms, CPU {result['cpu_s']:.2f} s",
                            file=sys.stderr,
                        )
        finally:
            hive_sh("stop", str(state))
    load1 = os.getloadavg()
    print(
        f"\n{args.records:,} records, {args.txns} txns, {args.warmup_txns} warm-up txns, "
        f"median of {args.rounds} interleaved round(s); {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, {started}, load average {load0[0]:.1f} → {load1[0]:.1f}\n"
    )
    print(
        "| client | batch size | records/s | vs Hive's client | commit p50 / p95 ms | p50 vs Hive's | "
        "CPU s (timed) | CPU s (process) | metastore CPU s | seconds | warm-up s |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for batch in args.batches:
        java = results[(JAVA, batch)]
        for client in CLIENTS:
            runs = results[(client, batch)]
            med = {k: float(np.median([run[k] for run in runs])) for k in runs[0]}
            speed = float(
                np.median([o["records_per_s"] / j["records_per_s"] for o, j in zip(runs, java, strict=True)])
            )
            p50 = float(
                np.median([o["commit_p50_ms"] / j["commit_p50_ms"] for o, j in zip(runs, java, strict=True)])
            )
            print(
                f"| {client} | {batch} | {med['records_per_s']:,.0f} | {speed:.2f}x | "
                f"{med['commit_p50_ms']:.1f} / {med['commit_p95_ms']:.1f} | {p50:.2f}x | {med['cpu_s']:.2f} | "
                f"{med['process_cpu_s']:.2f} | {med['metastore_cpu_s']:.2f} | {med['seconds']:.2f} | "
                f"{med['warmup_s']:.2f} |"
            )


def sasl_costs(calls: int, connections: int) -> None:
    """Per-call and per-connection microseconds of ``get_open_txns`` on an open and a kerberized metastore."""
    from acidstream.metastore.hive.client import HiveMetastoreClient

    hive_sh("fetch")
    with tempfile.TemporaryDirectory(prefix="bench-hive-sasl-") as tmp:
        kdc = Path(tmp) / "kdc"
        os.environ["KRB5_CONFIG"] = _kdc("start", str(kdc))
        os.environ["KRB5CCNAME"] = f"FILE:{Path(tmp) / 'krb5cc'}"  # none: the keytab only
        states = {"open": Path(tmp) / "open", "kerberos": Path(tmp) / "kerberos"}
        try:
            open_uri = hive_sh("start", str(states["open"]))
            secured = hive_sh(
                "start", str(states["kerberos"]), "--kerberos", str(kdc), "--qop", "privacy,authentication"
            )
            keytab = {"kerberos_principal": "alice", "kerberos_keytab": str(kdc / "alice.keytab")}
            with HiveMetastoreClient.open(secured, **keytab) as owner:
                token = owner.get_delegation_token()
                cases: dict[str, tuple[str, dict[str, Any]]] = {
                    "open (no SASL)": (open_uri, {}),
                    "Kerberos, QOP auth": (secured, {**keytab, "kerberos_qop": "auth"}),
                    "Kerberos, QOP auth-conf": (secured, {**keytab, "kerberos_qop": "auth-conf"}),
                    "delegation token (DIGEST-MD5)": (secured, {"delegation_token": token.text}),
                }
                rows = {
                    name: _call_costs(uri, options, calls, connections)
                    for name, (uri, options) in cases.items()
                }
                owner.cancel_delegation_token(token)
        finally:
            for state in states.values():
                if (state / "pid").exists():
                    hive_sh("stop", str(state))
            _kdc("stop", str(kdc))
    base = rows["open (no SASL)"]
    print(f"\n{calls} calls on one connection, {connections} connections; {os.cpu_count()} cores\n")
    print("| metastore | µs per call (p50) | vs open | µs per connection (open + 1 call, p50) | vs open |")
    print("|---|---:|---:|---:|---:|")
    for name, (call, connect) in rows.items():
        print(f"| {name} | {call:,.0f} | {call / base[0]:.2f}x | {connect:,.0f} | {connect / base[1]:.2f}x |")


def _kdc(*args: str) -> str:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "kdc.sh"), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def _call_costs(uri: str, options: dict[str, Any], calls: int, connections: int) -> tuple[float, float]:
    """Median microseconds of one ``get_open_txns`` on an open connection, and of a new connection's first."""
    from acidstream.metastore.hive.client import HiveMetastoreClient

    with HiveMetastoreClient.open(uri, **options) as client:
        per_call = []
        for _ in range(calls):
            t0 = time.perf_counter()
            client.get_open_txns()
            per_call.append(time.perf_counter() - t0)
        per_connection = []
        for _ in range(connections):
            client.connection.close()  # the next call opens (and authenticates) a new socket
            t0 = time.perf_counter()
            client.get_open_txns()
            per_connection.append(time.perf_counter() - t0)
    return float(np.median(per_call) * 1e6), float(np.median(per_connection) * 1e6)


if __name__ == "__main__":
    tuned()
    main()
