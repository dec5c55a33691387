"""The answer to a metastore COMMIT lost on the way back (PostgreSQL behind a proxy that drops it), at the calls
that end a compaction and at a txn's commit.

A compaction's end (refused, failed, compacted, cleaned) is asked again on a new connection and finds itself
done, where it raised ``No compaction queue entry N`` for a compaction that had ended as asked. A txn's commit
whose database is not reached again in time says its outcome is unknown, naming the txn: never a retryable
error for a commit that happened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from acidstream import Metastore
from acidstream.errors import CommitOutcomeUnknown
from acidstream.metastore import TxnStatus
from support.dropproxy import DropProxy, drop_proxy

#: PostgreSQL's COMMIT as the client sends it (a simple query), not a statement that names a commit
COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"
POSTGRES = [pytest.param("postgresql", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.parametrize("metastore_url", POSTGRES, indirect=True), pytest.mark.timeout(120)]


@pytest.fixture
def proxy(metastore_url: str) -> Iterator[DropProxy]:
    with drop_proxy(metastore_url) as p:
        yield p


@pytest.fixture
def ms(metastore_url: str, warehouse: Path, proxy: DropProxy) -> Iterator[Metastore]:
    with Metastore.connect(proxy.url(metastore_url), warehouse=warehouse, db_wait_timeout=5) as m:
        m.execute("CREATE TABLE t (id int) TBLPROPERTIES ('transactional'='true')")
        yield m


def _refuse(ms: Metastore, cq: int, txn: int) -> None:
    ms.mark_refused(cq, "nothing to compact", txn)


def _fail(ms: Metastore, cq: int, txn: int) -> None:
    ms.mark_failed(cq, "the disk is full", txn)


def _compact(ms: Metastore, cq: int, txn: int) -> None:
    ms.mark_compacted(cq, txn)


def _clean(ms: Metastore, cq: int, txn: int) -> None:
    ms.mark_cleaned(cq)


def _published(ms: Metastore, cq: int, txn: int) -> None:
    ms.begin_publish(cq, txn, {"outputs": [], "inputs": []})


def _ready(ms: Metastore, cq: int, txn: int) -> None:
    _published(ms, cq, txn)
    ms.mark_compacted(cq, txn)
    assert ms.claim_cleaning(cq)


Step = Callable[[Metastore, int, int], None]


@pytest.mark.parametrize(
    ("before", "end", "state"),
    [
        (None, _refuse, "refused"),
        (None, _fail, "failed"),
        (_published, _compact, "ready for cleaning"),
        (_ready, _clean, "succeeded"),
    ],
    ids=["refused", "failed", "compacted", "cleaned"],
)
def test_a_compaction_end_whose_answer_is_lost_is_done_once(
    ms: Metastore, proxy: DropProxy, before: Step | None, end: Step, state: str
) -> None:
    cq = ms.compact("default.t")
    claimed = ms.find_next_compaction("worker-1")
    assert claimed is not None and claimed.txn_id is not None
    if before is not None:
        before(ms, cq, claimed.txn_id)
    proxy.lose_answer_to(COMMIT)
    end(ms, cq, claimed.txn_id)  # run again on a new connection: it finds the entry ended as asked
    assert proxy.dropped == 1
    assert ms.get_compaction(cq).state == state
    assert ms.get_txn_state(claimed.txn_id) is not TxnStatus.OPEN


def test_a_commit_whose_database_is_not_reached_again_has_an_unknown_outcome(
    ms: Metastore, proxy: DropProxy, metastore_url: str, warehouse: Path
) -> None:
    (txn,) = ms.open_txns(1)
    proxy.lose_answer_to(COMMIT, then=proxy.cut)  # the database is out of reach from then on
    with pytest.raises(CommitOutcomeUnknown) as unknown:
        ms.commit_txn(txn)
    assert not unknown.value.retryable and unknown.value.txn_id == txn
    assert f"txnid:{txn}" in str(unknown.value) and "show txns" in str(unknown.value)
    with Metastore.connect(metastore_url, warehouse=warehouse) as direct:
        assert direct.get_txn_state(txn) is TxnStatus.COMMITTED  # it had happened
