"""Hive 4 reads what our mutations write: split updates and deletes (``delete_delta`` directories), several
statements in one transaction, ``Table.merge``/``update``/``delete`` and SQL UPDATE/DELETE/MERGE, aborted
transactions among them, at every snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream.acid.codec import decode_writer_id
from acidstream.catalog import Metastore
from acidstream.mutate import BucketIdResolver, MutatorClient, MutatorCoordinator, RecordIdentifier
from hive4.judge import judge
from hive4.referee import Referee

pytestmark = pytest.mark.hive4

PARTITIONED = "PARTITIONED BY (region string) "


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


def create(ms: Metastore, name: str, layout: str) -> None:
    ms.execute(
        f"CREATE TABLE db.{name} (id bigint, balance bigint, note string) {layout}"
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )


def accounts(ids: range, balance: int, region: str | None = None) -> pa.Table:
    columns = {
        "id": pa.array(list(ids), pa.int64()),
        "balance": pa.array([balance + i for i in ids], pa.int64()),
        "note": [f"n{i}" for i in ids],
    }
    if region is not None:
        columns["region"] = [region] * len(ids)
    return pa.table(columns)


@pytest.mark.parametrize(
    "layout",
    ["", "CLUSTERED BY (id) INTO 4 BUCKETS ", PARTITIONED + "CLUSTERED BY (id) INTO 2 BUCKETS "],
    ids=["unbucketed", "bucketed", "partitioned"],
)
def test_table_merge_update_delete(hive4: Referee, ms: Metastore, layout: str) -> None:
    create(ms, "t", layout)
    table = ms.table("db.t")
    region = "EU" if layout.startswith(PARTITIONED) else None
    Model = dict[int, tuple[int, str]]  # the committed rows by id: (balance, note)

    def rows_of(ids: range, balance: int) -> Model:
        return {i: (balance + i, f"n{i}") for i in ids}

    steps: list[tuple[Callable[[], object], Callable[[Model], Model]]] = [
        (
            lambda: table.merge(accounts(range(0, 40), 100, region), on=["id"]),
            lambda m: rows_of(range(0, 40), 100),
        ),
        (  # 10 updated, 20 inserted
            lambda: table.merge(accounts(range(30, 60), 500, region), on=["id"]),
            lambda m: {**m, **rows_of(range(30, 60), 500)},
        ),
        (
            lambda: table.update(pc.field("id") < 5, {"balance": pc.field("balance") * 2}),
            lambda m: {i: (b * 2 if i < 5 else b, n) for i, (b, n) in m.items()},
        ),
        (
            lambda: table.delete((pc.field("id") >= 10) & (pc.field("id") < 20)),
            lambda m: {i: r for i, r in m.items() if not 10 <= i < 20},
        ),
        (
            lambda: table.merge(
                accounts(range(50, 70), 900, region), on=["id"], when_not_matched_by_source="delete"
            ),
            lambda m: rows_of(range(50, 70), 900),
        ),
        (lambda: table.update(None, {"note": "all"}), lambda m: {i: (b, "all") for i, (b, _) in m.items()}),
    ]
    model: Model = {}
    snapshots = []  # (snapshot, the rows committed then)
    for change, after in steps:
        change()
        model = after(model)
        rows = [(i, b, n, *([region] if region else [])) for i, (b, n) in model.items()]
        snapshots.append((ms.snapshot(), rows))
    for snap, then in snapshots:
        judge(hive4, ms, "db.t", snap, expected=then)
    final = judge(hive4, ms, "db.t", expected=snapshots[-1][1])
    assert sorted(r[0] for _, r in final) == list(range(50, 70))


def test_sql_update_delete_merge(hive4: Referee, ms: Metastore) -> None:
    create(ms, "t", PARTITIONED + "CLUSTERED BY (id) INTO 2 BUCKETS ")
    create(ms, "changes", "")
    ms.table("db.t").merge(
        pa.concat_tables([accounts(range(0, 10), 0, "EU"), accounts(range(10, 20), 0, "US")]), on=["id"]
    )
    ms.table("db.changes").merge(accounts(range(5, 15), 1000), on=["id"])
    # the committed rows by id: (balance, note, region)
    model = {i: (i, f"n{i}", "EU" if i < 10 else "US") for i in range(20)}
    snapshots = [(ms.snapshot(), dict(model))]
    for sql, after in (
        (
            "UPDATE db.t SET balance = balance + 1, note = 'sql' WHERE id % 3 = 0",
            lambda i, b, n, r: (b + 1, "sql", r) if i % 3 == 0 else (b, n, r),
        ),
        (
            "DELETE FROM db.t WHERE id IN (1, 2, 11)",
            lambda i, b, n, r: None if i in (1, 2, 11) else (b, n, r),
        ),
        (
            "MERGE INTO db.t AS t USING db.changes AS s ON t.id = s.id "
            "WHEN MATCHED AND s.id < 8 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET balance = s.balance, note = 'merged'",
            lambda i, b, n, r: (b, n, r) if not 5 <= i < 15 else None if i < 8 else (1000 + i, "merged", r),
        ),
    ):
        ms.execute(sql)
        model = {i: new for i, row in model.items() if (new := after(i, *row)) is not None}
        snapshots.append((ms.snapshot(), dict(model)))
    for snap, then in snapshots:
        judge(hive4, ms, "db.t", snap, expected=[(i, *row) for i, row in then.items()])
    assert len(model) == 20 - 3 - 3


def test_several_statements_in_one_transaction_and_an_aborted_one(hive4: Referee, ms: Metastore) -> None:
    create(ms, "t", "CLUSTERED BY (id) INTO 2 BUCKETS ")
    ms.table("db.t").merge(accounts(range(0, 20), 0), on=["id"])
    snapshots = [ms.snapshot()]

    def mutate(commit: bool) -> None:
        client = MutatorClient.builder().with_metastore(ms).add_sink_table("db", "t").build()
        client.connect()
        txn = client.new_transaction()
        [acid] = client.get_tables()
        txn.begin()
        rows = ms.table("db.t").scan(with_row_id=True, snapshot=txn.snapshot()).to_arrow().to_pylist()
        by_id = {r["id"]: r for r in rows}
        resolver = BucketIdResolver(acid)
        # statement 0 deletes or updates the even ids below 10, statement 1 the odd ones; each inserts three
        for statement in (0, 1):
            targets = [r for i, r in by_id.items() if i < 10 and i % 2 == statement]
            inserts = [
                resolver.attach({"id": 100 + statement * 10 + k, "balance": k, "note": "new"})
                for k in range(3)
            ]
            coordinator = (
                MutatorCoordinator.builder()
                .with_metastore(ms)
                .with_table(acid)
                .with_statement_id(statement)
                .build()
            )
            with coordinator:
                buckets = {decode_writer_id(r["ROW__ID"]["bucketid"]) for r in targets}
                for bucket in sorted(buckets | {r["ROW__ID"].bucket for r in inserts}):
                    mine = [r for r in targets if decode_writer_id(r["ROW__ID"]["bucketid"]) == bucket]
                    for r in sorted(mine, key=lambda r: tuple(r["ROW__ID"].values())):
                        rid = RecordIdentifier.of(r["ROW__ID"])
                        if r["id"] % 4 < 2:
                            coordinator.delete([], {"ROW__ID": rid})
                        else:
                            coordinator.update(
                                [], {"ROW__ID": rid, "id": r["id"], "balance": -1, "note": "upd"}
                            )
                    for record in (r for r in inserts if r["ROW__ID"].bucket == bucket):
                        coordinator.insert([], record)
        txn.commit() if commit else txn.abort()
        client.close()
        snapshots.append(ms.snapshot())

    mutate(commit=False)
    mutate(commit=True)
    for snap in snapshots:
        judge(hive4, ms, "db.t", snap)
    final = {r[0]: r[2] for _, r in judge(hive4, ms, "db.t")}
    assert sorted(final) == [2, 3, 6, 7, *range(10, 20), 100, 101, 102, 110, 111, 112]
    assert {final[i] for i in (2, 3, 6, 7)} == {"upd"}
    names = {p.name for p in Path(ms.table("db.t").location).iterdir()}
    assert {f"{kind}_0000003_0000003_000{s}" for kind in ("delta", "delete_delta") for s in (0, 1)} <= names
