"""Writers that wait for each other's table lock take turns and all commit, with no update lost: each one that
waited starts over in a new txn at a snapshot after the writer it waited for (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pytest

from acidstream import Metastore

WRITERS = 6


@pytest.mark.timeout(120)
def test_concurrent_increments_all_commit(metastore_url: str, warehouse: Path) -> None:
    with Metastore.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute(
            "CREATE TABLE counters (id int, n bigint) CLUSTERED BY (id) INTO 2 BUCKETS "
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        ms.table("counters").merge(pd.DataFrame({"id": [1, 2], "n": [0, 0]}), on=["id"])
        errors: list[BaseException] = []
        start = threading.Barrier(WRITERS)

        def writer(i: int) -> None:
            """Half the writers run UPDATE statements, half Table.update: both read-modify-write row 1."""
            try:
                with Metastore.connect(metastore_url, warehouse=warehouse) as mine:
                    start.wait()
                    for _ in range(3):
                        if i % 2:
                            mine.execute("UPDATE counters SET n = n + 1 WHERE id = 1")
                        else:
                            mine.table("counters").update(pc.field("id") == 1, {"n": pc.field("n") + 1})
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert errors == []
        rows = ms.table("counters").scan().to_arrow().sort_by("id").to_pylist()
        assert rows == [{"id": 1, "n": WRITERS * 3}, {"id": 2, "n": 0}]
        assert not [t for t in ms.show_txns() if t.state.name == "OPEN"]
