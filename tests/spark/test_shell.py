"""``acidstream spark-shell``: a session wired to the metastore, tables as live Spark SQL views."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from click.testing import CliRunner

from acidstream.catalog import Metastore
from acidstream.cli import cli
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
