"""Property test: random open/allocate/commit/abort sequences agree with a small in-memory model of Hive."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList, write_id_list_from_states
from acidstream.errors import MetaException, NoSuchTxnException, TxnAbortedException
from acidstream.metastore import MetastoreFacade, TxnStatus


class Model:
    """Hive's rules, stated directly: txn states, per-table consecutive write ids from 1."""

    def __init__(self, tables: list[str]) -> None:
        self.state: dict[int, TxnStatus] = {}
        self.write_ids: dict[str, dict[int, int]] = {t: {} for t in tables}

    def expected_error(self, txn: int) -> type[Exception] | None:
        return {TxnStatus.ABORTED: TxnAbortedException, TxnStatus.COMMITTED: NoSuchTxnException}.get(
            self.state[txn]
        )

    def allocate(self, txns: list[int], table: str) -> type[Exception] | list[tuple[int, int]]:
        for t in sorted(txns):
            err = self.expected_error(t)
            if err is not None:
                return err
        have = self.write_ids[table]
        done = {t for t in txns if t in have}
        if done and len(done) != len(set(txns)):
            return MetaException
        if not done:
            nxt = len(have) + 1
            for i, t in enumerate(sorted(set(txns))):
                have[t] = nxt + i
        return [(t, have[t]) for t in sorted(set(txns))]

    def expected_list(self, table: str) -> str:
        have = self.write_ids[table]
        opened = [w for t, w in have.items() if self.state[t] is TxnStatus.OPEN]
        aborted = [w for t, w in have.items() if self.state[t] is TxnStatus.ABORTED]
        return str(write_id_list_from_states(table, len(have), opened, aborted))


op = st.one_of(
    st.tuples(st.just("open"), st.integers(1, 3)),
    st.tuples(st.just("alloc"), st.integers(0, 1), st.lists(st.integers(0, 20), min_size=1, max_size=3)),
    st.tuples(st.just("commit"), st.integers(0, 20)),
    st.tuples(st.just("abort"), st.integers(0, 20)),
)

_names = itertools.count()


@pytest.fixture(scope="module")
def shared_ms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetastoreFacade]:
    wh: Path = tmp_path_factory.mktemp("model")
    with MetastoreFacade.connect(f"sqlite:///{wh / 'metastore.db'}", warehouse=wh) as m:
        yield m


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, max_size=25))
def test_write_id_lists_agree_with_model(shared_ms: MetastoreFacade, ops: list[tuple[Any, ...]]) -> None:
    ms = shared_ms
    n = next(_names)
    tables = [f"default.m{n}_a", f"default.m{n}_b"]
    for t in tables:
        ms.execute(f"CREATE TABLE {t} (id int) TBLPROPERTIES ('transactional'='true')")
    model = Model(tables)
    mine: list[int] = []
    past: list[tuple[ValidTxnList, dict[str, ValidWriteIdList]]] = []  # snapshots and what they showed
    for step in ops:
        if step[0] == "open":
            ids = ms.open_txns(step[1])
            assert ids == list(range(ids[0], ids[0] + step[1]))
            mine += ids
            model.state.update(dict.fromkeys(ids, TxnStatus.OPEN))
        elif not mine:
            continue
        elif step[0] == "alloc":
            txns = [mine[i % len(mine)] for i in step[2]]
            expected = model.allocate(txns, tables[step[1]])
            if isinstance(expected, list):
                assert ms.allocate_table_write_ids(txns, tables[step[1]]) == expected
            else:
                with pytest.raises(expected):
                    ms.allocate_table_write_ids(txns, tables[step[1]])
        else:
            txn = mine[step[1] % len(mine)]
            current = model.state[txn]
            if step[0] == "commit":
                if current is TxnStatus.ABORTED:
                    with pytest.raises(TxnAbortedException):
                        ms.commit_txn(txn)
                else:
                    ms.commit_txn(txn)
                    model.state[txn] = TxnStatus.COMMITTED
            else:
                if current is TxnStatus.COMMITTED:
                    with pytest.raises(NoSuchTxnException):
                        ms.abort_txn(txn)
                else:
                    ms.abort_txn(txn)
                    model.state[txn] = TxnStatus.ABORTED
        snapshot = ms.snapshot()
        shown = {t: ms.get_valid_write_ids(t) for t in tables}
        for t in tables:
            assert str(shown[t]) == model.expected_list(t)
            assert str(ms.get_valid_write_ids(t, snapshot=snapshot)) == model.expected_list(t)
        past.append((snapshot, shown))
    for txn in mine:
        assert ms.get_txn_state(txn) is model.state[txn]
    # A snapshot read later shows what it showed then: a txn open then stays invisible, whatever it did since
    for snapshot, shown in past:
        for t in tables:
            later = ms.get_valid_write_ids(t, snapshot=snapshot)
            top = max(later.high_watermark, shown[t].high_watermark)
            assert [later.is_write_id_valid(w) for w in range(1, top + 1)] == [
                shown[t].is_write_id_valid(w) for w in range(1, top + 1)
            ]
