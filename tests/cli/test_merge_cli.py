"""``acidstream merge``: change files of each format (and directories of them) applied by key, the options,
the summary line, and exit codes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from acidstream.catalog import Metastore

Run = Callable[..., tuple[int, str, str]]  # the ``run`` fixture (conftest.py)


@pytest.fixture
def table(run: Run) -> str:
    assert run("metastore", "init")[0] == 0
    assert run("sql", "CREATE DATABASE bank")[0] == 0
    code, _, err = run(
        "sql",
        "CREATE TABLE bank.accounts (id bigint, code string, balance decimal(10,2), opened date) "
        "PARTITIONED BY (region string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')",
    )
    assert code == 0, err
    return "bank.accounts"


def rows(warehouse: Path) -> dict[int, dict[str, Any]]:
    with Metastore.connect(f"sqlite:///{warehouse / 'metastore.db'}", warehouse=warehouse) as ms:
        return {r["id"]: r for r in ms.table("bank.accounts").scan().to_arrow().to_pylist()}


def accounts(ids: list[int], **columns: list[Any]) -> pa.Table:
    data: dict[str, Any] = {"id": ids, "region": ["EU" if i % 2 else "US" for i in ids]}
    return pa.table({**data, **columns})


def test_upsert_from_parquet_then_sync_from_a_directory(
    run: Run, table: str, tmp_path: Path, warehouse: Path
) -> None:
    pq.write_table(accounts([1, 2, 3], balance=[1.5, 2.5, 3.5]), tmp_path / "first.parquet")
    code, out, err = run("merge", table, "--source", str(tmp_path / "first.parquet"), "--on", "id")
    assert code == 0, err
    assert "bank.accounts: 3 inserted, 0 updated, 0 deleted from 3 source rows in" in err
    assert out == ""
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    pq.write_table(accounts([2], balance=[20.0]), snapshot / "part-0.parquet")
    (snapshot / "part-1.csv").write_text("id,region,code\n4,US,0042\n")
    (snapshot / "_SUCCESS").write_text("")
    (snapshot / ".part-0.parquet.crc").write_text("x")
    code, _, err = run("merge", table, "--source", str(snapshot), "--on", "id", "--delete-missing")
    assert code == 0, err
    assert "1 inserted, 1 updated, 2 deleted from 2 source rows" in err
    got = rows(warehouse)
    assert sorted(got) == [2, 4]
    assert got[2]["balance"] == Decimal("20.00") and got[4]["code"] == "0042"


def test_csv_and_tsv_take_the_table_types(run: Run, table: str, tmp_path: Path, warehouse: Path) -> None:
    (tmp_path / "a.csv").write_text("ID,Code,Balance,Opened,Region\n1,007,10.10,2024-02-29,EU\n")
    (tmp_path / "b.tsv").write_text("id\tcode\tregion\n2\t008\tUS\n")
    (tmp_path / "c.txt").write_text("id;code;region\n3;009;EU\n")
    for name, extra in (("a.csv", []), ("b.tsv", []), ("c.txt", ["--format", "csv", "--delimiter", ";"])):
        code, _, err = run("merge", table, "--source", str(tmp_path / name), "--on", "id", *extra)
        assert code == 0, err
    got = rows(warehouse)
    assert (got[1]["code"], got[1]["balance"], got[1]["opened"]) == (
        "007",
        Decimal("10.10"),
        dt.date(2024, 2, 29),
    )
    assert (got[2]["code"], got[3]["code"]) == ("008", "009")


def test_json_lines_and_orc(run: Run, table: str, tmp_path: Path, warehouse: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": 1, "code": "a", "region": "EU"}\n{"id": 2, "region": "US"}\n')
    orc.write_table(accounts([2, 3], code=["b", "c"]), str(tmp_path / "b.orc"))
    for name in ("a.jsonl", "b.orc"):
        code, _, err = run("merge", table, "--source", str(tmp_path / name), "--on", "id")
        assert code == 0, err
    assert {i: r["code"] for i, r in rows(warehouse).items()} == {1: "a", 2: "b", 3: "c"}


def test_matched_and_unmatched_rows_follow_the_options(
    run: Run, table: str, tmp_path: Path, warehouse: Path
) -> None:
    source = tmp_path / "s.parquet"
    pq.write_table(accounts([1, 2, 3, 4], code=["a", "b", "c", "d"]), source)
    assert run("merge", table, "--source", str(source), "--on", "id")[0] == 0
    pq.write_table(accounts([1, 5], code=["x", "y"]), source)
    code, _, err = run(
        "merge", table, "--source", str(source), "--on", "id", "--when-matched", "ignore", "--no-insert"
    )
    assert code == 0 and "0 inserted, 0 updated, 0 deleted" in err
    code, _, err = run(
        "merge", table, "--source", str(source), "--on", "id", "--on", "region", "--when-matched", "delete"
    )
    assert code == 0 and "1 inserted, 0 updated, 1 deleted" in err
    assert {i: r["code"] for i, r in rows(warehouse).items()} == {2: "b", 3: "c", 4: "d", 5: "y"}


def test_failures_exit_with_their_codes(run: Run, table: str, tmp_path: Path, warehouse: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "x.data").write_text("")
    (tmp_path / "bad.parquet").write_text("not parquet")
    pq.write_table(accounts([1, 1], code=["a", "b"]), tmp_path / "dup.parquet")
    pq.write_table(accounts([1]), tmp_path / "ok.parquet")
    cases = [
        (["--source", str(tmp_path / "nope.parquet"), "--on", "id"], 2, "does not exist"),
        (["--source", str(tmp_path / "x.data"), "--on", "id"], 2, "cannot tell the format of"),
        (["--source", str(tmp_path / "empty"), "--on", "id"], 2, "no source files in"),
        (["--source", str(tmp_path / "ok.parquet")], 2, "Missing option '--on'"),
        (
            ["--source", str(tmp_path / "ok.parquet"), "--on", "code"],
            3,
            "merge keys ['code'] must be source columns",
        ),
        (
            ["--source", str(tmp_path / "bad.parquet"), "--on", "id"],
            3,
            f"cannot read {tmp_path / 'bad.parquet'} as parquet",
        ),
    ]
    for args, expected, message in cases:
        code, _, err = run("merge", table, *args)
        assert (code, message in err) == (expected, True), (args, err)
    assert run("merge", table, "--source", str(tmp_path / "ok.parquet"), "--on", "id")[0] == 0
    code, _, err = run("merge", table, "--source", str(tmp_path / "dup.parquet"), "--on", "id")
    assert code == 2 and "both match the target row with {'id': 1}" in err
    code, _, err = run("merge", "bank.nope", "--source", str(tmp_path / "ok.parquet"), "--on", "id")
    assert code == 4 and "NoSuchObjectException" in err
    assert set(rows(warehouse)) == {1}


def test_no_metastore_is_not_created(run: Run, tmp_path: Path, warehouse: Path) -> None:
    pq.write_table(accounts([1]), tmp_path / "ok.parquet")
    code, _, err = run("merge", "bank.accounts", "--source", str(tmp_path / "ok.parquet"), "--on", "id")
    assert code == 4 and "no metastore at" in err
    assert not (warehouse / "metastore.db").exists()


def test_help_names_the_options_and_exit_codes(run: Run) -> None:
    code, out, _ = run("merge", "--help")
    assert code == 0
    for text in (
        "--source",
        "--on",
        "--delete-missing",
        "--when-matched",
        "--no-insert",
        "Exit codes: 0 success",
    ):
        assert text in out


def test_the_summary_is_one_line_in_a_log(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped (no terminal), the summary is not wrapped at 80 columns."""
    monkeypatch.delenv("COLUMNS", raising=False)
    long_name = "bank.accounts_of_the_northern_region_branches"
    assert run("metastore", "init")[0] == 0 and run("sql", "CREATE DATABASE bank")[0] == 0
    assert run("sql", f"CREATE TABLE {long_name} (id bigint) TBLPROPERTIES ('transactional'='true')")[0] == 0
    pq.write_table(pa.table({"id": [1, 2, 3]}), tmp_path / "ids.parquet")
    code, _, err = run("merge", long_name, "--source", str(tmp_path / "ids.parquet"), "--on", "id")
    [line] = err.splitlines()
    assert code == 0 and line.startswith(
        f"{long_name}: 3 inserted, 0 updated, 0 deleted from 3 source rows in "
    )
    assert len(line) > 80


def test_a_delimiter_is_one_character_or_an_escape_naming_one(run: Run, table: str, tmp_path: Path) -> None:
    source = tmp_path / "tabs.txt"
    source.write_text("id\tname\n1\tann\n")
    code, _, err = run("merge", table, "--source", str(source), "--on", "id", "--delimiter", ";;")
    assert code == 2 and "Invalid value for '--delimiter': ';;' is not one ASCII character" in err
    assert "Traceback" not in err
