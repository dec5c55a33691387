"""Hive's TestMutations, ported: transactions of the Mutation API end to end, read back with our reader."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from mutatehelpers import ASIA_INDIA, EUROPE_FRANCE, EUROPE_UK

from acidstream.acid.codec import BucketCodec
from acidstream.catalog import Metastore
from acidstream.errors import ConnectionException, TransactionException, WorkerException
from acidstream.metastore import TxnStatus
from acidstream.mutate import (
    AcidTable,
    BucketIdResolver,
    MutationSummary,
    MutatorClient,
    MutatorCoordinator,
    RecordIdentifier,
)
from acidstream.txn import TxnState


def client_for(ms: Metastore, *tables: str, create_partitions: bool = True) -> MutatorClient:
    builder = MutatorClient.builder().with_metastore(ms)
    for t in tables:
        builder.add_sink_table("testing", t, create_partitions=create_partitions)
    client = builder.build()
    client.connect()
    return client


def rows(ms: Metastore, table: str, partition: list[str] | None = None) -> list[tuple[Any, ...]]:
    """(ROW__ID, id, msg) of the visible rows, sorted by id."""
    flt = None
    if partition is not None:
        flt = {"continent": partition[0], "country": partition[1]}
    data = ms.table(f"testing.{table}").scan(columns=["id", "msg"], partition_filter=flt, with_row_id=True)
    out = [(RecordIdentifier.of(r["ROW__ID"]), r["id"], r["msg"]) for r in data.to_arrow().to_pylist()]
    return sorted(out, key=lambda r: r[1])


def bucket(ms: Metastore, table: str, id_: int) -> int:
    return BucketIdResolver(ms.table(f"testing.{table}")).compute_bucket_id({"id": id_})


def insert_all(ms: Metastore, table: str, by_partition: dict[tuple[str, ...], list[tuple[int, str]]]) -> None:
    """Insert through the API, grouped by partition then bucket as the API requires."""
    client = client_for(ms, table)
    txn = client.new_transaction()
    [acid] = client.get_tables()
    txn.begin()
    resolver = BucketIdResolver(acid)
    with MutatorCoordinator.builder().with_metastore(ms).with_table(acid).build() as coord:
        for part, records in by_partition.items():
            attached = [resolver.attach({"id": i, "msg": m}) for i, m in records]
            for record in sorted(attached, key=lambda r: r["ROW__ID"].bucket):
                coord.insert(list(part), record)
    txn.commit()
    client.close()


def test_empty_commit_and_abort(ms: Metastore) -> None:
    for table in ("partitioned", "unpartitioned"):
        client = client_for(ms, table, create_partitions=table == "partitioned")
        txn = client.new_transaction()
        txn.begin()
        txn.commit()
        assert txn.state is TxnState.COMMITTED
        txn = client.new_transaction()
        txn.begin()
        MutatorCoordinator.builder().with_metastore(ms).with_table(client.get_tables()[0]).build().close()
        txn.abort()
        assert txn.state is TxnState.ABORTED
        assert ms.get_txn_state(txn.transaction_id) is TxnStatus.ABORTED
        client.close()


def test_commit_partitioned_creates_the_partition_and_writes_hives_layout(ms: Metastore) -> None:
    client = client_for(ms, "partitioned")
    txn = client.new_transaction()
    [acid] = client.get_tables()
    assert (acid.txn_id, acid.write_id) == (txn.transaction_id, 1)
    txn.begin()
    coord = MutatorCoordinator.builder().with_metastore(ms).with_table(acid).build()
    coord.insert(ASIA_INDIA, BucketIdResolver(acid).attach({"id": 1, "msg": "Hello streaming"}))
    summary = coord.close()
    txn.commit()
    assert txn.state is TxnState.COMMITTED
    b = bucket(ms, "partitioned", 1)
    assert rows(ms, "partitioned", ASIA_INDIA) == [
        (RecordIdentifier(1, BucketCodec.V1.encode(b, 0), 0), 1, "Hello streaming")
    ]
    [part] = ms.list_partitions("testing.partitioned")
    assert part.name == "continent=Asia/country=India"
    assert summary.partitions[part.name].files == [
        f"{part.location}/delta_0000001_0000001_0000/bucket_{b:05d}"
    ]
    [component] = ms.backend.completed_components("testing.partitioned")[-1:]
    assert (component.partition, component.write_id) == (part.name, 1)


def test_multi_partition_insert(ms: Metastore) -> None:
    insert_all(
        ms,
        "partitioned",
        {
            tuple(ASIA_INDIA): [(1, "Hello streaming")],
            tuple(EUROPE_UK): [(2, "Hello streaming")],
            tuple(EUROPE_FRANCE): [(3, "Hello streaming"), (4, "Bonjour streaming")],
        },
    )
    assert [r[1:] for r in rows(ms, "partitioned", EUROPE_FRANCE)] == [
        (3, "Hello streaming"),
        (4, "Bonjour streaming"),
    ]
    assert [r[1:] for r in rows(ms, "partitioned", EUROPE_UK)] == [(2, "Hello streaming")]
    assert len(ms.list_partitions("testing.partitioned")) == 3


def test_partitions_not_created_by_coordinators_are_created_at_commit(ms: Metastore) -> None:
    client = client_for(ms, "partitioned", create_partitions=False)
    txn = client.new_transaction()
    [acid] = client.get_tables()
    txn.begin()
    # a worker without any metastore: it synthesises the partition path
    worker_table = AcidTable.from_json(acid.to_json())
    coord = MutatorCoordinator.builder().with_table(worker_table).with_statement_id(7).build()
    coord.insert(EUROPE_UK, BucketIdResolver(worker_table).attach({"id": 2, "msg": "x"}))
    summary = MutationSummary.from_json(coord.close().to_json())
    assert ms.list_partitions("testing.partitioned") == []
    txn.commit([summary])
    [(rid, id_, _)] = rows(ms, "partitioned", EUROPE_UK)
    assert (rid.write_id, BucketCodec.V1.decode_statement_id(rid.bucket_id), id_) == (1, 7, 2)


def test_two_coordinators_with_one_statement_id_fail_the_second_and_keep_the_first_file(
    ms: Metastore,
) -> None:
    """Files are created in the background: the clash surfaces when the second coordinator writes (at its
    close), as Hive's 'file exists', naming the remedy; the first coordinator's file is left as it was."""
    client = client_for(ms, "partitioned")
    txn = client.new_transaction()
    [acid] = client.get_tables()
    txn.begin()
    first, second = (
        MutatorCoordinator.builder().with_table(acid).with_metastore(ms).with_statement_id(3).build()
        for _ in "ab"
    )
    record = BucketIdResolver(acid).attach({"id": 2, "msg": "x"})
    first.insert(EUROPE_UK, record)
    [written_to] = first.close().partitions.values()
    [path] = written_to.files
    written = Path(path).read_bytes()
    second.insert(EUROPE_UK, record)
    with pytest.raises(WorkerException, match=r"already exists: another coordinator .* own statement id"):
        second.close()
    assert Path(path).read_bytes() == written
    txn.commit([first.summary])
    assert [r[1:] for r in rows(ms, "partitioned", EUROPE_UK)] == [(2, "x")]
    client.close()


def test_updates_and_deletes(ms: Metastore) -> None:
    insert_all(
        ms,
        "partitioned",
        {
            tuple(ASIA_INDIA): [(1, "Namaste streaming 1"), (2, "Namaste streaming 2")],
            tuple(EUROPE_UK): [(3, "Hello streaming 1"), (4, "Hello streaming 2")],
            tuple(EUROPE_FRANCE): [(5, "Bonjour streaming 1"), (6, "Bonjour streaming 2")],
        },
    )
    before = {r[1]: r[0] for p in (ASIA_INDIA, EUROPE_UK, EUROPE_FRANCE) for r in rows(ms, "partitioned", p)}
    client = client_for(ms, "partitioned")
    txn = client.new_transaction()
    [acid] = client.get_tables()
    txn.begin()
    with MutatorCoordinator.builder().with_metastore(ms).with_table(acid).build() as coord:
        india = sorted(
            [
                ("update", {"ROW__ID": before[2], "id": 2, "msg": "UPDATED: Namaste streaming 2"}),
                ("insert", BucketIdResolver(acid).attach({"id": 20, "msg": "Namaste streaming 3"})),
            ],
            key=lambda op: RecordIdentifier.of(op[1]["ROW__ID"]).bucket,
        )
        for op, record in india:
            getattr(coord, op)(ASIA_INDIA, record)
        coord.delete(EUROPE_UK, {"ROW__ID": before[3]})
        france = sorted(
            [
                ("delete", {"ROW__ID": before[5], "id": 5, "msg": "Bonjour streaming 1"}),
                ("update", {"ROW__ID": before[6], "id": 6, "msg": "UPDATED: Bonjour streaming 2"}),
            ],
            key=lambda op: (op[1]["ROW__ID"].bucket, op[1]["ROW__ID"]),
        )
        for op, record in france:
            getattr(coord, op)(EUROPE_FRANCE, record)
    txn.commit()
    india_rows = rows(ms, "partitioned", ASIA_INDIA)
    assert [r[1:] for r in india_rows] == [
        (1, "Namaste streaming 1"),
        (2, "UPDATED: Namaste streaming 2"),
        (20, "Namaste streaming 3"),
    ]
    assert india_rows[0][0] == before[1]  # untouched rows keep their ROW__ID
    assert india_rows[1][0].write_id == 2  # split update: the new version is an insert of write id 2
    assert india_rows[1][0].bucket == before[2].bucket  # ... in the same bucket
    assert [r[1:] for r in rows(ms, "partitioned", EUROPE_UK)] == [(4, "Hello streaming 2")]
    assert [r[1:] for r in rows(ms, "partitioned", EUROPE_FRANCE)] == [(6, "UPDATED: Bonjour streaming 2")]
    ops = {
        c.partition: c.update_delete
        for c in ms.backend.completed_components("testing.partitioned")
        if c.write_id == 2
    }
    assert ops == {
        None: True,
        "continent=Asia/country=India": True,
        "continent=Europe/country=UK": True,
        "continent=Europe/country=France": True,
    }


def test_abort_leaves_nothing_visible(ms: Metastore) -> None:
    client = client_for(ms, "partitioned")
    txn = client.new_transaction()
    [acid] = client.get_tables()
    txn.begin()
    with MutatorCoordinator.builder().with_metastore(ms).with_table(acid).build() as coord:
        for record in sorted(
            [BucketIdResolver(acid).attach({"id": i, "msg": "m"}) for i in (1, 2)], key=lambda r: r["ROW__ID"]
        ):
            coord.insert(ASIA_INDIA, record)
    txn.abort()
    assert txn.state is TxnState.ABORTED
    assert rows(ms, "partitioned", ASIA_INDIA) == []
    client.close()


def test_multi_table_commit_and_abort(ms: Metastore) -> None:
    """Both tables or neither: each has its own write id under one txn."""
    for outcome in ("abort", "commit"):
        client = client_for(ms, "partitioned", "unpartitioned")
        txn = client.new_transaction()
        part, unpart = client.get_tables()
        txn.begin()
        with MutatorCoordinator.builder().with_metastore(ms).with_table(part).build() as c1:
            c1.insert(ASIA_INDIA, BucketIdResolver(part).attach({"id": 1, "msg": outcome}))
        with MutatorCoordinator.builder().with_metastore(ms).with_table(unpart).build() as c2:
            c2.insert([], BucketIdResolver(unpart).attach({"id": 1, "msg": outcome}))
        getattr(txn, outcome)()
        client.close()
    assert [r[1:] for r in rows(ms, "partitioned")] == [(1, "commit")]
    assert [r[1:] for r in rows(ms, "unpartitioned")] == [(1, "commit")]


def test_connect_refuses_unsuitable_sinks(ms: Metastore) -> None:
    ms.execute("CREATE TABLE testing.plain (id int) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC")
    ms.execute(
        "CREATE TABLE testing.unbucketed (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    for table, reason in (
        ("plain", "not transactional"),
        ("unbucketed", "not been bucketed"),
        ("nope", "Invalid"),
    ):
        client = MutatorClient.builder().with_metastore(ms).add_sink_table("testing", table).build()
        with pytest.raises(ConnectionException, match=reason):
            client.connect()
    client = MutatorClient.builder().with_metastore(ms).add_sink_table("testing", "partitioned").build()
    with pytest.raises(TransactionException, match="Not connected"):
        client.new_transaction()


def test_one_open_transaction_per_client(ms: Metastore) -> None:
    client = client_for(ms, "unpartitioned")
    txn = client.new_transaction()
    with pytest.raises(TransactionException, match="still INACTIVE"):
        client.new_transaction()
    txn.begin()
    txn.commit()
    with pytest.raises(TransactionException, match="cannot commit"):
        txn.commit()
    client.new_transaction().abort()
    client.close()


def test_acid_table_travels_as_json_and_pickle(ms: Metastore) -> None:
    client = client_for(ms, "partitioned")
    client.new_transaction()
    [acid] = client.get_tables()
    acid.next_statement_id()
    for copy in (AcidTable.from_json(acid.to_json()), pickle.loads(pickle.dumps(acid))):
        assert copy == acid
        assert copy.table.columns == acid.table.columns
        assert copy.next_statement_id() == 0  # in-process bookkeeping does not travel
    assert json.loads(acid.to_json())["write_id"] == acid.write_id
    client.close()


def test_context_managers_commit_or_abort(ms: Metastore) -> None:
    client = client_for(ms, "unpartitioned")
    with client.new_transaction() as txn:
        [acid] = client.get_tables()
        with MutatorCoordinator.builder().with_metastore(ms).with_table(acid).build() as coord:
            coord.insert([], BucketIdResolver(acid).attach({"id": 5, "msg": "kept"}))
    assert txn.state is TxnState.COMMITTED
    with pytest.raises(RuntimeError), client.new_transaction() as txn2:
        txn2.begin()
        with MutatorCoordinator.builder().with_metastore(ms).with_table(acid).build() as coord:
            coord.insert([], BucketIdResolver(acid).attach({"id": 6, "msg": "lost"}))
            raise RuntimeError("job failed")
    assert txn2.state is TxnState.ABORTED
    assert [r[1:] for r in rows(ms, "unpartitioned")] == [(5, "kept")]
