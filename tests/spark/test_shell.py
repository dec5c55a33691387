"""``acidstream spark-shell``: a session wired to the metastore, tables as live Spark SQL views."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from click.testing import CliRunner

from acidstream.catalog import Metastore
from acidstream.cli import cli
from acidstream.spark.shell import with_views
from acidstream.streaming.connection import StreamingConnection
from acidstream.streaming.writers import StrictDelimitedInputWriter


def test_execute_prints_rows_like_hives_cli_and_bad_queries_exit_2(
    acid_spark: Any, sqlite_url: str, warehouse: Path, create_alerts: Callable[[str], Metastore]
) -> None:
    ms = create_alerts(sqlite_url)
    conn = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("testing")
        .with_table("alerts")
        .with_record_writer(StrictDelimitedInputWriter.builder().build())
        .connect()
    )
    with conn:
        conn.begin_transaction()
        conn.write_batch(
            pa.table(
                {
                    "id": [1, 2, 3],
                    "msg": ["a", None, "c"],
                    "continent": ["EU"] * 3,
                    "country": ["FR", "FR", "DE"],
                }
            )
        )
        conn.commit_transaction()
    base = ["spark-shell", "--metastore", sqlite_url, "--warehouse", str(warehouse)]
    query = "SELECT country, id, msg FROM alerts ORDER BY id"
    res = CliRunner().invoke(cli, [*base, "-e", query], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == ["FR\t1\ta", "FR\t2\tNULL", "DE\t3\tc"]
    limited = CliRunner().invoke(cli, [*base, "--limit", "1", "-e", query, "testing.alerts"])
    assert limited.output.splitlines() == ["FR\t1\ta"]
    bad = CliRunner().invoke(cli, [*base, "-e", "SELECT nope FROM alerts"])
    assert bad.exit_code == 2 and "UNRESOLVED_COLUMN" in bad.output
    garbled = CliRunner().invoke(cli, [*base, "-e", "SELECT 1 +"])  # Spark's parser finds it
    assert garbled.exit_code == 2 and "PARSE_SYNTAX_ERROR" in garbled.output
    typo = CliRunner().invoke(cli, [*base, "-e", "SELEC 1"])  # found before Spark is asked
    assert typo.exit_code == 2 and "unknown statement 'SELEC' (did you mean SELECT?)" in typo.output
    assert acid_spark.sparkContext._jsc is not None  # the shared session survived the command


def test_execute_names_tables_as_hive_does_and_ends_its_reader_registrations(
    acid_spark: Any, sqlite_url: str, warehouse: Path, ms: Metastore
) -> None:
    """``db.table`` in Spark SQL reads the table (its view), and the query's registration ends with the command
    instead of holding the cleaner back for a reader lease."""
    acid_spark.createDataFrame(
        [(1, "a", "EU", "FR"), (2, "b", "EU", "DE")], "id int, msg string, continent string, country string"
    ).write.format("acidstream").options(metastore=sqlite_url, warehouse=str(warehouse)).mode("append").save(
        "testing.alerts"
    )
    base = ["spark-shell", "--metastore", sqlite_url, "--warehouse", str(warehouse), "-e"]
    query = "SELECT testing.alerts.id, a.country FROM testing.alerts a JOIN `TESTING`.`Alerts` USING (id) ORDER BY 1"
    res = CliRunner().invoke(cli, [*base, query], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == ["1\tFR", "2\tDE"]
    assert ms.active_readers("testing.alerts") == []
    missing = CliRunner().invoke(cli, [*base, "SELECT * FROM testing.nope"])
    assert missing.exit_code == 2 and "TABLE_OR_VIEW_NOT_FOUND" in missing.output


def test_with_views_replaces_whole_table_names_only() -> None:
    views = {"alerts": "testing.alerts", "default_t": "default.t"}
    query = (
        "SELECT testing.alerts.id, `default`.x FROM testing.alerts JOIN default.t "
        "WHERE m = 'testing.alerts' -- testing.alerts\n AND spark_catalog.testing.alerts.id = Testing . ALERTS.id"
    )
    assert with_views(query, views) == (
        "SELECT `alerts`.id, `default`.x FROM `alerts` JOIN `default_t` "
        "WHERE m = 'testing.alerts' -- testing.alerts\n AND spark_catalog.testing.alerts.id = `alerts`.id"
    )
