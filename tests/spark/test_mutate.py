"""Spark's merge, update and delete: the same tables as the Python API and pandas give, one txn, nothing on failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from acidstream import spark as acid
from acidstream.catalog import Metastore
from acidstream.errors import BucketIdException, InvalidObjectException, SerializationError, WorkerException
from acidstream.metastore import TxnStatus
from acidstream.mutate.apply import DELETE, INSERT, OP
from acidstream.mutate.merge import TableMutation
from acidstream.spark.commit import remove_attempts
from acidstream.spark.mutate import by_bucket, driver, join
from acidstream.spark.mutate.driver import publish
from acidstream.spark.mutate.stages import BUCKET, attempt_staging, keep_keys, write_mutations
from acidstream.spark.read import PARTITION_NAME
from acidstream.spark.task_write import ATTEMPTS_DIR
from support.accounts import ACCOUNTS_DDL, frame, table_frame


@pytest.fixture
def twins(ms: Metastore) -> tuple[str, str]:
    """Two identical tables: one mutated through Spark, one through the Python API."""
    for name in ("by_spark", "by_python"):
        ms.execute(ACCOUNTS_DDL.format(f"testing.{name}"))
        ms.table(f"testing.{name}").merge(frame(list(range(200)), "a"), on=["id"])
    return "testing.by_spark", "testing.by_python"


@pytest.fixture
def spread(acid_spark: Any) -> Any:
    """The session with Spark's adaptive coalescing off: small test data still spreads over several tasks."""
    key = "spark.sql.adaptive.coalescePartitions.enabled"
    acid_spark.conf.set(key, "false")
    yield acid_spark
    acid_spark.conf.unset(key)


def no_open_txns(ms: Metastore) -> bool:
    return all(t.state is not TxnStatus.OPEN for t in ms.show_txns())


#: The ways a Spark merge runs: split by bucket (the source shipped to the tasks, or shuffled to them), or as
#: a join (keys pushed into the target's read, or too many keys: a semi-join in Spark).
MERGE_PATHS = ["bucket-shipped", "bucket-shuffled", "join-pushed", "join-semi"]


@pytest.fixture(params=MERGE_PATHS)
def merge_path(request: pytest.FixtureRequest, spread: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The session, set so that merges on the tests' bucketed tables take each path in turn."""
    path = request.param
    if path.startswith("join"):
        monkeypatch.setattr(driver, "splits_by_bucket", lambda *args: False)
    if path == "join-semi":
        monkeypatch.setattr(join, "MAX_PUSHED_KEYS", 59)  # the sources have more keys
    threshold = "spark.sql.autoBroadcastJoinThreshold"
    if path == "bucket-shuffled":  # no source is small enough to ship
        spread.conf.set(threshold, "-1")
    yield spread
    spread.conf.unset(threshold)


def test_merge_equals_the_python_merge_and_pandas(
    merge_path: Any, ms: Metastore, opts: dict[str, str], twins: tuple[str, str]
) -> None:
    spread = merge_path
    by_spark, by_python = twins
    before = table_frame(ms, by_spark)
    rng = np.random.default_rng(11)
    changed = sorted(rng.choice(200, 60, replace=False).tolist())
    source = pd.concat([frame(changed, "b"), frame(list(range(200, 230)), "new", ["p1"] * 10 + ["p9"] * 20)])
    counts = acid.merge(spread, by_spark, spread.createDataFrame(source), on=["id"], **opts)
    assert counts == {"inserted": 30, "updated": 60, "deleted": 0}
    assert ms.table(by_python).merge(source, on=["id"]) == counts

    expected = (
        pd.concat([before[~before.id.isin(source.id)], source]).sort_values("id").reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(table_frame(ms, by_spark), expected)
    pd.testing.assert_frame_equal(table_frame(ms, by_spark), table_frame(ms, by_python))
    assert "p=p9" in {p.name for p in ms.list_partitions(by_spark)}

    rows = ms.table(by_spark).scan(columns=["id"], with_row_id=True).to_arrow().to_pylist()
    untouched = {r["ROW__ID"]["writeid"] for r in rows if r["id"] not in set(source.id)}
    assert untouched == {1}  # rows outside the change set keep their ROW__IDs
    deltas = {d.name for d in Path(ms.table(by_spark).location).glob("p=*/*delta_0000002_0000002_*")}
    assert len({d.rsplit("_", 1)[1] for d in deltas}) > 1  # several tasks wrote, each with its statement id


def test_merge_with_deletes_of_missing_rows_and_a_partial_source(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], twins: tuple[str, str]
) -> None:
    by_spark, by_python = twins
    source = pd.DataFrame(
        {"ID": list(range(150, 250)), "Score": [-1.0] * 100, "p": [f"p{i % 3}" for i in range(150, 250)]}
    )
    kwargs: dict[str, Any] = {"on": ["id"], "when_not_matched_by_source": "delete"}
    counts = acid.merge(acid_spark, by_spark, acid_spark.createDataFrame(source), **kwargs, **opts)
    assert counts == {"inserted": 50, "updated": 50, "deleted": 150}
    assert ms.table(by_python).merge(source, **kwargs) == counts
    result = table_frame(ms, by_spark)
    pd.testing.assert_frame_equal(result, table_frame(ms, by_python))
    assert result.id.tolist() == list(range(150, 250)) and set(result.score) == {-1.0}
    assert result.name.tolist()[:50] == [f"a{i}" for i in range(150, 200)]  # kept: the source lacks it
    assert result.name.iloc[50:].isna().all()

    keys = acid_spark.createDataFrame(pd.DataFrame({"id": [150, 151, 999]}))
    counts = acid.merge(
        acid_spark, by_spark, keys, on=["id"], when_matched="delete", when_not_matched=None, **opts
    )
    assert counts == {"inserted": 0, "updated": 0, "deleted": 2}
    assert table_frame(ms, by_spark).id.tolist() == list(range(152, 250))


def test_delete_and_update_by_condition(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], twins: tuple[str, str]
) -> None:
    from pyspark.sql import functions as F

    by_spark, by_python = twins
    counts = acid.update(
        acid_spark, by_spark, "id < 10 OR p = 'p2'", {"score": "score * 2", "name": F.lit("cut")}, **opts
    )
    assert counts == {"inserted": 0, "updated": 73, "deleted": 0}
    assert (
        ms.table(by_python).update(
            (pc.field("id") < 10) | (pc.field("p") == "p2"), {"score": pc.field("score") * 2, "name": "cut"}
        )
        == counts
    )
    assert acid.delete(acid_spark, by_spark, F.col("p") == "p1", **opts) == {
        "inserted": 0,
        "updated": 0,
        "deleted": 67,
    }
    ms.table(by_python).delete(pc.field("p") == "p1")
    assert acid.update(acid_spark, by_spark, None, {"name": "concat(name, '!')"}, **opts)["updated"] == 133
    ms.table(by_python).update(None, {"name": pc.binary_join_element_wise(pc.field("name"), "!", "")})
    pd.testing.assert_frame_equal(table_frame(ms, by_spark), table_frame(ms, by_python))
    assert acid.delete(acid_spark, by_spark, **opts)["deleted"] == 133
    assert table_frame(ms, by_spark).empty


@pytest.mark.parametrize("merge_path", ["bucket-shuffled", "join-pushed"], indirect=True)
def test_a_failure_partway_aborts_the_whole_merge(
    merge_path: Any, ms: Metastore, opts: dict[str, str], twins: tuple[str, str]
) -> None:
    """Directories stand where the merge's bucket files of partition p1 must go: the tasks write into their
    attempts' own directories, the driver fails to move p1's files in, and nothing of the merge becomes
    visible (its txn aborted)."""
    spread = merge_path
    by_spark, _ = twins
    before = table_frame(ms, by_spark)
    p1 = Path(ms.table(by_spark).location) / "p=p1"
    blockers = [
        p1 / f"{kind}_0000002_0000002_{s:04d}" / f"bucket_{b:05d}"
        for kind in ("delta", "delete_delta")
        for s in range(8)
        for b in range(4)
    ]
    for blocker in blockers:
        blocker.mkdir(parents=True)
    source = spread.createDataFrame(frame(list(range(0, 300, 2)), "x"))
    with pytest.raises(WorkerException, match="p1"):
        acid.merge(spread, by_spark, source, on=["id"], **opts)
    pd.testing.assert_frame_equal(table_frame(ms, by_spark), before)
    assert no_open_txns(ms)
    write_ids = ms.get_valid_write_ids(by_spark)
    assert write_ids.is_write_id_aborted(2)

    for blocker in blockers:
        blocker.rmdir()
    assert acid.merge(spread, by_spark, source, on=["id"], **opts) == {
        "inserted": 50,
        "updated": 100,
        "deleted": 0,
    }


def test_two_source_rows_of_one_key_are_refused(
    merge_path: Any, ms: Metastore, opts: dict[str, str], twins: tuple[str, str]
) -> None:
    """Whether the key matches a target row (2) or not (300), on every path, as the Python merge refuses it."""
    by_spark, _ = twins
    before = table_frame(ms, by_spark)
    for ids, key in (([5, 2, 300, 2], 2), ([300, 5, 300], 300)):
        source = merge_path.createDataFrame(frame(ids, "dup"))
        refused = rf"both (match the target row with|hold the key) \{{'id': {key}\}}"
        for when_matched in ("update", None):
            with pytest.raises(InvalidObjectException, match=refused):
                acid.merge(merge_path, by_spark, source, on=["id"], when_matched=when_matched, **opts)
        with pytest.raises(InvalidObjectException, match=refused):
            acid.merge(merge_path, by_spark, source, on=["id"], when_not_matched_by_source="delete", **opts)
    pd.testing.assert_frame_equal(table_frame(ms, by_spark), before)
    assert no_open_txns(ms)


def test_rows_never_move_and_bad_sources_are_refused(
    acid_spark: Any, ms: Metastore, opts: dict[str, str], twins: tuple[str, str]
) -> None:
    by_spark, _ = twins
    moved = acid_spark.createDataFrame(frame([1], "m", ["p7"]))
    with pytest.raises(InvalidObjectException, match="move a row from p=p1 to p7"):
        acid.merge(acid_spark, by_spark, moved, on=["id"], **opts)
    with pytest.raises(InvalidObjectException, match="bucketed column"):
        acid.update(acid_spark, by_spark, None, {"id": 5}, **opts)
    with pytest.raises(InvalidObjectException, match="partition key"):
        acid.update(acid_spark, by_spark, "id = 1", {"p": "'x'"}, **opts)
    with pytest.raises(SerializationError, match="bogus"):
        acid.merge(
            acid_spark,
            by_spark,
            acid_spark.createDataFrame(pd.DataFrame({"id": [1], "bogus": [1]})),
            on=["id"],
            **opts,
        )
    with pytest.raises(SerializationError, match="field 'score'"):
        bad = acid_spark.createDataFrame(pd.DataFrame({"id": [1000], "score": ["lots"], "p": ["p0"]}))
        acid.merge(acid_spark, by_spark, bad, on=["id"], **opts)

    ms.execute(
        "CREATE TABLE testing.byname (id bigint, name string) CLUSTERED BY (name) INTO 8 BUCKETS "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    named = "testing.byname"
    ms.table(named).merge(
        pd.DataFrame({"id": list(range(20)), "name": [f"n{i}" for i in range(20)]}), on=["id"]
    )
    renamed = acid_spark.createDataFrame(
        pd.DataFrame({"id": list(range(20)), "name": [f"m{i}" for i in range(20)]})
    )
    with pytest.raises(BucketIdException, match="rows never move between buckets"):
        acid.merge(acid_spark, named, renamed, on=["id"], **opts)
    assert sorted(ms.table(named).scan().to_pandas().name) == sorted(f"n{i}" for i in range(20))
    assert no_open_txns(ms)


def test_a_read_keeps_the_rows_whose_key_columns_hold_pushed_values() -> None:
    """Each key column filtered on its own (a superset of the join's matches, which Spark then makes exact);
    null never matches; batches gathered across the gathering size give the same rows."""
    keys = pa.table({"id": [1, 2, None], "p": ["a", "b", "b"]})
    rows = pa.table({"id": [1, 2, 1, 3, None, 2], "p": ["a", "a", "c", "a", "b", "b"], "v": range(6)})
    for gather in (1, 4, 100):
        kept = pa.Table.from_batches(list(keep_keys(rows.to_batches(max_chunksize=2), keys, gather)))
        assert kept.column("v").to_pylist() == [0, 1, 5]


def mutations(rows: list[tuple[int, str]], table: Any) -> pa.RecordBatch:
    """Insert mutation rows (id, partition) as the write stage receives them, sorted."""
    from acidstream.mutate import BucketIdResolver

    data = pa.table({"id": [i for i, _ in rows], "name": ["r"] * len(rows), "score": [0.0] * len(rows)})
    attached = BucketIdResolver(table).attach_batch(data)
    buckets = [r["bucketid"] >> 16 & 0xFFF for r in attached.column("ROW__ID").to_pylist()]
    batch = attached.select(["ROW__ID", "id", "name", "score"]).append_column(
        PARTITION_NAME, pa.array([f"p={p}" for _, p in rows])
    )
    batch = batch.append_column(BUCKET, pa.array(buckets, pa.int32()))
    batch = batch.append_column(OP, pa.array([INSERT] * len(rows), pa.int8()))
    return (
        batch.sort_by([(PARTITION_NAME, "ascending"), (BUCKET, "ascending")]).combine_chunks().to_batches()[0]
    )


def test_only_the_attempts_spark_took_are_published(ms: Metastore) -> None:
    """Attempt 0 of statement 0 wrote p0 and p1, then died unreported; its retry writes p0 only (other input),
    and a copy of statement 1 lost its race: only the reported attempts' files reach the table, each attempt
    having written below its own directory, and no attempt's directory is left once the job is over."""
    ms.execute(ACCOUNTS_DDL.format("testing.retried"))
    location = ms.table("testing.retried").location
    with TableMutation(ms, "testing.retried") as m:
        acid_table = m.acid_table

        def attempt(statement: int, number: int, rows: list[tuple[int, str]]) -> tuple[Any, str]:
            staging = attempt_staging(acid_table, statement, number)  # outside Spark: named by the number
            written = write_mutations(acid_table, ms, statement, staging, [mutations(rows, acid_table.table)])
            return written, staging

        attempt(0, 0, [(1, "p0"), (2, "p1")])
        retry = attempt(0, 1, [(1, "p0"), (3, "p0")])
        other = attempt(1, 0, [(7, "p2")])
        attempt(1, 1, [(8, "p2")])  # a losing copy (its input differs, to tell its rows apart)
        assert all(Path(s).is_dir() for s in (retry[1], other[1]))
        assert m.commit(publish(acid_table, [retry, other])) == {"inserted": 3, "updated": 0, "deleted": 0}
        remove_attempts(location, acid_table.write_id)
    assert table_frame(ms, "testing.retried")[["id", "p"]].values.tolist() == [
        [1, "p0"],
        [3, "p0"],
        [7, "p2"],
    ]
    table_dir = Path(location.removeprefix("file://"))
    assert not list((table_dir / "p=p1").glob("*"))
    assert not (table_dir / ATTEMPTS_DIR).exists()


def test_a_second_mutation_of_one_row_in_a_task_is_refused(ms: Metastore) -> None:
    """Across batch boundaries too: sorted, a ROW__ID twice means two source rows matched it."""
    ms.execute(ACCOUNTS_DDL.format("testing.twice"))
    ms.table("testing.twice").merge(frame([4], "a", ["p0"]), on=["id"])
    [row_id] = (
        ms.table("testing.twice")
        .scan(columns=["id"], with_row_id=True)
        .to_arrow()
        .column("ROW__ID")
        .to_pylist()
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "ROW__ID": pa.array(
                [row_id],
                pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())]),
            ),
            "id": pa.array([4], pa.int64()),
            PARTITION_NAME: ["p=p0"],
            BUCKET: pa.array([row_id["bucketid"] >> 16 & 0xFFF], pa.int32()),
            OP: pa.array([DELETE], pa.int8()),
        }
    )
    with TableMutation(ms, "testing.twice") as m, pytest.raises(InvalidObjectException, match=r"\{'id': 4\}"):
        write_mutations(m.acid_table, ms, 0, attempt_staging(m.acid_table, 0, 0), [batch, batch], keys=["id"])


def test_typed_columns_on_an_unpartitioned_unbucketed_table(
    acid_spark: Any, ms: Metastore, opts: dict[str, str]
) -> None:
    import datetime as dt
    from decimal import Decimal

    for name in ("typed_spark", "typed_python"):
        ms.execute(
            f"CREATE TABLE testing.{name} (k int, ts timestamp, amount decimal(10,2), d date, ok boolean) "
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )

    def rows(keys: list[int], day: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "k": keys,
                "ts": [dt.datetime(2024, 1, day, k % 24, 30) for k in keys],
                "amount": [Decimal(f"{k}.{day:02d}") for k in keys],
                "d": [dt.date(2024, 2, day) for _ in keys],
                "ok": [k % 2 == 0 for k in keys],
            }
        )

    for name in ("typed_spark", "typed_python"):
        ms.table(f"testing.{name}").merge(rows(list(range(10)), 1), on=["k"])
    source = rows(list(range(5, 15)), 2)
    counts = acid.merge(
        acid_spark,
        "testing.typed_spark",
        acid_spark.createDataFrame(source),
        on=["k"],
        when_not_matched_by_source="delete",
        **opts,
    )
    assert counts == {"inserted": 5, "updated": 5, "deleted": 5}
    assert (
        ms.table("testing.typed_python").merge(source, on=["k"], when_not_matched_by_source="delete")
        == counts
    )
    spark_rows = ms.table("testing.typed_spark").scan().to_pandas().sort_values("k").reset_index(drop=True)
    python_rows = ms.table("testing.typed_python").scan().to_pandas().sort_values("k").reset_index(drop=True)
    pd.testing.assert_frame_equal(spark_rows, python_rows)
    assert spark_rows.amount.tolist() == source.amount.tolist()

    # keys of a timestamp and a decimal pushed into the read: 3 rows match on both, 2 on k only (inserted)
    source = rows(list(range(10, 15)), 2).assign(amount=[Decimal(f"{k}.99") for k in range(10, 15)])
    source.loc[3:, "ts"] = dt.datetime(2000, 1, 1)
    counts = acid.merge(
        acid_spark, "testing.typed_spark", acid_spark.createDataFrame(source), on=["k", "ts"], **opts
    )
    assert counts == {"inserted": 2, "updated": 3, "deleted": 0}
    assert ms.table("testing.typed_python").merge(source, on=["k", "ts"]) == counts
    spark_rows = (
        ms.table("testing.typed_spark").scan().to_pandas().sort_values(["k", "ts"]).reset_index(drop=True)
    )
    python_rows = (
        ms.table("testing.typed_python").scan().to_pandas().sort_values(["k", "ts"]).reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(spark_rows, python_rows)


@pytest.mark.parametrize("merge_path", ["bucket-shipped", "bucket-shuffled"], indirect=True)
def test_typed_keys_of_a_table_bucketed_on_them_split_by_bucket(
    merge_path: Any, ms: Metastore, opts: dict[str, str]
) -> None:
    """Timestamp and decimal keys cross Spark's types on their way to their bucket's task and still hash and
    match as the Python merge's; the source's column names differ in case from the table's."""
    import datetime as dt
    from decimal import Decimal

    spark = merge_path
    for name in ("tb_spark", "tb_python"):
        ms.execute(
            f"CREATE TABLE testing.{name} (k int, ts timestamp, amount decimal(10,2)) "
            "PARTITIONED BY (d date) CLUSTERED BY (k, ts) INTO 3 BUCKETS "  # Hive's writers agree: a split
            "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )

    def rows(keys: list[int], cents: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "K": keys,
                "ts": [dt.datetime(2024, 1, 1 + k % 3, k % 24, 30, 0, 123456) for k in keys],
                "amount": [Decimal(f"{k}.{cents:02d}") for k in keys],
                "d": [dt.date(2024, 2, 1 + k % 2) for k in keys],
            }
        )

    for name in ("tb_spark", "tb_python"):
        ms.table(f"testing.{name}").merge(rows(list(range(30)), 1), on=["k", "ts"])
    source = rows(list(range(20, 40)), 2)
    counts = acid.merge(spark, "testing.tb_spark", spark.createDataFrame(source), on=["k", "ts"], **opts)
    assert counts == {"inserted": 10, "updated": 10, "deleted": 0}
    assert ms.table("testing.tb_python").merge(source, on=["k", "ts"]) == counts
    by_spark, by_python = (
        ms.table(f"testing.{name}").scan(with_row_id=True).to_pandas().sort_values("k").reset_index(drop=True)
        for name in ("tb_spark", "tb_python")
    )
    pd.testing.assert_frame_equal(by_spark.drop(columns="ROW__ID"), by_python.drop(columns="ROW__ID"))

    def buckets(frame: pd.DataFrame) -> list[int]:
        return [r["bucketid"] >> 16 & 0xFFF for r in frame.ROW__ID]

    assert buckets(by_spark) == buckets(by_python) and len(set(buckets(by_spark))) == 3
    assert by_spark.amount.tolist()[20:] == source.amount.tolist()


def test_a_small_source_is_shipped_to_the_tasks_a_large_one_shuffled(
    acid_spark: Any, ms: Metastore, twins: tuple[str, str]
) -> None:
    """The split follows Spark's broadcast threshold: a source Spark estimates under it is collected once and
    each task gets its buckets' rows; over it (or with broadcasts off), the source is shuffled by bucket."""
    from acidstream.mutate.bucket_merge import BucketMerge
    from acidstream.mutate.changes import MergeActions

    by_spark, _ = twins
    source = acid_spark.createDataFrame(frame(list(range(0, 100, 3)), "s"))
    with TableMutation(ms, by_spark) as m:
        split = BucketMerge(m.changes, MergeActions(), ("id",), ("id",), m.valid_write_ids(), (), {})
        task_of = (0, 1, 1, 0)
        shipped = by_bucket._shipped_source(acid_spark, source, split, ["id", "name", "score", "p"], task_of)
        assert shipped is not None and sum(t.num_rows for t in shipped) == 34
        for task, rows in enumerate(shipped):
            assert {task_of[b] for b in rows.column(BUCKET).to_pylist()} == {task}
        key = "spark.sql.autoBroadcastJoinThreshold"
        for setting in ("-1", "10b"):
            acid_spark.conf.set(key, setting)
            try:
                assert by_bucket._shipped_source(acid_spark, source, split, ["id"], task_of) is None
            finally:
                acid_spark.conf.unset(key)


def test_buckets_spread_over_tasks_by_their_bytes() -> None:
    task_of = by_bucket.bucket_tasks({0: 100, 1: 10, 2: 10, 3: 80, 4: 5}, 6, parallelism=2)
    assert len(task_of) == 6 and set(task_of) == {0, 1}
    loads = [
        sum(size for b, size in {0: 100, 1: 10, 2: 10, 3: 80, 4: 5}.items() if task_of[b] == t)
        for t in (0, 1)
    ]
    assert sorted(loads) == [100, 105]
    assert by_bucket.bucket_tasks({}, 2, parallelism=8) == (0, 1)  # never more tasks than buckets
    big = join.READ_TASK_BYTES
    assert max(by_bucket.bucket_tasks({b: big for b in range(8)}, 8, parallelism=2)) == 7  # a task per GiB
    assert by_bucket._size_setting("10485760b") == by_bucket._size_setting("10MB") == 10 << 20
    assert by_bucket._size_setting("-1") == -1
