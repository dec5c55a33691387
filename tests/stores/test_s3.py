"""Every capability on a warehouse in S3 (a real S3 server on loopback), SQLite and PostgreSQL metastores.

What differs from a local disk is handled on purpose: there is no atomic rename, so a compaction writes its
output in place under its txn's visibility suffix (``base_N_vT``) and the metastore's commit of txn T makes
it visible; a failed compaction's output is removed and never read.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter, repl
from acidstream.compactor import Cleaner, CompactorConfig
from acidstream.errors import AcidStreamError
from support.faultinjection import WriteBudget, failing_writes

DDL = (
    "CREATE TABLE sales (id int, amount bigint) PARTITIONED BY (region string) CLUSTERED BY (id) INTO 2 BUCKETS "
    "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


def _stream(ms: Metastore, first: int, txns: int, batch: int = 1) -> None:
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("default")
        .with_table("sales")
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(batch)
        .connect()
    )
    with conn:
        for t in range(first, first + txns):
            conn.begin_transaction()
            for i in range(3):
                row = t * 10 + i
                conn.write(f"{row},{row * 100},{'eu' if row % 2 else 'us'}".encode())
            conn.commit_transaction()


def _rows(ms: Metastore) -> list[tuple[int, int, str]]:
    table = ms.table("sales").scan().to_arrow().sort_by("id")
    return list(zip(*(table.column(c).to_pylist() for c in ("id", "amount", "region")), strict=True))


def _dirs(ms: Metastore, region: str) -> list[str]:
    fs, path = pafs.FileSystem.from_uri(ms.table("sales").location)
    return sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(f"{path}/region={region}")))


def test_stream_mutate_and_read(s3_ms: Metastore) -> None:
    ms = s3_ms
    ms.execute(DDL)
    _stream(ms, 1, 4)
    assert len(_rows(ms)) == 12
    ms.table("sales").merge(
        pd.DataFrame({"id": [10, 99], "amount": [-1, 9900], "region": ["us", "eu"]}), on=["id"]
    )
    ms.table("sales").update(pc.field("id") == 11, {"amount": pc.field("amount") + 1})
    assert ms.execute("DELETE FROM sales WHERE id = 12") == [(0, 0, 1)]
    rows = {r[0]: r for r in _rows(ms)}
    assert (
        len(rows) == 12
        and rows[10][1] == -1
        and rows[11][1] == 1101
        and 12 not in rows
        and rows[99][2] == "eu"
    )


def test_compaction_publishes_under_its_txn_and_cleans(s3_ms: Metastore) -> None:
    ms = s3_ms
    ms.execute(DDL)
    _stream(ms, 1, 4)
    ms.execute("DELETE FROM sales WHERE id = 11")
    before = _rows(ms)
    old = ms.table("sales").scan()  # a reader whose snapshot and listing predate the compactions
    minor = ms.table("sales").scan  # noqa: F841 - the next scans are planned after each step
    info = ms.get_compaction(ms.compact("default.sales", "region=eu", kind="minor", wait=True))
    assert info.state == "ready for cleaning"
    assert any(d.endswith(f"_v{info.txn_id:07d}") for d in _dirs(ms, "eu"))
    info = ms.get_compaction(ms.compact("default.sales", "region=eu", kind="major", wait=True))
    assert f"base_0000005_v{info.txn_id:07d}" in _dirs(ms, "eu")
    assert _rows(ms) == before
    assert old.to_arrow().num_rows == len(before)  # its files are still there: it is registered
    old.close()
    removed = [name for o in Cleaner(ms, CompactorConfig(retention=0)).run_once() for name in o.removed]
    assert removed and all(not name.startswith("base_") for name in removed)
    assert [d for d in _dirs(ms, "eu") if not d.startswith("base_")] == []
    assert _rows(ms) == before


def test_a_failed_compaction_leaves_nothing_behind(s3_ms: Metastore) -> None:
    ms = s3_ms
    ms.execute(DDL)
    _stream(ms, 1, 3)
    before, dirs = _rows(ms), _dirs(ms, "us")
    with failing_writes(WriteBudget(capacity=1000)):  # the first bucket file fits, the second does not
        cq_id = ms.compact("default.sales", "region=us", kind="major")
        assert ms.wait_for_compaction(cq_id).state == "failed"
    assert _dirs(ms, "us") == dirs  # its output, written in place, is gone with it
    assert _rows(ms) == before
    info = ms.get_compaction(ms.compact("default.sales", "region=us", kind="major", wait=True))
    assert info.state == "ready for cleaning" and _rows(ms) == before


def test_replication_between_a_local_warehouse_and_s3(s3_ms: Metastore, local_ms: Metastore) -> None:
    """S3 → local after a compaction published in place: the replica names its output without the source's
    visibility suffix (that txn means nothing there); then local → S3."""
    s3_ms.execute(DDL)
    _stream(s3_ms, 1, 3)
    repl.sync(s3_ms, local_ms)
    _stream(s3_ms, 4, 2)
    s3_ms.compact("default.sales", "region=us", kind="major", wait=True)
    repl.sync(s3_ms, local_ms)
    assert _rows(local_ms) == _rows(s3_ms)
    assert "base_0000005" in sorted(p.name for p in _local_dirs(local_ms, "us"))

    source = local_ms
    with Metastore.connect(s3_ms.url, warehouse=s3_ms.warehouse.replace("/wh", "/replica")) as target:
        repl.sync(source, target, policy="back")
        assert _rows(target) == _rows(source)


def _local_dirs(ms: Metastore, region: str) -> list[pa.lib.Path]:  # type: ignore[name-defined]
    from pathlib import Path

    return list((Path(ms.table("sales").location) / f"region={region}").iterdir())


def test_a_missing_bucket_is_named_before_any_txn_opens(metastore_url: str, s3_endpoint: str) -> None:
    with Metastore.connect(metastore_url, warehouse="s3://no-such-acidstream-bucket/wh") as ms:
        with pytest.raises(AcidStreamError, match="no-such-acidstream-bucket"):
            ms.execute(DDL)
        assert ms.show_txns() == []
