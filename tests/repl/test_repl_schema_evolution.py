"""A column change on the source reaches the replica with the files written after it: the replica's table takes
the source's columns, and reads old and new files as the source does (docs/format.md, Schema evolution)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from replhelpers import stream

from acidstream import repl
from acidstream.catalog import Metastore


def _rows(ms: Metastore) -> list[dict[str, object]]:
    return sorted(ms.table("default.e").scan().to_arrow().to_pylist(), key=repr)


def test_column_changes_replicate_with_the_files_after_them(
    source: Metastore, replica: Metastore, tmp_path: Path
) -> None:
    source.execute(
        "CREATE TABLE default.e (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    with stream(source, "default.e") as conn:
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": pa.array([1], pa.int32()), "msg": ["a"]}))
        conn.commit_transaction()
    dumps = str(tmp_path / "dumps")
    last = repl.dump(source, dumps).last_event_id
    repl.load(replica, dumps)
    source.execute("ALTER TABLE default.e ADD COLUMNS (n smallint)")
    source.execute("ALTER TABLE default.e CHANGE n n bigint")
    source.execute("ALTER TABLE default.e SET TBLPROPERTIES ('note'='kept')")
    with stream(source, "default.e") as conn:
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": pa.array([2], pa.int32()), "msg": ["b"], "n": [2**40]}))
        conn.commit_transaction()
    repl.dump(source, dumps, from_event=last)
    repl.load(replica, dumps)
    assert replica.table("default.e").columns == source.table("default.e").columns
    assert [str(c) for c in replica.table("default.e").columns] == ["id int", "msg string", "n bigint"]
    assert replica.table("default.e").properties["note"] == "kept"
    assert (
        _rows(replica)
        == _rows(source)
        == [
            {"id": 1, "msg": "a", "n": None},
            {"id": 2, "msg": "b", "n": 2**40},
        ]
    )
