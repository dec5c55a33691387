"""Hive 4 judges mutations of a table altered since its first files: SQL UPDATE, DELETE and MERGE, the Python
merge, and Hive's Mutation API update rows of the old columns' files and insert rows of the new, on our
metastore and on a Hive Metastore. Every reader sees the rows of both schemas under the table's columns now."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from acidstream.catalog import Metastore
from acidstream.mutate import BucketIdResolver, MutatorClient, MutatorCoordinator, RecordIdentifier
from hive4.judge import judge
from hive4.referee import Referee
from hive4.schema_support import both_metastores, stream

pytestmark = pytest.mark.hive4


@pytest.fixture(params=["ours", "hive"])
def ms(request: pytest.FixtureRequest, tmp_path: Path, warehouse: Path) -> Iterator[tuple[Metastore, str]]:
    yield from both_metastores(request, tmp_path, warehouse)


def test_sql_python_and_mutation_api_changes_on_an_altered_table(
    hive4: Referee, ms: tuple[Metastore, str]
) -> None:
    m, db = ms
    t = f"{db}.t"
    m.execute(
        f"CREATE TABLE {t} (id int, msg string, n int) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    m.execute(
        f"CREATE TABLE {db}.src (id int, n bigint) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    stream(m, t, {"id": list(range(1, 7)), "msg": [f"m{i}" for i in range(1, 7)], "n": list(range(1, 7))})
    m.execute(f"ALTER TABLE {t} CHANGE n n bigint")
    m.execute(f"ALTER TABLE {t} ADD COLUMNS (tag string)")
    model = {i: (i, f"m{i}", i, None) for i in range(1, 7)}
    stream(m, t, {"id": [7], "msg": ["m7"], "n": [2**40], "tag": ["new"]})
    model[7] = (7, "m7", 2**40, "new")
    judge(hive4, m, t, expected=model.values())

    # SQL: rows of the first schema's file take the added column and values only the widened type holds
    m.execute(f"UPDATE {t} SET tag = 'sql', n = n * 1099511627776 WHERE id = 1")
    m.execute(f"UPDATE {t} SET tag = 'sql' WHERE id = 7")
    model[1] = (1, "m1", 2**40, "sql")
    model[7] = (7, "m7", 2**40, "sql")
    m.execute(f"DELETE FROM {t} WHERE id = 2")
    del model[2]
    stream(m, f"{db}.src", {"id": [3, 8], "n": [-3, 8]})
    m.execute(
        f"MERGE INTO {t} AS t USING {db}.src AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET n = s.n, tag = 'merged' "
        "WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'm8', s.n, 'merged')"
    )
    model[3] = (3, "m3", -3, "merged")
    model[8] = (8, "m8", 8, "merged")
    judge(hive4, m, t, expected=model.values())

    # the Python merge: an old file's row updated, a new row inserted, in the table's columns now
    changes = pa.table(
        {
            "id": pa.array([4, 9], pa.int32()),
            "msg": ["py", "m9"],
            "n": pa.array([2**50, 9], pa.int64()),
            "tag": ["py", "py"],
        }
    )
    m.table(t).merge(changes, on=["id"])
    model[4] = (4, "py", 2**50, "py")
    model[9] = (9, "m9", 9, "py")
    judge(hive4, m, t, expected=model.values())

    # Hive's Mutation API: an update of a row of the first schema's file, and an insert
    client = MutatorClient.builder().with_metastore(m).add_sink_table(db, "t").build()
    client.connect()
    txn = client.new_transaction()
    (table,) = client.get_tables()
    txn.begin()
    rows = m.table(t).scan(with_row_id=True, snapshot=txn.snapshot()).to_arrow().to_pylist()
    row = {r["id"]: r for r in rows}[5]
    with MutatorCoordinator.builder().with_metastore(m).with_table(table).build() as coordinator:
        coordinator.update(
            [],
            {
                "ROW__ID": RecordIdentifier.of(row["ROW__ID"]),
                "id": 5,
                "msg": "api",
                "n": -(2**40),
                "tag": "api",
            },
        )
    with MutatorCoordinator.builder().with_metastore(m).with_table(table).build() as coordinator:
        coordinator.insert(
            [], BucketIdResolver(table).attach({"id": 10, "msg": "m10", "n": 10, "tag": "api"})
        )
    txn.commit()
    client.close()
    model[5] = (5, "api", -(2**40), "api")
    model[10] = (10, "m10", 10, "api")
    judge(hive4, m, t, expected=model.values())
