"""Dropping a (managed) table deletes its files, as Hive does, once the drop is committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream.errors import MetaException
from acidstream.metastore import MetastoreFacade

DDL = "CREATE TABLE {} (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')"


def test_drop_table_deletes_data_and_recreate_starts_clean(metastore_url: str, warehouse: Path) -> None:
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute("CREATE DATABASE d")
        ms.execute(DDL.format("d.t"))
        location = Path(ms.table("d.t").location)
        (location / "delta_0000001_0000001").mkdir(parents=True)
        (location / "delta_0000001_0000001" / "bucket_00000").write_bytes(b"old")
        ms.execute("DROP TABLE d.t")
        assert not location.exists()
        ms.execute(DDL.format("d.t"))
        assert Path(ms.table("d.t").location) == location and not location.exists()
        txn = ms.open_txns(1)[0]
        assert ms.allocate_table_write_ids([txn], "d.t") == [(txn, 1)]


def test_drop_database_cascade_deletes_every_table_and_refusal_keeps_data(
    metastore_url: str, warehouse: Path
) -> None:
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute("CREATE DATABASE d")
        ms.execute(DDL.format("d.a"))
        ms.execute(DDL.format("d.b"))
        dirs = [Path(ms.table(f"d.{n}").location) for n in "ab"]
        for d in dirs:
            d.mkdir(parents=True)
            (d / "f").write_bytes(b"x")
        with pytest.raises(MetaException, match="not empty"):
            ms.drop_database("d")
        assert all(d.exists() for d in dirs)  # a refused drop keeps the data
        ms.drop_database("d", cascade=True)
        assert not any(d.exists() for d in dirs)
