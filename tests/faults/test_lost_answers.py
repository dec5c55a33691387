"""The answer to a metastore commit lost on the way back (PostgreSQL behind a proxy that drops it): the client
retries on a new connection, and what it asked for happens once: no orphan txn, compaction claim, reader
registration or lock is left behind for a timeout to clean up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream import Metastore
from acidstream.metastore import LockComponent, LockLevel, LockType, TxnStatus
from support.dropproxy import DropProxy, drop_proxy

POSTGRES = [pytest.param("postgresql", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.parametrize("metastore_url", POSTGRES, indirect=True), pytest.mark.timeout(60)]


@pytest.fixture
def proxy(metastore_url: str) -> Iterator[DropProxy]:
    with drop_proxy(metastore_url) as p:
        yield p


@pytest.fixture
def ms(metastore_url: str, warehouse: Path, proxy: DropProxy) -> Iterator[Metastore]:
    with Metastore.connect(proxy.url(metastore_url), warehouse=warehouse) as m:
        for name in ("t", "u"):
            m.execute(f"CREATE TABLE {name} (id int) TBLPROPERTIES ('transactional'='true')")
        yield m


def _open(ms: Metastore) -> list[int]:
    return [t.txn_id for t in ms.show_txns() if t.state is TxnStatus.OPEN]


def test_txns_opened_once(ms: Metastore, proxy: DropProxy) -> None:
    proxy.lose_answer_to(b"COMMIT")
    (txn,) = ms.open_txns(1)
    proxy.lose_answer_to(b"COMMIT")
    [(batch_first, _), (batch_second, _)] = ms.open_txns_with_write_ids(2, "default.t")
    assert proxy.dropped == 2
    assert _open(ms) == [txn, batch_first, batch_second]


def test_compaction_claimed_once(ms: Metastore, proxy: DropProxy) -> None:
    requests = {ms.compact("default.t"), ms.compact("default.u")}
    proxy.lose_answer_to(b"COMMIT")
    claimed = ms.find_next_compaction("worker-1")
    assert proxy.dropped == 1
    assert claimed is not None and claimed.id in requests
    states = {c.id: c.state for c in ms.show_compactions()}
    assert states == {i: "working" if i == claimed.id else "initiated" for i in requests}
    assert _open(ms) == [claimed.txn_id]


def test_reader_registered_and_lock_taken_once(ms: Metastore, proxy: DropProxy) -> None:
    proxy.lose_answer_to(b"COMMIT")
    reader = ms.register_reader("default.t")
    assert [r[0] for r in ms.active_readers("default.t")] == [reader.reader_id]
    proxy.lose_answer_to(b"COMMIT")
    lock = ms.lock([LockComponent(LockType.SHARED_READ, LockLevel.TABLE, "default", "t")])
    assert proxy.dropped == 2
    assert {info.lock_id for info in ms.show_locks("default.t")} == {lock.lock_id}
