"""The worker's outputs, ported from Hive's TestWorker: minor and major, with and without deletes and aborts,
bucketed, partitioned, multi-statement and original files, held back by open transactions.

Every test compares the reader's whole view (rows and ROW__IDs) before and after, and checks the directory names
Hive 3 would produce.
"""

from __future__ import annotations

import json
import operator
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pytest
from compactorhelpers import dirs, hidden, rows_with_ids

from acidstream import Metastore
from acidstream.acid.codec import BucketCodec
from acidstream.acid.selection import get_acid_state
from acidstream.compactor import Compactor, CompactorConfig
from acidstream.compactor.jobs import BucketJob, BucketResult, run_bucket_job
from acidstream.compactor.plan import check_recorded
from acidstream.compactor.worker import SpareCores
from acidstream.errors import CorruptFileError, InvalidObjectException
from read.readhelpers import connect, create, delete_rows, stream

B0, B1 = BucketCodec.V1.encode(0), BucketCodec.V1.encode(1)


def txns(*ids: int, commit: bool = True) -> list[tuple[dict[str, list[object]], bool]]:
    return [({"id": [i, i + 1000], "msg": [f"m{i}", f"n{i}"]}, commit) for i in ids]


def test_minor_compaction_of_deltas_with_deletes_and_aborts(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    stream(ms, "t", txns(3, commit=False))
    stream(ms, "t", txns(4))
    [victim] = [rid for rid, row in rows_with_ids(ms, "db.t") if row[0] == 2]
    delete_rows(ms, "t", [victim])
    before = rows_with_ids(ms, "db.t")
    assert dirs(ms, "db.t") == [
        "delete_delta_0000005_0000005",
        "delta_0000001_0000001",
        "delta_0000002_0000002",
        "delta_0000003_0000003",
        "delta_0000004_0000004",
    ]
    outcome = compactor.compact("db.t", kind="minor")
    assert outcome.info.state == "ready for cleaning"
    assert outcome.rows_written == 6  # the aborted txn's two rows are gone; the deleted row stays (minor)
    assert "delete_delta_0000001_0000005" in dirs(ms, "db.t") and "delta_0000001_0000005" in dirs(ms, "db.t")
    assert rows_with_ids(ms, "db.t") == before
    compactor.clean()
    assert dirs(ms, "db.t") == ["delete_delta_0000001_0000005", "delta_0000001_0000005"]
    assert rows_with_ids(ms, "db.t") == before
    assert hidden(ms, "db.t") == []
    location = Path(ms.table("db.t").location)
    assert (location / "delta_0000001_0000005" / "_orc_acid_version").read_bytes() == b"2"
    assert not (location / "delta_0000001_0000005" / "_metadata_acid").exists()
    deletes = po.ORCFile(str(location / "delete_delta_0000001_0000005" / "bucket_00000")).read().to_pylist()
    assert [
        (d["operation"], d["originalTransaction"], d["currentTransaction"], d["row"]) for d in deletes
    ] == [(2, victim[0], 5, None)]
    assert ms.get_valid_write_ids("db.t").aborted_ids == ()  # no file holds write id 3 any more


def test_major_compaction_keeps_only_live_rows_with_their_row_ids(
    ms: Metastore, compactor: Compactor
) -> None:
    create(ms, "t", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    stream(ms, "t", txns(1, 2, 3), batch=3)
    stream(ms, "t", txns(4, commit=False) + txns(5), batch=2)
    rows = rows_with_ids(ms, "db.t")
    assert {rid[1] for rid, _ in rows} == {B0, B1}
    delete_rows(ms, "t", [rows[0][0], rows[-1][0]])
    before = rows_with_ids(ms, "db.t")
    outcome = compactor.compact("db.t", kind="major")
    assert outcome.info.state == "ready for cleaning" and outcome.rows_written == len(before)
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000006"]
    assert rows_with_ids(ms, "db.t") == before
    base = Path(ms.table("db.t").location) / "base_0000006"
    assert json.loads((base / "_metadata_acid").read_text()) == {
        "thisFileVersion": "0",
        "dataFormat": "compacted",
    }
    assert sorted(p.name for p in base.iterdir()) == [
        "_metadata_acid",
        "_orc_acid_version",
        "bucket_00000",
        "bucket_00001",
    ]
    orc = po.ORCFile(str(base / "bucket_00000"))
    assert (
        orc.compression == "ZLIB" and orc.row_index_stride == 10000 and orc.nstripe_statistics == orc.nstripes
    )
    assert {e["operation"] for e in orc.read().to_pylist()} == {0}
    info = ms.get_compaction(outcome.info.id)
    assert info.state == "succeeded" and info.highest_write_id == 6


def test_stripes_encoded_side_by_side_keep_their_order(ms: Metastore) -> None:
    """One event a stripe, encoded by two threads while the merge goes on: the base holds every live row with
    its ROW__ID, its stripes in key order (the key index names each stripe's last key)."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(*range(1, 9)), batch=2)
    delete_rows(ms, "t", [rows_with_ids(ms, "db.t")[3][0]])
    before = rows_with_ids(ms, "db.t")
    config = CompactorConfig(retention=0, parallelism=2, batch_rows=1, stripe_bytes=1)
    assert Compactor(ms, config).compact("db.t", kind="major").info.state == "ready for cleaning"
    assert rows_with_ids(ms, "db.t") == before
    [base] = [d for d in dirs(ms, "db.t") if d.startswith("base_")]
    orc = po.ORCFile(str(Path(ms.table("db.t").location) / base / "bucket_00000"))
    events = orc.read().to_pylist()
    keys = [(e["originalTransaction"], e["bucket"], e["rowId"]) for e in events]
    assert orc.nstripes == len(before) == len(keys) and keys == sorted(keys)
    index = orc.metadata[b"hive.acid.key.index"].decode()
    assert index == "".join(f"{o},{b},{r};" for o, b, r in keys)


def test_spare_cores_take_work_only_while_fewer_jobs_than_cores_run() -> None:
    """Encodings go to the pool while a core would idle, run in the job's thread while every core has a job;
    either way a failure is raised by result()."""

    def where() -> str:
        return threading.current_thread().name

    with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
        spare = SpareCores(pool, cores=2)
        with spare.running():
            assert spare.submit(where).result().startswith("pool")
            with spare.running():
                assert spare.submit(where).result() == threading.current_thread().name
                failed = spare.submit(operator.truediv, 1, 0)
                assert failed.done()
                with pytest.raises(ZeroDivisionError):
                    failed.result()
            assert spare.submit(where).result().startswith("pool")


@pytest.mark.parametrize("kind", ["major", "minor"])
def test_more_deltas_than_max_num_delta_merge_in_runs_first(ms: Metastore, kind: str) -> None:
    """``hive.compactor.max.num.delta``: 9 deltas, at most 4 at once: two runs of 4 are minor-compacted into
    ``_tmp`` first (Hive's pre-pass), then the request merges their outputs with the ninth. Only the request's
    own output is published; every input goes at cleaning."""
    create(ms, "t", "id int, msg string", "CLUSTERED BY (id) INTO 2 BUCKETS")
    stream(ms, "t", txns(*range(1, 9)))
    delete_rows(ms, "t", [rows_with_ids(ms, "db.t")[5][0]])
    before = rows_with_ids(ms, "db.t")
    merged: list[list[int]] = []  # per call of the job runner: input files per job

    def run_jobs(jobs: Sequence[BucketJob]) -> list[BucketResult]:
        merged.append([len(j.inserts) + len(j.deletes) for j in jobs])
        return [run_bucket_job(j) for j in jobs]

    compactor = Compactor(ms, CompactorConfig(retention=0, max_num_delta=4), run_jobs=run_jobs)
    assert compactor.compact("db.t", kind=kind).info.state == "ready for cleaning"
    assert len(merged) == 3 and all(n <= 4 for run in merged[:2] for n in run)
    assert max(merged[2]) < 9
    assert hidden(ms, "db.t") == []
    assert rows_with_ids(ms, "db.t") == before
    compactor.clean()
    expected = (
        ["base_0000009"] if kind == "major" else ["delete_delta_0000001_0000009", "delta_0000001_0000009"]
    )
    assert dirs(ms, "db.t") == expected
    assert rows_with_ids(ms, "db.t") == before


def test_output_is_compressed_per_the_table(ms: Metastore, compactor: Compactor) -> None:
    ms.execute(
        "CREATE TABLE db.s (id int, msg string) STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true', 'orc.compress'='SNAPPY')"
    )
    stream(ms, "s", txns(1, 2))
    compactor.compact("db.s", kind="major")
    [base] = dirs(ms, "db.s")[:1]
    assert po.ORCFile(str(Path(ms.table("db.s").location) / base / "bucket_00000")).compression == "SNAPPY"


def test_open_transaction_holds_compaction_back(ms: Metastore, compactor: Compactor) -> None:
    """Only deltas wholly below the lowest open write id are compacted (Hive's ValidCompactorWriteIdList)."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    blocker = ms.open_txns(1)[0]
    [(_, open_wid)] = ms.allocate_table_write_ids([blocker], "db.t")
    stream(ms, "t", txns(4, 5))
    before = rows_with_ids(ms, "db.t")
    outcome = compactor.compact("db.t", kind="major")
    assert outcome.info.highest_write_id == open_wid - 1
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000002", "delta_0000004_0000004", "delta_0000005_0000005"]
    assert rows_with_ids(ms, "db.t") == before
    ms.commit_txn(blocker)
    stream(ms, "t", txns(6))
    before = rows_with_ids(ms, "db.t")
    compactor.compact("db.t", kind="minor")
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000002", "delta_0000004_0000006"]
    assert rows_with_ids(ms, "db.t") == before


def test_an_open_batch_keeps_its_delta_out(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    conn = connect(ms, "t", batch=3)
    try:
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": [7], "msg": ["open batch, committed"]}))
        conn.commit_transaction()
        conn.begin_transaction()
        conn.write_batch(pa.table({"id": [8], "msg": ["still open"]}))
        outcome = compactor.compact("db.t", kind="major")
        assert outcome.info.highest_write_id == 3  # write id 4 is open: the batch's delta_3_5 stays
        compactor.clean()
        assert dirs(ms, "db.t") == ["base_0000002", "delta_0000003_0000005"]
        assert sorted(r[1][0] for r in rows_with_ids(ms, "db.t")) == [1, 2, 7, 1001, 1002]
        conn.commit_transaction()
    finally:
        conn.close()
    assert sorted(r[1][0] for r in rows_with_ids(ms, "db.t")) == [1, 2, 7, 8, 1001, 1002]


def test_not_enough_to_compact_is_refused(ms: Metastore, compactor: Compactor) -> None:
    """Minor needs two deltas that are not just one range's insert/delete pair (Hive's isEnoughToCompact);
    major needs a delta or delete delta above its base, or originals; a refused request changes no file."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1))
    assert compactor.compact("db.t", kind="minor").info.state == "refused"
    assert compactor.compact("db.t", kind="major").info.state == "ready for cleaning"  # one delta: a base
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000001"]
    assert compactor.compact("db.t", kind="major").info.state == "refused"  # a base alone
    assert "; it holds base_0000001" in (ms.show_compactions()[-1].error_message or "")
    [victim] = [rid for rid, row in rows_with_ids(ms, "db.t") if row[0] == 1]
    delete_rows(ms, "t", [victim])
    assert compactor.compact("db.t", kind="minor").info.state == "refused"
    assert compactor.compact("db.t", kind="major").info.state == "ready for cleaning"
    # before cleaning, obsolete directories make a no-op request worth publishing (for the cleaner)
    assert compactor.compact("db.t", kind="major").info.state == "ready for cleaning"
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000002"]
    assert compactor.compact("db.t", kind="major").info.state == "refused"
    create(ms, "empty", "id int")
    info = compactor.compact("db.empty", kind="major").info
    assert info.state == "refused" and "nothing to compact: " in (info.error_message or "")


def test_a_major_right_after_a_minor_writes_a_base(ms: Metastore, compactor: Compactor) -> None:
    """The minor merges every delta into one (no delete event: no delete delta); a major asked for at once,
    nothing written in between, still rewrites that delta into a base."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    before = rows_with_ids(ms, "db.t")
    assert compactor.compact("db.t", kind="minor").info.state == "ready for cleaning"
    assert "delta_0000001_0000002" in dirs(ms, "db.t")
    outcome = compactor.compact("db.t", kind="major")
    assert outcome.info.state == "ready for cleaning" and outcome.rows_written == 4
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000002"]
    assert rows_with_ids(ms, "db.t") == before


def test_aborted_only_directories_are_cleaned_without_compacting(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1))
    stream(ms, "t", txns(2, commit=False))
    assert ms.get_valid_write_ids("db.t").aborted_ids == (2,)
    outcome = compactor.compact("db.t", kind="minor")  # one current delta: nothing to merge, but aborted data
    assert outcome.info.state == "ready for cleaning" and outcome.results == ()
    compactor.clean()
    assert dirs(ms, "db.t") == ["delta_0000001_0000001"]
    assert ms.get_valid_write_ids("db.t").aborted_ids == ()


def test_partitioned_table_compacts_one_partition(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "p", "id int, msg string", "PARTITIONED BY (ds string)")
    for ds in ("a", "b"):
        stream(ms, "p", txns(1, 2), static=[ds])
    before = rows_with_ids(ms, "db.p")
    with pytest.raises(InvalidObjectException, match="must specify a partition"):
        compactor.compact("db.p", kind="major")
    compactor.compact("db.p", {"ds": "a"}, "major")
    compactor.clean()
    assert dirs(ms, "db.p", "ds=a") == ["base_0000002"]
    assert dirs(ms, "db.p", "ds=b") == ["delta_0000003_0000003", "delta_0000004_0000004"]
    assert rows_with_ids(ms, "db.p") == before


def test_multi_statement_deltas_merge_by_bucket_property(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1))
    txn = ms.open_txns(1)[0]
    [(_, wid)] = ms.allocate_table_write_ids([txn], "db.t")
    for stmt, ids in ((1, [3]), (0, [1, 2])):
        with connect(ms, "t", write_id=wid, statement_id=stmt) as conn:
            conn.begin_transaction()
            conn.write_batch(pa.table({"id": ids, "msg": [f"s{stmt}"] * len(ids)}))
            conn.commit_transaction()
    ms.commit_txn(txn)
    before = rows_with_ids(ms, "db.t")
    assert {rid[1] for rid, _ in before} == {B0, B0 + 1}
    compactor.compact("db.t", kind="minor")
    compactor.clean()
    assert dirs(ms, "db.t") == ["delta_0000001_0000002"]
    assert rows_with_ids(ms, "db.t") == before
    events = po.ORCFile(
        str(Path(ms.table("db.t").location) / "delta_0000001_0000002" / "bucket_00000")
    ).read()
    keys = list(
        zip(*(events.column(c).to_pylist() for c in ("originalTransaction", "bucket", "rowId")), strict=True)
    )
    assert keys == sorted(keys)


def test_original_files_become_part_of_the_base(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "o", "id int, msg string")
    location = Path(ms.table("db.o").location)
    location.mkdir(parents=True)
    plain = lambda ids: pa.table({"_col0": pa.array(ids, pa.int32()), "_col1": [f"o{i}" for i in ids]})  # noqa: E731
    po.write_table(plain([1, 2]), location / "000000_0")
    po.write_table(plain([3]), location / "000000_0_copy_1")
    po.write_table(plain([4]), location / "000001_0")
    (location / "HIVE_UNION_SUBDIR_1").mkdir()
    po.write_table(plain([5]), location / "HIVE_UNION_SUBDIR_1" / "000002_0")
    stream(ms, "o", txns(9))
    delete_rows(ms, "o", [(0, B0, 1)])
    before = rows_with_ids(ms, "db.o")
    assert ((0, B0, 2), (3, "o3")) in before
    assert compactor.compact("db.o", kind="minor").info.state == "refused"  # originals are major's
    compactor.compact("db.o", kind="major")
    compactor.clean()
    assert dirs(ms, "db.o") == ["base_0000002"]
    assert rows_with_ids(ms, "db.o") == before  # synthetic ROW__IDs made permanent


def test_everything_deleted_leaves_an_empty_base(ms: Metastore, compactor: Compactor) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    delete_rows(ms, "t", [rid for rid, _ in rows_with_ids(ms, "db.t")])
    compactor.compact("db.t", kind="major")
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000003"]
    assert ms.table("db.t").scan().count() == 0
    base = Path(ms.table("db.t").location) / "base_0000003"
    assert sorted(p.name for p in base.iterdir()) == ["_metadata_acid", "_orc_acid_version"]
    # an empty base and a delete delta: no bucket holds an insert, no job to run, a new empty base
    delete_rows(ms, "t", [(1, B0, 0)])
    assert compactor.compact("db.t", kind="major").info.state == "ready for cleaning"
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000004"]


def test_a_failing_compaction_changes_nothing(ms: Metastore, compactor: Compactor) -> None:
    """A corrupt input fails the request: the table reads the same, no output or _tmp is left, failed recorded."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2, 3))
    before = rows_with_ids(ms, "db.t")
    victim = Path(ms.table("db.t").location) / "delta_0000002_0000002" / "bucket_00000"
    data = victim.read_bytes()
    victim.write_bytes(data[:3] + b"\0" * (len(data) - 3))  # same length, stripes destroyed
    info = compactor.compact("db.t", kind="major").info
    assert info.state == "failed" and "CorruptFileError" in (info.error_message or "")
    assert dirs(ms, "db.t") == ["delta_0000001_0000001", "delta_0000002_0000002", "delta_0000003_0000003"]
    assert hidden(ms, "db.t") == []
    victim.write_bytes(data)
    assert rows_with_ids(ms, "db.t") == before
    assert info.txn_id is not None and ms.get_txn_state(info.txn_id).name == "ABORTED"


def test_memory_stays_bounded_by_batches(ms: Metastore) -> None:
    """Each bucket streams through the merge in batches: with 1-row batches no step holds more than one row
    per overlapping input (here the inputs do not overlap: one row at a time)."""
    from acidstream.compactor import event_merge as merge_module

    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(*range(1, 6)))
    seen: list[int] = []
    original = merge_module.merge_sorted

    def spy(sources):  # type: ignore[no-untyped-def]
        for batch in original(sources):
            seen.append(batch.num_rows)
            yield batch

    from acidstream.compactor import jobs

    jobs.merge_sorted = spy  # type: ignore[assignment]
    try:
        before = rows_with_ids(ms, "db.t")
        Compactor(ms, CompactorConfig(retention=0, batch_rows=1, parallelism=1)).compact("db.t", kind="major")
    finally:
        jobs.merge_sorted = original  # type: ignore[assignment]
    assert seen and max(seen) == 1 and sum(seen) == 10
    assert rows_with_ids(ms, "db.t") == before


def test_compaction_on_both_metastore_backends(metastore_url: str, warehouse: Path) -> None:
    with Metastore.connect(metastore_url, warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        create(m, "t", "id int, msg string", "PARTITIONED BY (ds string) CLUSTERED BY (id) INTO 2 BUCKETS")
        stream(m, "t", txns(1, 2, 3) + txns(4, commit=False), static=["x"], batch=2)
        victim = rows_with_ids(m, "db.t")[0][0]
        delete_rows(m, "t", [victim], partition_dir=f"{m.table('db.t').location}/ds=x")
        before = rows_with_ids(m, "db.t")
        compactor = Compactor(m, CompactorConfig(retention=0))
        assert compactor.compact("db.t", "ds=x", "minor").info.state == "ready for cleaning"
        assert compactor.compact("db.t", "ds=x", "major").info.state == "ready for cleaning"
        assert [c.state for c in compactor.clean()] == ["succeeded", "succeeded"]
        assert dirs(m, "db.t", "ds=x") == ["base_0000005"]
        assert rows_with_ids(m, "db.t") == before


def test_recorded_lengths_are_checked_for_bucket_files_only(ms: Metastore) -> None:
    """A writer may list the ``_orc_acid_version`` marker among a commit's files (Spark's writers do): it
    holds no rows, so the check that refuses bucket files shorter than their commit recorded skips it."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1))
    table = ms.table("db.t")
    fs, location = pafs.LocalFileSystem(), table.location
    state = get_acid_state(fs, location, ms.get_valid_write_ids("db.t"))
    [delta] = state.deltas
    bucket = next(p for p in (Path(location) / delta.name).iterdir() if p.name.startswith("bucket_"))
    recorded = {f"{delta.name}/_orc_acid_version": 1, f"{delta.name}/{bucket.name}": bucket.stat().st_size}
    check_recorded(fs, state.deltas, recorded)
    with pytest.raises(CorruptFileError, match="its commit recorded"):
        check_recorded(
            fs, state.deltas, {**recorded, f"{delta.name}/{bucket.name}": bucket.stat().st_size + 1}
        )
