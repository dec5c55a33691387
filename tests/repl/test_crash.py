"""kill -9 of a loader at random points: each re-run continues, and the replica ends equal to the source, with
no byte appended twice (every replica file's bytes are the source's, checked against the source's CRC-32)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from replhelpers import stream, view
from workload import TABLES, create_tables, run_workload

from acidstream import repl
from acidstream.catalog import Metastore
from acidstream.repl.copy import STEP_DELAY_ENV

pytestmark = pytest.mark.slow

TRIALS = 5
MAX_KILLS = 4
#: Seconds a loader pauses, at random up to, at each step of a load (after a file's bytes, before an event's
#: record): the test's load of about a hundred steps takes about two seconds, so kills up to LOAD_SECONDS
#: after a loader's imports land anywhere in it, its last events included.
STEP_DELAY = 0.03
LOAD_SECONDS = 2.2
#: ``acidstream repl sync``, saying on stdout once its imports are done: they take about as long as the load,
#: and longer on a busy machine, so kills timed from the start of the process would mostly land in them.
_COMMAND = [
    sys.executable,
    "-c",
    "import acidstream.cli, acidstream.repl; print('imported', flush=True); acidstream.cli.main()",
    "repl",
    "sync",
]


def _sync(source_url: str, target_url: str, wh: Path, delay: float | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if delay is not None:
        env[STEP_DELAY_ENV] = str(delay)
    return subprocess.Popen(
        [*_COMMAND, source_url, target_url, "--target-warehouse", str(wh), "--open-txn-timeout", "0.1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_loader_killed_at_random_points(tmp_path: Path) -> None:
    source_url = f"sqlite:///{tmp_path / 'source.db'}"
    with Metastore.connect(source_url, warehouse=tmp_path / "source-wh") as source:
        create_tables(source)
        replicas = [
            (f"sqlite:///{tmp_path / f'replica-{t}.db'}", tmp_path / f"replica-wh-{t}") for t in range(TRIALS)
        ]
        for url, wh in replicas:  # bootstrapped now: the loaders below apply the workload's events one by one
            with Metastore.connect(url, warehouse=wh) as replica:
                repl.sync(source, replica)
        run_workload(source, 11, 16, lambda: None)
        open_batch = stream(source, "db.flat", 5)  # a batch still writing: two txns committed, files open
        for txn in range(2):
            open_batch.begin_transaction()
            for i in range(200):
                open_batch.write(f"{100000 + txn * 1000 + i},open batch".encode())
            open_batch.commit_transaction()
        want = view(source, TABLES)
        rng = random.Random(7)
        deadline = time.monotonic() + 240
        total_kills = 0
        for trial, (target_url, wh) in enumerate(replicas):
            kills = 0
            while kills < MAX_KILLS and time.monotonic() < deadline:
                proc = _sync(source_url, target_url, wh, delay=STEP_DELAY)
                assert proc.stdout is not None and proc.stdout.readline() == b"imported\n"
                try:
                    proc.wait(timeout=rng.uniform(0.0, LOAD_SECONDS))
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    kills += 1
                    continue
                break
            total_kills += kills
            final = _sync(source_url, target_url, wh, delay=None)
            _, err = final.communicate(timeout=120)
            assert final.returncode == 0, err.decode()
            with Metastore.connect(target_url, warehouse=wh) as replica:
                assert view(replica, TABLES) == want, f"trial {trial} after {kills} kills"
                _check_files(source, replica)
        open_batch.close()
        assert total_kills >= TRIALS  # most loaders died at least once before finishing


def _check_files(source: Metastore, replica: Metastore) -> None:
    """Every replicated file holds the source's bytes up to its recorded length: nothing appended twice."""
    from acidstream.acid.checksum import file_prefix
    from acidstream.storage import table_filesystem

    for table in TABLES:
        src_root = Path(source.table(table).location)
        dst_root = Path(replica.table(table).location)
        for path in dst_root.rglob("bucket_*"):
            if path.name.endswith("_flush_length"):
                continue
            recorded = replica.repl_file_state(str(path))
            assert recorded is not None, path
            fs, _ = table_filesystem(str(path))
            assert path.stat().st_size == recorded[0], path
            src = src_root / path.relative_to(dst_root)
            if src.exists():
                assert file_prefix(fs, str(src), recorded[0]).crc32 == recorded[1], path
