"""Hive 4 judges schema evolution of a partitioned table. ``ALTER TABLE ... ADD COLUMNS`` without ``CASCADE``
changes only the table's columns (on a Hive Metastore, old partitions keep their own storage descriptor's
columns; a partition added later takes the table's): Hive's reader reads every partition of a transactional
(ORC) table under the table's columns, so acidstream reads, streams, mutates and compacts every partition in
the table's columns too. With ``CASCADE`` the partitions' columns change along (on a Hive Metastore)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest

from acidstream.catalog import Metastore
from hive4.judge import hive_metastore_uri, judge
from hive4.referee import Referee
from hive4.schema_support import both_metastores, compact, stream

pytestmark = pytest.mark.hive4


@pytest.fixture(params=["ours", "hive"])
def ms(request: pytest.FixtureRequest, tmp_path: Path, warehouse: Path) -> Iterator[tuple[Metastore, str]]:
    yield from both_metastores(request, tmp_path, warehouse)


def partition_columns(m: Metastore, table: str, value: str) -> list[str] | None:
    """The columns a Hive Metastore holds for one partition (its storage descriptor's); None on ours, which
    keeps a table's columns only."""
    if hive_metastore_uri(m) is None:
        return None
    db, name = table.split(".")
    partition = m.backend._call("get_partition", db, name, [value])
    return [f"{c.name} {c.type}" for c in partition.sd.cols]


def test_partitions_read_stream_mutate_and_compact_in_the_tables_columns(
    hive4: Referee, ms: tuple[Metastore, str]
) -> None:
    m, db = ms
    t = f"{db}.p"
    m.execute(
        f"CREATE TABLE {t} (id int, msg string) PARTITIONED BY (k string) CLUSTERED BY (id) INTO 2 BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    stream(m, t, {"id": [1, 2], "msg": ["a", "b"], "k": ["old", "old"]})
    m.execute(f"ALTER TABLE {t} ADD COLUMNS (n int)")
    assert partition_columns(m, t, "old") in (None, ["id int", "msg string"])
    model = {1: (1, "a", None, "old"), 2: (2, "b", None, "old")}
    judge(hive4, m, t, expected=model.values())

    stream(m, t, {"id": [3, 4], "msg": ["c", "d"], "n": [30, 40], "k": ["old", "new"]})
    assert partition_columns(m, t, "old") in (None, ["id int", "msg string"])
    assert partition_columns(m, t, "new") in (None, ["id int", "msg string", "n int"])
    model |= {3: (3, "c", 30, "old"), 4: (4, "d", 40, "new")}
    judge(hive4, m, t, expected=model.values())

    table = m.table(t)
    table.update(pc.field("id") == 1, {"n": 10})
    table.delete(pc.field("id") == 2)
    model[1] = (1, "a", 10, "old")
    del model[2]
    judge(hive4, m, t, expected=model.values())

    compact(m, t, {"k": "old"})
    judge(hive4, m, t, expected=model.values())  # the base holds the added column's values

    m.execute(f"ALTER TABLE {t} CHANGE n n bigint CASCADE")
    for value in ("old", "new"):
        assert partition_columns(m, t, value) in (None, ["id int", "msg string", "n bigint"])
    stream(m, t, {"id": [5], "msg": ["e"], "n": [2**40], "k": ["old"]})
    model[5] = (5, "e", 2**40, "old")
    judge(hive4, m, t, expected=model.values())
