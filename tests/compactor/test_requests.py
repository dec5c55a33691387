"""A compaction request that is not carried out says so: one of the other kind than a request already queued
for the same target is declined (``CompactionDeclined`` naming that request, nothing queued, the command line
exits 1), where its id was returned and waiting on it reported the other request's outcome as this one's. A
request of the same kind gets the queued one's id: it does what was asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from compactorhelpers import dirs
from test_worker import txns

from acidstream import Metastore
from acidstream.cli import cli
from acidstream.compactor import Compactor
from acidstream.errors import CompactionDeclined, CompactionError
from read.readhelpers import create, stream


def test_a_request_of_the_other_kind_is_declined_naming_the_queued_one(
    ms: Metastore, compactor: Compactor, tmp_path: Path, warehouse: Path
) -> None:
    create(ms, "t", "id int, msg string")
    stream(ms, "t", txns(1, 2, 3))
    minor = ms.compact("db.t", kind="minor")
    assert ms.compact("db.t", kind="minor") == minor
    with pytest.raises(
        CompactionDeclined, match=rf"major compaction of db.t was declined: minor compaction {minor} "
    ):
        ms.compact("db.t", kind="major")
    with pytest.raises(CompactionDeclined) as declined:
        ms.execute("ALTER TABLE db.t COMPACT 'major' AND WAIT")
    assert (declined.value.queued_id, declined.value.queued_state, declined.value.state) == (
        minor,
        "initiated",
        "declined",
    )
    assert isinstance(declined.value, CompactionError) and declined.value.retryable
    assert [(c.id, c.kind) for c in ms.show_compactions()] == [(minor, "minor")]  # nothing else queued
    result = CliRunner().invoke(
        cli,
        ["compact", "db.t", "--major", "--wait", "--metastore", f"sqlite:///{tmp_path / 'ms.db'}"],
        env={"ACIDSTREAM_WAREHOUSE": str(warehouse)},
    )
    assert result.exit_code == 1 and f"minor compaction {minor} of it is initiated" in result.stderr
    assert compactor.compact("db.t", kind="minor").info.id == minor  # the queued one, run now
    assert ms.get_compaction(minor).state == "ready for cleaning"
    # done, the same target takes a major request, which leaves a base though nothing was written since
    assert compactor.compact("db.t", kind="major").info.state == "ready for cleaning"
    compactor.clean()
    assert dirs(ms, "db.t") == ["base_0000003"]
