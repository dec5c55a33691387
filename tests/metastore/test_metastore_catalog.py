"""Catalog and the DDL subset: databases, tables in every Hive type, partitions, typed errors, on every backend
(SQLite, PostgreSQL, Hive 4's metastore); what only acidstream's own metastore has is in ``TestSqlBackendOnly``."""

from __future__ import annotations

import re
import sqlite3
import threading
from pathlib import Path

import pytest

from acidstream.acid.types import Column, parse_type
from acidstream.errors import (
    AlreadyExistsException,
    DdlSyntaxError,
    InvalidObjectException,
    MetaException,
    NoSuchObjectException,
)
from acidstream.metastore import MetastoreFacade, TableHandle
from support.backends import is_hive

ALL_TYPES = (
    "a tinyint, b smallint, c int, d bigint, e boolean, f float, g double, h string, i decimal(12,3), "
    "j char(5), k varchar(20), l timestamp, m date, n binary, o array<int>, p map<string,double>, "
    "q struct<x:int,y:array<string>>"
)


def test_create_table_with_every_type(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    ms.execute(
        f"CREATE TABLE IF NOT EXISTS {db}.all_types ({ALL_TYPES} COMMENT 'last') PARTITIONED BY (ds string, hr int) "
        "CLUSTERED BY (c, h) INTO 8 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true', 'x'='y');"
    )
    t = ms.table(f"{db}.all_types")
    assert [str(c) for c in t.columns] == [
        f"{c.name} {c.type}"
        for c in (Column(n, parse_type(ty)) for n, ty in (x.strip().split(" ", 1) for x in _split(ALL_TYPES)))
    ]
    assert t.columns[-1].comment == "last"
    assert [c.name for c in t.partition_keys] == ["ds", "hr"]
    assert (t.bucket_columns, t.num_buckets, t.bucketing_version) == (("c", "h"), 8, 2)
    expected = {"transactional": "true", "x": "y", "bucketing_version": "2"}
    if is_hive(ms):  # Hive's metastore adds its own bookkeeping (transient_lastDdlTime, ...)
        assert t.properties.items() >= expected.items()
    else:
        assert t.properties == expected
    assert t.location.endswith(f"/{db}.db/all_types")
    assert (t.full_name, t.is_transactional, t.is_partitioned) == (f"{db}.all_types", True, True)
    assert len(t.all_columns) == 19
    assert t.metastore is ms
    ms.execute(f"CREATE TABLE IF NOT EXISTS {db}.all_types (z int)")  # no-op
    assert ms.table(f"{db}.all_types") == t


def _split(cols: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in cols:
        depth += ch in "<("
        depth -= ch in ">)"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def test_default_database_location_and_insert_only(metastore: MetastoreFacade, db: str) -> None:
    if is_hive(metastore):  # our Hive backend creates full-ACID tables only (Hive's own writers do the rest)
        with pytest.raises(InvalidObjectException, match="is not a full-ACID table"):
            metastore.create_table(
                "default",
                f"{db}io",
                [Column("id", parse_type("int"))],
                properties={"transactional": "true", "transactional_properties": "insert_only"},
            )
        return
    t = metastore.create_table(
        "default",
        f"{db}io",
        [Column("id", parse_type("int"))],
        properties={"transactional": "true", "transactional_properties": "insert_only"},
    )
    try:
        assert t.location.endswith(f"/{db}io") and f".db/{db}io" not in t.location
        assert not t.is_transactional
    finally:
        metastore.drop_table(f"default.{db}io")


def test_show_describe_alter_drop(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    assert {(db,), ("default",)} <= set(ms.execute("SHOW DATABASES") or ())
    assert ms.execute(f"show tables in {db}") == [("t",), ("u",)]
    ms.execute(f"ALTER TABLE {db}.u SET TBLPROPERTIES ('k'='v')")
    assert ms.table(f"{db}.u").properties["k"] == "v"
    rows = ms.execute(f"DESCRIBE {db}.t")
    assert rows == [
        ("id", "int", ""),
        ("msg", "string", ""),
        ("# Partition Information", "", ""),
        ("# col_name", "data_type", "comment"),
        ("ds", "string", ""),
    ]
    formatted = ms.execute(f"DESCRIBE FORMATTED {db}.u")
    assert formatted is not None and ("", "k", "v") in formatted
    ms.execute(f"DROP TABLE {db}.u")
    ms.execute(f"DROP TABLE IF EXISTS {db}.u")
    with pytest.raises(NoSuchObjectException):
        ms.table(f"{db}.u")
    with pytest.raises(MetaException, match="not empty"):
        ms.execute(f"DROP DATABASE {db}")
    ms.execute(f"DROP DATABASE {db} CASCADE")
    assert db not in ms.list_databases() and "default" in ms.list_databases()


@pytest.mark.parametrize(
    ("sql", "message", "position"),
    [
        ("CREAT TABLE t (a int)", "expected CREATE", 0),
        ("CREATE TABLE t (a int", "expected ')'", 21),
        ("CREATE TABLE t (a intt)", "unknown type 'intt'", 18),
        ("CREATE TABLE t (a int, b)", "expected a type for column 'b'", 24),
        ("CREATE TABLE t (a decimal(50,2))", "invalid decimal", 18),
        ("CREATE TABLE t (a int) STORED AS PARQUET", "only STORED AS ORC", 33),
        ("CREATE TABLE t (a int) CLUSTERED BY (a) INTO 0 BUCKETS", "must be positive", 45),
        ("CREATE TABLE t (a int) TBLPROPERTIES (k='v')", "expected a property key", 38),
        ("SHOW TABLEZ", "expected DATABASES", 5),
        ("DROP TABLE t extra", "expected end of statement", 13),
        ("SHOW # x", "unexpected character '#'", 5),
        ("SELEC * FROM t", "unknown statement 'SELEC' (did you mean SELECT?): expected CREATE, DROP", 0),
    ],
)
def test_ddl_syntax_errors_point_at_the_token(
    metastore: MetastoreFacade, sql: str, message: str, position: int
) -> None:
    with pytest.raises(DdlSyntaxError, match=re.escape(message)) as info:
        metastore.execute(sql)
    assert info.value.position == position


def test_bad_definitions(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    with pytest.raises(AlreadyExistsException, match=rf"Table (hive\.)?{db}\.t already exists"):
        ms.execute(f"CREATE TABLE {db}.t (a int)")
    with pytest.raises(AlreadyExistsException):
        ms.execute(f"CREATE DATABASE {db}")
    ms.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
    missing_db = (NoSuchObjectException, f"Database {db}nodb does not exist")
    if is_hive(ms):  # Hive's metastore: InvalidObjectException "database hive.<name>"
        missing_db = (InvalidObjectException, f"database hive\\.{db}nodb")
    with pytest.raises(missing_db[0], match=missing_db[1]):
        ms.execute(f"CREATE TABLE {db}nodb.t (a int)")
    with pytest.raises(InvalidObjectException, match="duplicate column"):
        ms.execute(f"CREATE TABLE {db}.x (a int, a string)")
    with pytest.raises(InvalidObjectException, match="duplicate column"):
        ms.execute(f"CREATE TABLE {db}.x (a int) PARTITIONED BY (a string)")
    with pytest.raises(InvalidObjectException, match="bucket column 'zz'"):
        ms.execute(f"CREATE TABLE {db}.x (a int) CLUSTERED BY (zz) INTO 2 BUCKETS")
    with pytest.raises(InvalidObjectException, match="primitive"):
        ms.execute(f"CREATE TABLE {db}.x (a int) PARTITIONED BY (p array<int>)")
    # Hive's metastore keeps any value: every backend refuses one Hive's readers do not know
    with pytest.raises(InvalidObjectException, match="bucketing_version must be 1 or 2, not '3'"):
        ms.execute(f"CREATE TABLE {db}.x (a int) TBLPROPERTIES ('bucketing_version'='3')")
    with pytest.raises(InvalidObjectException, match="bucketing_version must be 1 or 2, not '3'"):
        ms.alter_table_properties(f"{db}.u", {"bucketing_version": "3"})
    assert f"{db}.x" not in [f"{db}.{t}" for t in ms.list_tables(db)]
    assert ms.table(f"{db}.u").bucketing_version == 2


LONG = 129  # one more character than Hive's metastore keeps in a name


@pytest.mark.parametrize(
    ("kind", "ddl"),
    [
        ("database", f"CREATE DATABASE {'d' * LONG}"),
        ("table", f"CREATE TABLE db.{'t' * 300} (a int)"),
        ("column", f"CREATE TABLE db.x ({'c' * LONG} int)"),
        ("partition column", f"CREATE TABLE db.x (a int) PARTITIONED BY ({'p' * LONG} string)"),
        ("column", "CREATE TABLE db.x (`a-b` int)"),
        ("database", "CREATE DATABASE `über`"),
    ],
)
def test_names_are_checked_as_hive_checks_them_before_anything_is_created(
    metastore: MetastoreFacade, db: str, kind: str, ddl: str
) -> None:
    """On every backend (SQLite stored any length, then the table's directory could not be made)."""
    ms = metastore
    warehouse = Path(ms.warehouse.removeprefix("file:"))
    before = (ms.list_databases(), ms.list_tables(db), sorted(warehouse.rglob("*")))
    with pytest.raises(
        InvalidObjectException, match=rf"is not a valid {kind} name: .* at most 128 characters"
    ):
        ms.execute(ddl.replace("db.", f"{db}."))
    assert (ms.list_databases(), ms.list_tables(db), sorted(warehouse.rglob("*"))) == before


def test_names_of_128_characters_and_hive_s_leading_digits_are_accepted(
    metastore: MetastoreFacade, db: str
) -> None:
    ms = metastore
    longest = db + "n" * (128 - len(db))
    ms.execute(f"CREATE DATABASE {longest}")
    ms.execute(
        f"CREATE TABLE {longest}.{longest} ({longest} int) PARTITIONED BY (p{longest[1:]} string) "
        "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    ms.execute(f"CREATE TABLE {db}.`2024_sales` (`1st` int)")
    try:
        assert ms.table(f"{longest}.{longest}").columns[0].name == longest
        assert ms.table(f"{db}.2024_sales").columns[0].name == "1st"
    finally:
        ms.drop_database(longest, cascade=True)


def test_partitions(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    p = ms.add_partition(f"{db}.t", ["2024/01:x"])
    assert p.name == "ds=2024%2F01%3Ax"
    assert p.location == ms.table(f"{db}.t").location + "/ds=2024%2F01%3Ax"
    assert ms.add_partition(f"{db}.t", ["2024/01:x"]) == p
    with pytest.raises(AlreadyExistsException):
        ms.add_partition(f"{db}.t", ["2024/01:x"], if_not_exists=False)
    ms.add_partition(f"{db}.t", [""])
    assert ms.execute(f"SHOW PARTITIONS {db}.t") == [
        ("ds=2024%2F01%3Ax",),
        ("ds=__HIVE_DEFAULT_PARTITION__",),
    ]
    assert ms.get_partition(f"{db}.t", ["2024/01:x"]) == p
    # values checked against the keys before the metastore is asked (Hive's refuses them untyped)
    for call in (ms.add_partition, ms.get_partition, ms.drop_partition):
        with pytest.raises(
            InvalidObjectException, match=rf"Table {db}\.t has 1 partition keys \['ds'\], got 2 values"
        ):
            call(f"{db}.t", ["a", "b"])
        with pytest.raises(InvalidObjectException, match=rf"Table {db}\.u is not partitioned"):
            call(f"{db}.u", ["a"])
    ms.drop_partition(f"{db}.t", ["2024/01:x"])
    assert ms.get_partition(f"{db}.t", ["2024/01:x"]) is None
    with pytest.raises(NoSuchObjectException, match=rf"Partition ds=2024%2F01%3Ax of {db}\.t does not exist"):
        ms.drop_partition(f"{db}.t", ["2024/01:x"])


def test_add_partition_is_race_safe(metastore: MetastoreFacade, db: str) -> None:
    ms = metastore
    errors: list[BaseException] = []

    def add() -> None:
        try:
            for i in range(10):
                ms.add_partition(f"{db}.t", [str(i)])
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    # (two adding one partition at once make Hive's metastore refuse all but one, some with "could not be
    # made persistent")
    threads = [threading.Thread(target=add) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(ms.list_partitions(f"{db}.t")) == 10

    outcomes: list[str] = []

    def add_new() -> None:  # one caller adds it, the others are told it exists
        try:
            ms.add_partition(f"{db}.t", ["new"], if_not_exists=False)
            outcomes.append("added")
        except AlreadyExistsException:
            outcomes.append("exists")
        except BaseException as exc:  # collected and asserted below
            outcomes.append(repr(exc))

    threads = [threading.Thread(target=add_new) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(outcomes) == ["added"] + ["exists"] * 5


class TestSqlBackendOnly:
    """acidstream's own metastore: the façade subclass it connects, its SQLite file's past, its notification
    log and its warehouse setting (a Hive Metastore has its own)."""

    def test_table_class_is_pluggable(self, metastore_url: str, warehouse: Path) -> None:
        class MyTable(TableHandle):
            def hello(self) -> str:
                return f"hi {self.full_name}"

        class MyMetastore(MetastoreFacade):
            table_class = MyTable

        with MyMetastore.connect(metastore_url, warehouse=warehouse) as m:
            t = m.create_table("default", "x", [Column("id", parse_type("int"))])
            assert isinstance(t, MyTable) and t.hello() == "hi default.x"

    def test_a_table_named_before_names_were_limited_can_be_dropped(
        self, metastore_url: str, warehouse: Path
    ) -> None:
        """SQLite kept any name: such a table's directory cannot exist, and dropping it must not fail on that."""
        if not metastore_url.startswith("sqlite"):
            pytest.skip("PostgreSQL never stored a name longer than its column")
        name = "t" * 300
        with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
            ms.execute("CREATE TABLE short (a int) STORED AS ORC TBLPROPERTIES ('transactional'='true')")
            with sqlite3.connect(metastore_url.removeprefix("sqlite:///")) as db:
                db.execute(
                    "UPDATE tbls SET tbl_name = ?, location = ? WHERE tbl_name = 'short'",
                    (name, f"{warehouse}/{name}"),
                )
            ms.execute(f"DROP TABLE {name}")
            assert ms.list_tables("default") == []

    def test_notification_log(self, ms: MetastoreFacade) -> None:
        start = ms.current_notification_event_id()
        ms.add_partition("db.t", ["1"])
        (txn,) = ms.open_txns()
        ms.allocate_table_write_ids([txn], "db.t")
        ms.add_write_notification(txn, 1, "db.t", "ds=1", ["delta_0000001_0000001/bucket_00000"])
        ms.commit_txn(txn)
        events = ms.notifications(start)
        assert [e.event_type for e in events] == [
            "ADD_PARTITION",
            "OPEN_TXN",
            "ALLOC_WRITE_ID",
            "ACID_WRITE",
            "COMMIT_TXN",
        ]
        assert [e.event_id for e in events] == list(range(start + 1, start + 6))
        assert events[3].message == {"files": ["delta_0000001_0000001/bucket_00000"]}
        assert events[4].message["write_ids"] == {"db.t": 1}
        assert ms.current_notification_event_id() == start + 5
        assert ms.notifications(start, limit=2) == events[:2]

    def test_a_relative_warehouse_is_stored_absolute(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Table locations are stored: a relative one would resolve against each process's own directory (Spark's
        Python workers run in the JVM's), so files would land beside another process's tables."""
        monkeypatch.chdir(tmp_path)
        with MetastoreFacade.connect("sqlite:///metastore.db", warehouse="wh") as ms:
            ms.execute("CREATE TABLE t (id int) TBLPROPERTIES ('transactional'='true')")
            assert ms.table("default.t").location == str(tmp_path / "wh" / "t")
