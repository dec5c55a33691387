"""The metastore commands through click: output, exit codes (0, typed failure, 2 usage), --help."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import acidstream
from acidstream.cli import cli, exit_code_for
from acidstream.cli.metastore import LOCK_COLUMNS, TXN_COLUMNS
from acidstream.errors import AlreadyExistsException, MetaException
from acidstream.metastore import MetastoreFacade
from acidstream.metastore.ddl import SHOW_COMPACTIONS_COLUMNS

Run = Callable[..., tuple[int, str, str]]  # the ``run`` fixture (conftest.py)


def test_init_sql_show(run: Run, warehouse: Path) -> None:
    code, out, _ = run("metastore", "init")
    assert code == 0 and "schema version" in out
    assert run("sql", "CREATE DATABASE db")[0] == 0
    assert (
        run(
            "sql",
            "CREATE TABLE db.t (id int) PARTITIONED BY (ds string) TBLPROPERTIES ('transactional'='true')",
        )[0]
        == 0
    )
    assert run("show", "databases")[1] == "db\ndefault\n"
    assert run("show", "tables", "db")[1] == "t\n"
    assert run("sql", "DESCRIBE db.t")[1].splitlines()[0] == "id\tint\t"
    with MetastoreFacade.connect(
        f"sqlite:///{warehouse / 'metastore.db'}", warehouse=warehouse, txn_timeout=0.1
    ) as ms:
        ms.add_partition("db.t", ["x"])
        (txn,) = ms.open_txns(agent_info="cli-test")  # times out 0.1 s after its last heartbeat
    assert run("show", "partitions", "db.t")[1] == "ds=x\n"
    code, out, _ = run("show", "txns")
    assert code == 0 and out.splitlines()[0] == "\t".join(TXN_COLUMNS)
    assert out.splitlines()[1].startswith(f"{txn}\tOPEN\t") and "cli-test" in out
    assert run("show", "locks") == (0, "\t".join(LOCK_COLUMNS) + "\n", "no locks\n")
    time.sleep(0.2)
    code, out, _ = run("housekeeper", "--once")  # the txn's own timeout counts, not the housekeeper's
    assert code == 0 and out == f"aborted 1 timed-out txns: [{txn}]\n"


def test_failures_are_typed_with_their_exit_code(run: Run, warehouse: Path) -> None:
    expected = exit_code_for(MetaException("x"))  # the root maps each error family to its exit code
    assert expected not in (0, 2)
    assert run("metastore", "init")[0] == 0
    code, _, err = run("show", "partitions", "db.nope")
    assert code == expected and "NoSuchObjectException" in err
    assert f"looked in: metastore sqlite:///{warehouse / 'metastore.db'}, warehouse {warehouse}" in err
    assert "(from ACIDSTREAM_WAREHOUSE)" in err


def test_statements_that_do_not_parse_are_usage_errors(run: Run) -> None:
    assert run("metastore", "init")[0] == 0
    code, _, err = run("sql", "CREATE TABLE t (a intt)")
    assert code == 2 and "DdlSyntaxError" in err and "unknown type 'intt'" in err
    assert "looked in" not in err  # the statement is wrong, not the place
    code, _, err = run("sql", "CREATE TABLE t (a int,\n b map<string, strin>)")
    assert code == 2 and err.count("at position") == 1, err  # where in the statement, not in the type
    assert "bad type for column 'b': unknown type 'strin' at position 38 (line 2)\n" in err
    assert err.endswith("   b map<string, strin>)\n                 ^\n")


def test_a_table_is_never_created_over_another_metastores_files(run: Run, warehouse: Path) -> None:
    """Two metastores over one warehouse: the second's CREATE TABLE finds the first's table directory."""
    table = "CREATE TABLE {} t (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    with acidstream.Metastore.connect(f"sqlite:///{warehouse / 'first.db'}", warehouse=warehouse) as first:
        first.execute(table.format(""))
        first.table("default.t").merge(pa.table({"id": pa.array([1], pa.int32())}), on=["id"])
    assert run("metastore", "init")[0] == 0
    code, _, err = run("sql", table.format(""))
    assert code == exit_code_for(AlreadyExistsException("x")), err
    assert (
        f"AlreadyExistsException: the directory of new table default.t, {warehouse / 't'}, is not empty"
        in err
    )
    assert "holds delta_0000001_0000001" in err and "Traceback" not in err
    assert run("show", "tables")[1] == ""  # nothing created
    with MetastoreFacade.connect(f"sqlite:///{warehouse / 'first.db'}", warehouse=warehouse) as first:
        first.execute(table.format("IF NOT EXISTS"))  # its own table: nothing to say
        first.execute("DROP TABLE t")  # its files go with it
    assert run("sql", table.format(""))[0] == 0


def test_queries_and_writes_are_pointed_elsewhere(run: Run) -> None:
    code, _, err = run("sql", "SELECT * FROM alerts")
    assert code == 2 and "acidstream spark-shell -e 'SELECT * FROM alerts'" in err
    code, _, err = run("sql", "insert into t values (1)")
    assert code == 2 and "acidstream stream" in err


def test_empty_listings_print_their_header(run: Run) -> None:
    assert run("metastore", "init")[0] == 0
    assert run("show", "txns") == (0, "\t".join(TXN_COLUMNS) + "\n", "no open or aborted transactions\n")
    code, out, err = run("show", "locks", "default.t")
    assert (code, out, err) == (0, "\t".join(LOCK_COLUMNS) + "\n", "no locks on default.t\n")


def test_usage_errors_exit_2_and_help(run: Run) -> None:
    assert run("show", "partitions")[0] == 2
    assert run("housekeeper", "--interval", "0")[0] == 2
    runner = CliRunner()
    for args in (
        ["metastore", "--help"],
        ["metastore", "init", "--help"],
        ["sql", "--help"],
        ["show", "--help"],
        ["show", "locks", "--help"],
        ["housekeeper", "--help"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0 and "Usage:" in result.stdout


def test_sql_runs_dml_and_prints_its_counts(run: Run, tmp_path: Path) -> None:
    assert run("metastore", "init")[0] == 0
    assert run("sql", "CREATE DATABASE db")[0] == 0
    for name in ("t", "s"):
        ddl = (
            f"CREATE TABLE db.{name} (id int, v string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        assert run("sql", ddl)[0] == 0
    pq.write_table(pa.table({"id": [1, 2], "v": ["a", "b"]}), tmp_path / "s.parquet")
    assert run("merge", "db.s", "--source", str(tmp_path / "s.parquet"), "--on", "id")[0] == 0
    merge = "MERGE INTO db.t USING db.s ON t.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)"
    assert run("sql", merge) == (0, "inserted\tupdated\tdeleted\n2\t0\t0\n", "")
    assert (
        run("sql", "UPDATE db.t SET v = upper(v) WHERE id = 1")[1] == "inserted\tupdated\tdeleted\n0\t1\t0\n"
    )
    code, _, err = run("sql", "UPDATE db.t SET v = 'x' WHERE id = ")
    assert code == 2 and "SqlSyntaxError: incomplete expression: expected more after '='" in err
    assert err.splitlines()[-1].endswith("^") and "looked in" not in err
    assert sorted(run("cat", "db.t")[1].splitlines()) == ["1\tA", "2\tb"]
    assert run("sql", "DELETE FROM db.t") == (0, "inserted\tupdated\tdeleted\n0\t0\t2\n", "")


def test_listings_of_sql_show_have_headers_and_utc_times(run: Run, warehouse: Path) -> None:
    """``sql "SHOW ..."`` prints what ``show ...`` prints: a header, ISO-8601 UTC times, a word when empty."""
    assert run("metastore", "init")[0] == 0
    empty = "\t".join(SHOW_COMPACTIONS_COLUMNS) + "\n", "no compactions queued or recorded\n"
    assert run("sql", "SHOW COMPACTIONS") == (0, *empty)
    assert run("show", "compactions") == (0, *empty)
    with MetastoreFacade.connect(f"sqlite:///{warehouse / 'metastore.db'}", warehouse=warehouse) as ms:
        ms.execute("CREATE TABLE t (id int) TBLPROPERTIES ('transactional'='true')")
        ms.compact("t", kind="major")
        ms.open_txns(agent_info="cli-test")
        [txn] = ms.show_txns()
        [request] = ms.show_compactions()

    def utc(epoch_ms: int) -> str:
        return (
            datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[
                :-3
            ]
            + "Z"
        )

    for args in (("sql", "SHOW TRANSACTIONS"), ("show", "txns")):
        code, out, _ = run(*args)
        header, row = out.splitlines()
        assert code == 0 and header == "\t".join(TXN_COLUMNS)
        assert row.split("\t")[2:4] == [utc(txn.started), utc(txn.last_heartbeat)]
    for args in (("sql", "show compactions"), ("show", "compactions")):
        code, out, _ = run(*args)
        header, row = out.splitlines()
        assert (
            code == 0
            and header == "\t".join(SHOW_COMPACTIONS_COLUMNS)
            and len(row.split("\t")) == len(SHOW_COMPACTIONS_COLUMNS)
        )
        assert row.split("\t")[8] == utc(request.enqueue_time)


def test_what_the_metastore_refuses_as_asked_is_a_usage_error(run: Run) -> None:
    assert run("metastore", "init")[0] == 0
    assert run("sql", "CREATE DATABASE db")[0] == 0
    assert run("sql", "CREATE TABLE db.t (id int) TBLPROPERTIES ('transactional'='true')")[0] == 0
    code, _, err = run("sql", "DROP DATABASE db")
    assert code == 2 and "InvalidOperationException: Database db is not empty" in err, err
    assert "DROP DATABASE db CASCADE drops them too" in err and "looked in" not in err
    code, _, err = run("sql", "DROP DATABASE default")
    assert code == 2 and "Can not drop default database" in err
    assert run("sql", "DROP DATABASE db CASCADE")[0] == 0


@pytest.mark.hive4
def test_the_housekeeper_on_a_hive_metastore_says_it_keeps_house_itself(hive4_metastore: str) -> None:
    result = CliRunner().invoke(cli, ["--metastore", hive4_metastore, "housekeeper", "--once"])
    assert result.exit_code == 2, result.output
    assert "UnsupportedCapability: perform_timeouts" in result.stderr
    assert "times out silent txns and locks itself" in result.stderr and "looked in" not in result.stderr
