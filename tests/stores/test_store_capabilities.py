"""Hive's Mutation API and the Spark data source, batch writer and exactly-once sink on a warehouse in S3 and in
HDFS (the other capabilities' store tests are test_s3.py and test_hdfs.py).

Spark's Python workers are processes its JVM starts, with the environment it had at its start plus the
data source's own (``SparkContext.environment`` when ``register`` runs). The session's one JVM may have started
before the S3 server or HDFS did, so each store's test gives the data source the environment that reaches the
store (the AWS variables, ``$HADOOP_CONF_DIR``), as a job's ``spark.executorEnv.*`` would: the same whatever
ran first. With the Hadoop client configuration there, workers resolve ``hdfs://`` locations as the driver does
(no ``webhdfs://`` warehouse is needed).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream import Metastore
from acidstream.mutate import BucketIdResolver, MutatorClient, MutatorCoordinator, RecordIdentifier
from support.deps import import_or_skip
from support.s3server import BUCKETS

AWS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_REGION")


@dataclass(frozen=True)
class Store:
    """Where a test's metastore and warehouse live, and the environment a process needs to reach the store."""

    metastore: str
    warehouse: str
    env: dict[str, str]

    def connect(self) -> Metastore:
        return Metastore.connect(self.metastore, warehouse=self.warehouse)


@pytest.fixture(params=["s3", "hdfs", "hdfs-kerberos"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    """A SQLite metastore with a new warehouse directory on the session's S3 server, HDFS, or kerberized HDFS
    (WebHDFS behind SPNEGO: a ticket of alice's in a ticket cache of the test's own, which Spark's Python
    workers are given too, as a local job's would have its user's)."""
    prefix = uuid.uuid4().hex[:12]
    if request.param == "s3":
        request.getfixturevalue("s3_endpoint")  # sets the AWS variables in this process
        env = {k: os.environ[k] for k in AWS}
        warehouse = f"s3://{BUCKETS[0]}/{prefix}/wh"
    elif request.param == "hdfs":
        namenode = request.getfixturevalue("hdfs_namenode")
        env = {"HADOOP_CONF_DIR": str(namenode.conf_dir)}
        warehouse = f"{namenode.uri}/{prefix}/wh"
    else:
        import_or_skip("requests_gssapi")
        namenode = request.getfixturevalue("hdfs_kerberos_namenode")
        kdc = request.getfixturevalue("kdc")
        kdc.kinit("alice", kdc.dir / "alice.keytab", tmp_path / "ccache")
        env = {
            "HADOOP_CONF_DIR": str(namenode.conf_dir),  # says Kerberos
            "KRB5_CONFIG": str(kdc.krb5_conf),
            "KRB5CCNAME": f"FILE:{tmp_path / 'ccache'}",
        }
        warehouse = f"{namenode.uri}/{prefix}/wh"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Store(f"sqlite:///{tmp_path / 'metastore.db'}", warehouse, env)


def _rows(ms: Metastore, table: str, *columns: str) -> list[tuple[Any, ...]]:
    scanned = ms.table(table).scan().to_arrow()
    return sorted(zip(*(scanned.column(c).to_pylist() for c in columns), strict=True))


def test_the_mutation_api_commits_two_tables_at_once(store: Store) -> None:
    """An aborted transfer leaves no row; a committed one shows in both tables at once."""
    with store.connect() as ms:
        ms.execute("CREATE DATABASE bank")
        ms.execute(
            "CREATE TABLE bank.accounts (id int, balance int) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
            "TBLPROPERTIES ('transactional'='true')"
        )
        ms.execute(
            "CREATE TABLE bank.ledger (id int, amount int) PARTITIONED BY (region string) "
            "CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        opening = pa.table({"id": pa.array([1, 2], pa.int32()), "balance": pa.array([100, 60], pa.int32())})
        ms.table("bank.accounts").merge(opening, on=["id"])
        before = ([(1, 100), (2, 60)], [])

        def state() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
            return _rows(ms, "bank.accounts", "id", "balance"), _rows(ms, "bank.ledger", "id", "amount")

        def transfer(commit: bool) -> None:
            client = (
                MutatorClient.builder()
                .with_metastore(ms)
                .add_sink_table("bank", "accounts")
                .add_sink_table("bank", "ledger", create_partitions=True)
                .build()
            )
            client.connect()
            txn = client.new_transaction()
            accounts, ledger = client.get_tables()
            txn.begin()
            rows = ms.table("bank.accounts").scan(with_row_id=True, snapshot=txn.snapshot()).to_arrow()
            row = {r["id"]: r for r in rows.to_pylist()}[2]
            with MutatorCoordinator.builder().with_metastore(ms).with_table(accounts).build() as coordinator:
                coordinator.update(
                    [], {"ROW__ID": RecordIdentifier.of(row["ROW__ID"]), "id": 2, "balance": 0}
                )
            with MutatorCoordinator.builder().with_metastore(ms).with_table(ledger).build() as coordinator:
                coordinator.insert(["EU"], BucketIdResolver(ledger).attach({"id": 2, "amount": -60}))
            assert state() == before  # written to the store, visible to no reader yet
            if commit:
                txn.commit()
            else:
                txn.abort()
            client.close()

        transfer(commit=False)
        assert state() == before  # its partition may exist (made as Hive's coordinator makes it), empty
        transfer(commit=True)
        assert state() == ([(1, 100), (2, 0)], [(2, -60)])
        (part,) = ms.list_partitions("bank.ledger")
        assert part.name == "region=EU" and part.location.startswith(store.warehouse)


@pytest.fixture
def acid_spark(spark: Any, store: Store) -> Iterator[Any]:
    """The session registered as ``format("acidstream")`` with the store's environment for its workers; the
    previous environment and registration come back afterwards."""
    from acidstream.spark import register

    environment = spark.sparkContext.environment
    saved = dict(environment)
    environment.update(store.env)
    try:
        yield register(spark)
    finally:
        environment.clear()
        environment.update(saved)
        register(spark)


@pytest.fixture
def alerts(store: Store) -> Iterator[Metastore]:
    with store.connect() as ms:
        ms.execute(
            "CREATE TABLE alerts (id int, msg string) PARTITIONED BY (region string) CLUSTERED BY (id) "
            "INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        yield ms


def _options(store: Store) -> dict[str, str]:
    return {"metastore": store.metastore, "warehouse": store.warehouse}


@pytest.mark.slow
def test_spark_writes_a_batch_and_reads_it_back(acid_spark: Any, store: Store, alerts: Metastore) -> None:
    frame = acid_spark.range(0, 200, numPartitions=2).selectExpr(
        "cast(id as int) id", "concat('m', id) msg", "if(id % 2 = 0, 'us', 'eu') region"
    )
    frame.write.format("acidstream").options(**_options(store)).mode("append").save("alerts")
    expected = sorted(tuple(r) for r in frame.collect())
    assert _rows(alerts, "alerts", "id", "msg", "region") == expected
    assert sorted(p.name for p in alerts.list_partitions("alerts")) == ["region=eu", "region=us"]
    read = acid_spark.read.format("acidstream").options(**_options(store)).load("alerts")
    assert sorted(tuple(r) for r in read.collect()) == expected


def test_the_streaming_sink_writes_each_row_once_across_runs_from_one_checkpoint(
    acid_spark: Any, store: Store, alerts: Metastore, tmp_path: Path
) -> None:
    landing = tmp_path / "in"
    landing.mkdir()

    def run(first: int) -> None:
        lines = "".join(f"{i},m{i},{'us' if i % 2 else 'eu'}\n" for i in range(first, first + 50))
        (landing / f"f{first:04d}.csv").write_text(lines)
        query = (
            acid_spark.readStream.format("csv")
            .schema("id int, msg string, region string")
            .load(str(landing))
            .writeStream.format("acidstream")
            .options(**_options(store))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start("alerts")
        )
        query.awaitTermination()

    run(0)
    run(50)  # the same query from its checkpoint: only the new file
    assert _rows(alerts, "alerts", "id") == [(i,) for i in range(100)]
    assert alerts.get_valid_write_ids("default.alerts").high_watermark == 2  # one txn per run's batch
