"""Hive 4 reads what our compactor writes: minor-compacted deltas and delete deltas, major-compacted bases (also
one under a transaction batch still open, which keeps committing into its delta), before and after cleaning,
at old snapshots and new ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore
from acidstream.compactor import Compactor, CompactorConfig
from hive4.judge import judge
from hive4.referee import Referee

pytestmark = pytest.mark.hive4


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


def connect(ms: Metastore, batch: int) -> StreamingConnection:
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table("t")
        .with_transaction_batch_size(batch)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .connect()
    )


def stream(
    conn: StreamingConnection, ids: range, *, commit: bool = True, model: dict[int, str] | None = None
) -> None:
    """One txn of rows ``(i, "m<i>")``; ``model``: the committed rows by id, kept up to date."""
    conn.begin_transaction()
    conn.write_batch(pa.table({"id": pa.array(list(ids), pa.int32()), "msg": [f"m{i}" for i in ids]}))
    conn.commit_transaction() if commit else conn.abort_transaction()
    if commit and model is not None:
        model.update((i, f"m{i}") for i in ids)


def names(ms: Metastore) -> set[str]:
    return {p.name for p in Path(ms.table("db.t").location).iterdir() if not p.name.startswith(".")}


@pytest.mark.parametrize("bucketed", [False, True], ids=["unbucketed", "bucketed"])
def test_minor_then_major(hive4: Referee, ms: Metastore, bucketed: bool) -> None:
    clustered = "CLUSTERED BY (id) INTO 2 BUCKETS " if bucketed else ""
    ms.execute(
        f"CREATE TABLE db.t (id int, msg string) {clustered}STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    table = ms.table("db.t")
    model: dict[int, str] = {}  # the committed rows by id
    snapshots = []  # (snapshot, the rows committed then)
    with connect(ms, 1) as conn:
        for n in range(5):
            stream(conn, range(n * 10, n * 10 + 6), commit=n != 2, model=model)
    deleted = [0, 5, 10, 15, 30, 35, 40, 45]
    table.delete(pc.is_in(pc.field("id"), pa.array(deleted)))
    table.update(pc.is_in(pc.field("id"), pa.array([1, 11, 31, 41])), {"msg": "u"})
    model = {i: "u" if i in (1, 11, 31, 41) else m for i, m in model.items() if i not in deleted}
    snapshots.append((ms.snapshot(), sorted(model.items())))
    ms.execute("ALTER TABLE db.t COMPACT 'minor' AND WAIT")
    assert any(n.startswith("delete_delta_") and n.count("_") == 3 for n in names(ms)), names(ms)
    snapshots.append((ms.snapshot(), sorted(model.items())))
    with connect(ms, 2) as conn:
        stream(conn, range(100, 104), model=model)
        stream(conn, range(104, 108), model=model)
    table.delete(pc.field("id") == 101)
    del model[101]
    snapshots.append((ms.snapshot(), sorted(model.items())))
    ms.execute("ALTER TABLE db.t COMPACT 'major' AND WAIT")
    assert any(n.startswith("base_") for n in names(ms)), names(ms)
    snapshots.append((ms.snapshot(), sorted(model.items())))
    for snap, then in snapshots:
        judge(hive4, ms, "db.t", snap, expected=then)
    Compactor(ms, CompactorConfig(retention=0.0)).run_once()  # cleans what the compactions replaced
    assert not any(n.startswith("delta_0000001_") for n in names(ms)), names(ms)
    final = judge(hive4, ms, "db.t", expected=model.items())
    assert len(final) == 4 * 6 - 8 + 8 - 1


def test_base_under_an_open_batch(hive4: Referee, ms: Metastore) -> None:
    ms.execute(
        "CREATE TABLE db.t (id int, msg string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    with connect(ms, 1) as conn:
        for n in range(3):
            stream(conn, range(n * 10, n * 10 + 5))
    ms.table("db.t").delete(pc.field("id") == 11)
    snapshots = [ms.snapshot()]
    batch = connect(ms, 10)
    try:
        stream(batch, range(100, 103))
        stream(batch, range(103, 106), commit=False)
        stream(batch, range(106, 109))
        batch.begin_transaction()
        batch.write(b"200,open")
        snapshots.append(ms.snapshot())
        ms.execute("ALTER TABLE db.t COMPACT 'major' AND WAIT")
        assert any(n.startswith("base_") for n in names(ms)), names(ms)
        snapshots.append(ms.snapshot())
        batch.commit_transaction()  # the batch goes on committing into its delta above the base
        stream(batch, range(300, 302))
        snapshots.append(ms.snapshot())
        for snap in snapshots:
            judge(hive4, ms, "db.t", snap)
    finally:
        batch.close()
    committed = [
        *((i, f"m{i}") for n in range(3) for i in range(n * 10, n * 10 + 5) if i != 11),
        *((i, f"m{i}") for i in (*range(100, 103), *range(106, 109), 300, 301)),
        (200, "open"),
    ]
    judge(hive4, ms, "db.t", expected=committed)
