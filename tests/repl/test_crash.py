"""kill -9 of a loader at random points: each re-run continues, and the replica ends equal to the source, with
no byte appended twice (every replica file's bytes are the source's, checked against the source's CRC-32)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from replhelpers import stream, view
from workload import TABLES, create_tables, run_workload

from acidstream import repl
from acidstream.catalog import Metastore
from acidstream.repl.copy import STEP_DELAY_ENV

pytestmark = pytest.mark.slow

TRIALS = 5
REPLACE_TRIALS = 2
MAX_KILLS = 4
#: Seconds a loader pauses, at random up to, at each step of a load (after a file's bytes, before an event's
#: record): the test's load of about a hundred steps takes about two seconds, so kills up to LOAD_SECONDS
#: after a loader's imports land anywhere in it, its last events included.
STEP_DELAY = 0.03
LOAD_SECONDS = 2.2
#: ``acidstream repl ...``, saying on stdout once its imports are done: they take about as long as the load,
#: and longer on a busy machine, so kills timed from the start of the process would mostly land in them.
_COMMAND = [
    sys.executable,
    "-c",
    "import acidstream.cli, acidstream.repl; print('imported', flush=True); acidstream.cli.main()",
    "repl",
]


def _repl(args: list[str], delay: float | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if delay is not None:
        env[STEP_DELAY_ENV] = str(delay)
    return subprocess.Popen([*_COMMAND, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _sync(source_url: str, target_url: str, wh: Path, delay: float | None) -> subprocess.Popen[bytes]:
    return _repl(
        ["sync", source_url, target_url, "--target-warehouse", str(wh), "--open-txn-timeout", "0.1"], delay
    )


def _kill_when(proc: subprocess.Popen[bytes], ready: Callable[[float], bool]) -> bool:
    """SIGKILL ``proc`` as soon as ``ready`` (given the seconds since its imports were done) holds; False if it
    ended first."""
    assert proc.stdout is not None and proc.stdout.readline() == b"imported\n"
    start = time.monotonic()
    while proc.poll() is None:
        if ready(time.monotonic() - start):
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.005)
    return False


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
                at = rng.uniform(0, LOAD_SECONDS)
                if not _kill_when(
                    _sync(source_url, target_url, wh, delay=STEP_DELAY), lambda waited, at=at: waited >= at
                ):
                    break
                kills += 1
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


def test_newer_bootstrap_load_killed_at_random_points(tmp_path: Path) -> None:
    """kill -9 of a load that replaces a replica's tables with a newer bootstrap dump, each time once a random
    number of the new copy's files are there: a reader of the replica then sees its old copy or the new one
    whole, never a mix; a re-run ends at the new bootstrap."""
    source_url = f"sqlite:///{tmp_path / 'source.db'}"
    first, dumps = str(tmp_path / "first"), str(tmp_path / "dumps")
    with Metastore.connect(source_url, warehouse=tmp_path / "source-wh") as source:
        create_tables(source)
        run_workload(source, 3, 8, lambda: None)
        repl.dump(source, first)
        run_workload(source, 5, 12, lambda: None)
        newer = repl.dump(source, dumps)
        want = view(source, TABLES)
    files = len(json.loads(Path(newer.path, "plan.json").read_text())["plan"]["files"])
    rng = random.Random(11)
    inside = 0  # kills that found the replica still at its old copy, with new files copied
    for trial in range(REPLACE_TRIALS):
        target_url, wh = f"sqlite:///{tmp_path / f'replica-{trial}.db'}", tmp_path / f"replica-wh-{trial}"
        with Metastore.connect(target_url, warehouse=wh) as replica:
            repl.load(replica, first)
            old = view(replica, TABLES)
        assert old != want

        def copied(wh: Path = wh) -> int:
            """Files below the new copy's directories; os.walk passes over a directory the loader removes
            while it is listed (pathlib's glob raises)."""
            suffix = f"-{newer.last_event_id:012d}"
            return sum(
                len(names)
                for root, _, names in os.walk(wh)
                if any(part.endswith(suffix) for part in Path(root).relative_to(wh).parts)
            )

        load = ["load", "--metastore", target_url, "--warehouse", str(wh), dumps]
        for _ in range(MAX_KILLS):
            at = rng.randint(1, files)
            if not _kill_when(_repl(load, STEP_DELAY), lambda _, at=at: copied() >= at):
                break
            with Metastore.connect(target_url, warehouse=wh) as replica:
                assert view(replica, TABLES) in (old, want), (
                    f"trial {trial}: a mix of the old and the new copy"
                )
                state = replica.repl_state("default")
                assert state is not None
                inside += state.last_event_id < newer.last_event_id
        final = _repl(load, None)
        _, err = final.communicate(timeout=120)
        assert final.returncode == 0, err.decode()
        with Metastore.connect(target_url, warehouse=wh) as replica:
            assert view(replica, TABLES) == want, f"trial {trial}"
            state = replica.repl_state("default")
            assert state is not None and state.last_event_id == newer.last_event_id
            for table in TABLES:
                location = Path(replica.table(table).location)
                assert location.name.endswith(f"-{newer.last_event_id:012d}")
                for path in location.rglob("bucket_*"):
                    if not path.name.endswith("_flush_length"):
                        recorded = replica.repl_file_state(str(path))
                        assert recorded is not None and recorded[0] == path.stat().st_size, path
    assert inside >= REPLACE_TRIALS  # every loader died at least once inside the replace
