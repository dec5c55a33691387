"""A request Hive's compaction queue declines is reported as declined: ``compact2`` answers "not accepted" with
the id of the request already there (one of the other kind initiated, or one ready for cleaning with nothing
written since); acidstream raises ``CompactionDeclined`` naming it, where it returned that request's id and
``AND WAIT`` reported that request's state as the new one's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acidstream.compactor import CompactorConfig
from acidstream.compactor.worker import threaded_runner
from acidstream.errors import CompactionDeclined
from acidstream.metastore import MetastoreFacade
from acidstream.spark.compact import run_requests
from hive4.test_hive4_metastore_backend import create_table
from hive4.test_hive4_remote_worker import stream
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("hive_metastore.ttypes", reason="the hive extra (pyiceberg[hive]) is not installed")


@pytest.fixture
def queue(hive4_metastore: str) -> Iterator[MetastoreFacade]:
    with MetastoreFacade.connect(hive4_metastore, lock_wait_timeout=5) as ms:
        yield ms


def test_a_request_hive_declines_names_the_one_queued(hive4_metastore: str, queue: MetastoreFacade) -> None:
    table = create_table(hive4_metastore)
    stream(queue, table, [(1, "a"), (2, "b"), (3, "c")])
    minor = queue.compact(table, kind="minor")
    assert queue.compact(table, kind="minor") == minor  # the same kind: Hive's initiated request does it
    with pytest.raises(CompactionDeclined, match=rf"minor compaction {minor} of it is initiated") as declined:
        queue.compact(table, kind="major")
    assert (declined.value.queued_id, declined.value.queued_state) == (minor, "initiated")
    run_requests(queue, [minor], threaded_runner(1), CompactorConfig())
    assert queue.get_compaction(minor).state == "ready for cleaning"
    # nothing written since the minor one: Hive declines a major request, of either kind
    for ask in (
        lambda: queue.compact(table, kind="major"),
        lambda: queue.execute(f"ALTER TABLE {table} COMPACT 'major' AND WAIT"),
        lambda: queue.compact(table, kind="minor"),
    ):
        with pytest.raises(
            CompactionDeclined, match=rf"minor compaction {minor} of it is ready for cleaning"
        ):
            ask()
    assert [c.id for c in queue.show_compactions() if c.table_name == table] == [minor]
    stream(queue, table, [(4, "d")])
    major = queue.compact(table, kind="major")  # something new: accepted
    assert major != minor and queue.get_compaction(major).kind == "major"
