"""Publication and scans: a scan registers for as long as it reads; a compaction caught half-way through moving
its output into place (several directories cannot be renamed at once) is invisible to scans until complete."""

from __future__ import annotations

from typing import Any

import pytest
from compactorhelpers import dirs, rows_with_ids

from acidstream import Metastore
from acidstream.compactor import Compactor, worker
from acidstream.compactor.publish import move_into_place
from read.readhelpers import create, delete_rows, stream


def txns(*ids: int) -> list[tuple[dict[str, list[object]], bool]]:
    return [({"id": [i], "msg": [f"m{i}"]}, True) for i in ids]


class Crash(BaseException):
    """Stands for the worker process dying (not an Exception: nothing in the worker handles it)."""


def test_scans_hold_their_registration_while_reading(ms: Metastore) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2, 3))
    table = ms.table("db.t")
    scan = table.scan()
    assert [r[0] for r in ms.active_readers("db.t")] == [scan.reader_id]
    reader = scan.to_batches()
    next(iter(reader))
    assert len(ms.active_readers("db.t")) == 1
    assert sum(b.num_rows for b in reader) == 2
    assert ms.active_readers("db.t") == []  # exhausted: released
    assert table.scan().count() == 3 and ms.active_readers() == []
    with table.scan() as scan:
        scan.plan_files()
        assert len(ms.active_readers()) == 1
    assert ms.active_readers() == []
    scan = table.scan()
    del scan  # garbage collected: released
    assert ms.active_readers() == []


def test_a_half_published_compaction_is_ignored_until_complete(
    ms: Metastore, compactor: Compactor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker dies after moving the delete delta of a minor compaction but not its insert delta: taken
    alone, that delete delta would hide every insert delta it covers. Scans read the inputs instead; recovery
    completes the publication."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2, 3))
    victim = next(rid for rid, row in rows_with_ids(ms, "db.t") if row[0] == 2)
    delete_rows(ms, "t", [victim])
    stream(ms, "t", txns(5))
    expected = rows_with_ids(ms, "db.t")

    def first_then_crash(fs: Any, tmp: str, path: str, outputs: list[str]) -> None:
        move_into_place(fs, tmp, path, outputs[:1])
        raise Crash

    monkeypatch.setattr(worker, "move_into_place", first_then_crash)
    with pytest.raises(Crash):
        compactor.compact("db.t", kind="minor")
    monkeypatch.undo()
    assert "delete_delta_0000001_0000005" in dirs(ms, "db.t")
    assert "delta_0000001_0000005" not in dirs(ms, "db.t")
    assert rows_with_ids(ms, "db.t") == expected
    [info] = ms.show_compactions()
    assert info.state == "working" and info.publish_id is not None
    assert compactor.clean() == []
    ms.abort_txn(info.txn_id)  # type: ignore[arg-type] # its heartbeats stopped: the housekeeper's doing
    assert compactor.recover() == [(info.id, "ready for cleaning")]
    assert "delta_0000001_0000005" in dirs(ms, "db.t")
    assert rows_with_ids(ms, "db.t") == expected
    compactor.clean()
    assert dirs(ms, "db.t") == ["delete_delta_0000001_0000005", "delta_0000001_0000005"]
    assert rows_with_ids(ms, "db.t") == expected


def test_a_scan_planned_during_publication_keeps_the_inputs(ms: Metastore, compactor: Compactor) -> None:
    """A scan registered before the publication completed ignores the output even after it completes, and the
    cleaner keeps the inputs it reads."""
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2))
    expected = rows_with_ids(ms, "db.t")
    scan = ms.table("db.t").scan(with_row_id=True)  # registered before the compaction below publishes
    compactor.compact("db.t", kind="major")
    plan = scan.plan_files()  # lists after the publication: base_2 is there, but may have been half-way
    assert {p.rsplit("/", 2)[-2] for t in plan.tasks for f in t.insert_files for p in [f.path]} == {
        "delta_0000001_0000001",
        "delta_0000002_0000002",
    }
    assert compactor.clean() == []
    assert sorted((r["ROW__ID"]["writeid"], r["id"]) for r in scan.to_arrow().to_pylist()) == [
        (rid[0], row[0]) for rid, row in expected
    ]
    assert compactor.clean()[0].state == "succeeded"
