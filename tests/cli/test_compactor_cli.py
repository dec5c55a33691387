"""``acidstream compact`` and ``acidstream compactor run`` through click, on a streamed table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.errors import CompactionError

Run = Callable[..., tuple[int, str, str]]  # the ``run`` fixture (conftest.py)


@pytest.fixture
def ms(warehouse: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{warehouse / 'metastore.db'}", warehouse=warehouse) as m:
        m.execute("CREATE DATABASE db")
        m.execute("CREATE TABLE db.t (id int, msg string) TBLPROPERTIES ('transactional'='true')")
        m.execute(
            "CREATE TABLE db.p (id int, msg string) PARTITIONED BY (ds string) TBLPROPERTIES ('transactional'='true')"
        )
        delim = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
        for table, static in (("t", None), ("p", ["2024-01-01"])):
            builder = StreamingConnection.builder().with_metastore(m).with_database("db").with_table(table)
            if static:
                builder = builder.with_static_partition_values(static)
            with builder.with_record_writer(delim).connect() as conn:
                for i in range(12):
                    conn.begin_transaction()
                    conn.write_batch(pa.table({"id": [i], "msg": [f"m{i}"]}))
                    conn.commit_transaction()
        yield m


def test_compact_enqueues_or_waits(ms: Metastore, run: Run) -> None:
    code, out, _ = run("compact", "db.t", "--minor")
    assert code == 0 and out == "Compaction enqueued with id 1\n"
    code, out, _ = run("compact", "db.p", "--partition", "ds=2024-01-01", "--major", "--wait")
    assert code == 0 and out == "compaction 2 (major db.p/ds=2024-01-01): ready for cleaning\n"
    assert sorted(ms.table("db.p").scan().to_arrow().column("id").to_pylist()) == list(range(12))
    code, _, err = run("compact", "db.p", "--major")
    assert code == 2 and "must specify a partition" in err  # a statement that defines nothing valid
    code, _, err = run("compact", "db.t")
    assert code == 2 and "--major or --minor" in err
    code, _, err = run("compact", "db.p", "--partition", "nonsense", "--major")
    assert code == 2


def test_sql_alter_table_compact_and_wait(ms: Metastore, run: Run) -> None:
    rows = ms.execute("ALTER TABLE db.t COMPACT 'major' AND WAIT")
    assert rows == [(1, "ready for cleaning")]
    code, out, _ = run("sql", "SHOW COMPACTIONS")
    assert code == 0 and "\tmajor\t" not in out and "MAJOR" in out


def test_compactor_run_once(ms: Metastore, run: Run) -> None:
    code, out, err = run("compactor", "run", "--once", "--workers", "2", "--retention", "0")
    assert code == 0
    assert "requested major compaction" in err and "cleaned after compaction" in err
    assert out.startswith("summary: requested 2, compacted 2,")
    assert sorted(c.state for c in ms.show_compactions()) == ["succeeded", "succeeded"]
    assert sorted(ms.table("db.t").scan().to_arrow().column("id").to_pylist()) == list(range(12))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_compactor_run_until_sigterm(ms: Metastore, warehouse: Path) -> None:
    env = {"ACIDSTREAM_WAREHOUSE": str(warehouse), "ACIDSTREAM_METASTORE": ""}
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "acidstream.cli",
            "compactor",
            "run",
            "--check-interval",
            "0.2",
            "--cleaner-interval",
            "0.2",
            "--poll-interval",
            "0.1",
            "--retention",
            "0",
        ],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and [c.state for c in ms.show_compactions()] != ["succeeded"] * 2:
        time.sleep(0.2)
    daemon.send_signal(signal.SIGTERM)
    out, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 143, err  # interrupted, after the summary
    assert "compactor running with 1 worker(s)" in err and "interrupted by SIGTERM" in err
    assert out.startswith("summary: requested 2, compacted 2,") and "cleaned 2" in out


def test_a_request_of_your_own_is_done_below_every_threshold(ms: Metastore, run: Run) -> None:
    """Two deltas: far below the initiator's thresholds, and enough for a request of the user's."""
    ms.execute("CREATE TABLE db.few (id int) TBLPROPERTIES ('transactional'='true')")
    for i in range(2):
        ms.table("db.few").merge(pa.table({"id": [i]}), on=["id"])
    code, out, err = run("compact", "db.few", "--minor", "--wait")
    assert code == 0 and out == "compaction 1 (minor db.few): ready for cleaning\n", err
    assert sorted(ms.table("db.few").scan().to_arrow().column("id").to_pylist()) == [0, 1]


def test_a_request_with_nothing_to_compact_is_an_error_saying_why(ms: Metastore, run: Run) -> None:
    assert run("compactor", "run", "--once", "--retention", "0")[0] == 0  # db.t: one base and nothing else
    code, out, err = run("compact", "db.t", "--major", "--wait")
    assert code == 1 and out == ""
    assert "error: CompactionError: compaction 3 (major db.t) refused: nothing to compact in " in err
    assert err.rstrip().endswith("; it holds base_0000012") and "threshold" not in err
    with pytest.raises(CompactionError, match=r"compaction 4 \(minor db.t\) refused: nothing to compact"):
        ms.execute("ALTER TABLE db.t COMPACT 'minor' AND WAIT")
    code, _, err = run("sql", "ALTER TABLE db.t COMPACT 'minor' AND WAIT")
    assert code == 1 and "refused: nothing to compact" in err
