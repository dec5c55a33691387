"""Hive 4 reads back exactly the timestamps before 1970 with a fraction of a second that we write (at the top
level, in structs, inside lists and maps): streamed, updated through the Python API and SQL, merged, and
rewritten by major compaction; and we read Hive-written ones as Hive does (docs/format.md, Event files:
timestamps)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.acid.codec import BucketCodec
from acidstream.acid.orc import AcidWriter, WriterOptions, prepare_directory
from acidstream.acid.types import parse_columns
from acidstream.catalog import Metastore
from hive4.judge import as_hive as judged
from hive4.judge import hive_rows, our_rows
from hive4.referee import Referee

pytestmark = pytest.mark.hive4

#: Around and long before 1970, with fractions of a millisecond and more; the last second before 1970 only
#: where its fraction is under 1 ms (docs/format.md: the one window no ORC reader of Java reads back).
OLD = [
    dt.datetime(1969, 12, 31, 23, 59, 58, 500000),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999),
    dt.datetime(1969, 12, 31, 23, 59, 58, 1),
    dt.datetime(1900, 1, 1, 0, 0, 0, 123456),
    dt.datetime(1677, 9, 22, 0, 0, 0, 1000),
    dt.datetime(1965, 6, 30, 12, 0, 0, 999999),
    dt.datetime(1969, 1, 1),
    dt.datetime(2024, 2, 29, 12, 34, 56, 123456),
]


@pytest.fixture
def ms(tmp_path: Path, warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as m:
        m.execute("CREATE DATABASE db")
        yield m


def as_hive(value: dt.datetime) -> str:
    """How the referee prints a Hive timestamp."""
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")


def test_before_1970_with_fractions(hive4: Referee, ms: Metastore) -> None:
    ms.execute(
        "CREATE TABLE db.t (id int, ts timestamp, st struct<a:int,t:timestamp>) STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    table = ms.table("db.t")
    schema = table.scan().schema
    expected = {i: (ts, ts) for i, ts in enumerate(OLD)}
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table("t")
        .with_transaction_batch_size(3)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter("|").build())
        .connect()
    )

    def check() -> None:
        """Every way Hive reads (row mode and vectorized, default and ETL splits) and ours: the rows written."""
        want = {i: (as_hive(a), as_hive(b)) for i, (a, b) in expected.items()}
        txns = ms.snapshot()
        for vectorized in (False, True):
            for splits in ("hybrid", "etl"):
                rows = hive_rows(hive4, ms, "db.t", txns, vectorized=vectorized, splits=splits)
                assert {r[0]: (r[1], r[2][1]) for _, r in rows} == want, (vectorized, splits)
        ours = {r[0]: (as_hive(r[1]), as_hive(r[2]["t"])) for _, r in our_rows(ms, "db.t", txns)}
        assert ours == want

    with conn:
        for part in (OLD[:4], OLD[4:]):
            conn.begin_transaction()
            first = min(i for i, ts in enumerate(OLD) if ts in part)
            conn.write_batch(
                pa.table(
                    {
                        "id": list(range(first, first + len(part))),
                        "ts": part,
                        "st": [{"a": i, "t": ts} for i, ts in enumerate(part)],
                    },
                    schema=schema,
                )
            )
            conn.commit_transaction()
    check()
    later = dt.datetime(1955, 11, 5, 6, 15, 0, 250000)
    table.update(pc.field("id") == 1, {"ts": pa.scalar(later, pa.timestamp("ns"))})
    expected[1] = (later, expected[1][1])
    check()
    ms.execute("UPDATE db.t SET ts = CAST('1901-12-13 20:45:52.7' AS TIMESTAMP) WHERE id = 2")
    expected[2] = (dt.datetime(1901, 12, 13, 20, 45, 52, 700000), expected[2][1])
    check()
    merged = {3: dt.datetime(1812, 6, 24, 1, 2, 3, 456789), 20: dt.datetime(1969, 12, 31, 23, 59, 57, 1)}
    table.merge(
        pa.table(
            {
                "id": list(merged),
                "ts": list(merged.values()),
                "st": [{"a": i, "t": ts} for i, ts in merged.items()],
            },
            schema=schema,
        ),
        on=["id"],
    )
    expected.update({i: (ts, ts) for i, ts in merged.items()})
    check()
    ms.execute("ALTER TABLE db.t COMPACT 'major' AND WAIT")
    check()


def nested(i: int) -> dict[str, object]:
    """Row ``i``'s list and map columns: a list of old timestamps (null elements, an empty list, a null list),
    the same by name, keyed by them, and in structs in a list."""
    if i % 5 == 4:
        return {"l": None, "m": None, "k": None, "ls": None}
    items: list[dt.datetime | None] = [OLD[(i + j) % len(OLD)] for j in range(i % 4)]
    if i % 3 == 1:
        items.insert(1, None)
    return {
        "l": items,
        "m": [(str(j), ts) for j, ts in enumerate(items)],
        "k": [(ts, j) for j, ts in enumerate(items) if ts is not None],
        "ls": [{"a": j, "t": ts} for j, ts in enumerate(items)],
    }


def test_inside_lists_and_maps(hive4: Referee, ms: Metastore) -> None:
    """Lists and maps of old timestamps (keys and values, structs in lists; null and empty lists, null
    elements, a sliced batch): streamed, updated, merged and compacted, Hive reads back what was written."""
    ms.execute(
        "CREATE TABLE db.n (id int, l array<timestamp>, m map<string,timestamp>, k map<timestamp,int>, "
        "ls array<struct<a:int,t:timestamp>>) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    table = ms.table("db.n")
    schema = table.scan().schema
    names = schema.names
    expected = {i: nested(i) for i in range(12)}

    def batch(rows: dict[int, dict[str, object]], skip: int = 0) -> pa.Table:
        """``rows`` as a table, sliced from one with ``skip`` other rows before them."""
        ids = [-1] * skip + list(rows)
        values = [nested(0)] * skip + list(rows.values())
        columns = {"id": ids, **{n: [v[n] for v in values] for n in names[1:]}}
        return pa.table(columns, schema=schema).slice(skip)

    def check() -> None:
        want = {i: tuple(judged(v[n]) for n in names[1:]) for i, v in expected.items()}
        txns = ms.snapshot()
        for vectorized in (False, True):
            for splits in ("hybrid", "etl"):
                rows = hive_rows(hive4, ms, "db.n", txns, vectorized=vectorized, splits=splits)
                assert {r[0]: canonical(r[1:]) for _, r in rows} == canonical_all(want), (vectorized, splits)
        ours = {r[0]: tuple(judged(v) for v in r[1:]) for _, r in our_rows(ms, "db.n", txns)}
        assert canonical_all(ours) == canonical_all(want)

    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table("n")
        .with_record_writer(StrictDelimitedInputWriter.builder().build())
        .connect()
    )
    with conn:
        for first, end in ((0, 5), (5, 12)):
            conn.begin_transaction()
            conn.write_batch(batch({i: expected[i] for i in range(first, end)}, skip=first % 3 + 1))
            conn.commit_transaction()
    check()
    table.update(pc.field("id") == 1, {"l": pa.scalar(nested(7)["l"], schema.field("l").type)})
    expected[1] = {**expected[1], "l": nested(7)["l"]}
    check()
    merged = {3: nested(10), 20: nested(6)}
    table.merge(batch(merged, skip=2), on=["id"])
    expected.update(merged)
    check()
    ms.execute("ALTER TABLE db.n COMPACT 'major' AND WAIT")
    check()


def canonical(values: Sequence[Any]) -> tuple[Any, ...]:
    """A row's list and map columns as the referee prints them, maps' pairs in order (Hive's maps keep none)."""
    lists, m, k, ls = values
    return (lists, sort_pairs(m), sort_pairs(k), ls)


def canonical_all(rows: dict[int, tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    return {i: canonical(v) for i, v in rows.items()}


def sort_pairs(pairs: list[Any] | None) -> list[Any] | None:
    return None if pairs is None else sorted(pairs, key=repr)


def test_hive_written(hive4: Referee, ms: Metastore) -> None:
    """What Hive's writer (``OrcRecordUpdater``) stores before 1970, the last second before it included, we read
    as Hive does."""
    ms.execute(
        "CREATE TABLE db.h (id int, ts timestamp) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    values = [*OLD, dt.datetime(1969, 12, 31, 23, 59, 59, 500000)]
    [txn] = ms.open_txns(1)
    [(_, write_id)] = ms.allocate_table_write_ids([txn], "db.h")
    hive4.write(
        ms.table("db.h").location,
        [("id", "int"), ("ts", "timestamp")],
        [("insert", write_id, [i, as_hive(ts)]) for i, ts in enumerate(values)],
        bucket=0,
        min_write_id=write_id,
        max_write_id=write_id,
        statement_id=0,
    )
    ms.commit_txn(txn)
    txns = ms.snapshot()
    theirs = {r[0]: r[1] for _, r in hive_rows(hive4, ms, "db.h", txns, splits="etl")}
    ours = {r[0]: as_hive(r[1]) for _, r in our_rows(ms, "db.h", txns)}
    assert ours == theirs
    assert theirs == {i: as_hive(ts) for i, ts in enumerate(OLD)} | {len(OLD): "1970-01-01 00:00:00.5"}


#: 1678 to 2261, the years of int64 nanoseconds; near, long before and after 1970.
NANOS = st.one_of(
    st.integers(-9_214_560_000 * 10**9, 9_214_560_000 * 10**9),
    st.integers(-5 * 10**9, 5 * 10**9),
    st.integers(-(10**9) - 10**6, -(10**9) + 10**6),
)


def hive_text(nanos: int) -> str:
    """A timestamp as Hive prints it: nanoseconds, trailing zeros dropped."""
    seconds, fraction = divmod(nanos, 10**9)
    text = (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{fraction:09d}".rstrip("0") if fraction else "")


def readable(nanos: int) -> bool:
    """All but the last second before 1970 with a fraction of 1 ms or more (docs/format.md)."""
    return not (-(10**9) < nanos < 0 and nanos % 10**9 > 999_999)


def keyed(values: list[int | None]) -> list[tuple[int, int]]:
    """A map keyed by ``values``' distinct non-null ones (a Hive map keeps one entry of a key), to their
    first positions."""
    first: dict[int, int] = {}
    for j, v in enumerate(values):
        if v is not None:
            first.setdefault(v, j)
    return list(first.items())


@given(
    st.lists(st.one_of(st.none(), NANOS.filter(readable)), min_size=1, max_size=30),
    st.booleans(),
    st.lists(st.integers(0, 4), min_size=1, max_size=30),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_timestamp_reads_back_in_hive(
    hive4: Referee, tmp_path: Path, values: list[int | None], base: bool, lengths: list[int]
) -> None:
    """Whatever timestamps we write (a delta, or a base with a row index as compaction writes) Hive 4 reads
    exactly, at the top level, in a struct, and inside lists and maps (``lengths``: each row's list takes
    that many of ``values`` from where the row before ended, 4 for a null list; the rows are a slice)."""
    table = tmp_path / uuid.uuid4().hex
    directory = table / ("base_0000001" if base else "delta_0000001_0000001_0000")
    fs = pafs.LocalFileSystem()
    prepare_directory(fs, str(directory))
    cols = parse_columns(
        "id int, ts timestamp, st struct<t:timestamp>, l array<timestamp>, m map<int,timestamp>, "
        "k map<timestamp,int>"
    )
    lists: list[list[int | None] | None] = [None]  # a row before the slice
    start = 0
    for i in range(len(values)):
        n = lengths[i % len(lengths)]
        lists.append(None if n == 4 else [values[(start + j) % len(values)] for j in range(n)])
        start += n
    rows = pa.table(
        {
            "id": pa.array([-1, *range(len(values))], pa.int32()),
            "ts": pa.array([None, *values], pa.timestamp("ns")),
            "st": pa.array([None, *({"t": v} for v in values)], cols[2].type.to_arrow()),
            "l": pa.array(lists, cols[3].type.to_arrow()),
            "m": pa.array(
                [None if x is None else list(enumerate(x)) for x in lists], cols[4].type.to_arrow()
            ),
            "k": pa.array([None if x is None else keyed(x) for x in lists], cols[5].type.to_arrow()),
        }
    ).slice(1)
    w = AcidWriter(
        fs, str(directory / "bucket_00000"), cols, options=WriterOptions(is_base=base), side_file=False
    )
    w.insert(1, BucketCodec.V1.encode(0, 0), rows)
    w.close()
    columns = [(c.name, str(c.type)) for c in cols]

    def text(v: int | None) -> str | None:
        return None if v is None else hive_text(v)

    want = [
        (
            i,
            text(v),
            [text(v)],
            None if x is None else [text(e) for e in x],
            None if x is None else sorted([j, text(e)] for j, e in enumerate(x)),
            None if x is None else sorted([text(e), j] for e, j in keyed(x)),
        )
        for i, (v, x) in enumerate(zip(values, lists[1:], strict=True))
    ]
    for splits in ("hybrid", "etl"):
        got = hive4.read(
            table, columns, "default.t:1:9223372036854775807::", "1:9223372036854775807::", splits=splits
        )
        assert [
            (*r[:4], None if r[4] is None else sorted(r[4]), None if r[5] is None else sorted(r[5]))
            for _, r in got
        ] == want
