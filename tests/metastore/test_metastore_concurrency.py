"""Several OS processes hammering one metastore: unique txn ids, gap-free write ids, no lost commit."""

from __future__ import annotations

import multiprocessing
import random
from pathlib import Path

import pytest

from acidstream.metastore import MetastoreFacade, TxnStatus

PROCESSES = 8
CYCLES = 100

Record = tuple[str, list[tuple[int, int]], bool]  # table, [(txn, write id)], committed


def _worker(url: str, warehouse: str, tables: list[str], seed: int) -> list[Record]:
    rnd = random.Random(seed)
    out: list[Record] = []
    with MetastoreFacade.connect(url, warehouse=warehouse) as ms:
        for _ in range(CYCLES):
            table = rnd.choice(tables)
            txns = ms.open_txns(rnd.randint(1, 3))
            pairs = ms.allocate_table_write_ids(txns, table)
            commit = rnd.random() < 0.8
            for txn in txns:
                if commit:
                    ms.commit_txn(txn)
                else:
                    ms.abort_txn(txn)
            snapshot = ms.get_valid_write_ids(table)
            for _txn, wid in pairs:
                assert snapshot.is_write_id_valid(wid) is commit  # read your own commits/aborts
            out.append((table, pairs, commit))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("tables", [["db.t"], ["db.t", "db.u"]], ids=["one-table", "two-tables"])
def test_processes_allocate_consistently(metastore_url: str, warehouse: Path, tables: list[str]) -> None:
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        ms.execute("CREATE DATABASE db")
        for t in tables:
            ms.execute(f"CREATE TABLE {t} (id int) TBLPROPERTIES ('transactional'='true')")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(PROCESSES) as pool:
        results = pool.starmap(
            _worker, [(metastore_url, str(warehouse), tables, seed) for seed in range(PROCESSES)], chunksize=1
        )
    records = [r for per_process in results for r in per_process]
    all_txns = [txn for _t, pairs, _c in records for txn, _w in pairs]
    assert len(all_txns) == len(set(all_txns))
    with MetastoreFacade.connect(metastore_url, warehouse=warehouse) as ms:
        assert ms.get_open_txns().open_ids == ()
        for table in tables:
            batches = [(pairs, c) for t, pairs, c in records if t == table]
            wids = sorted(w for pairs, _c in batches for _t, w in pairs)
            assert wids == list(range(1, len(wids) + 1))  # gap-free from 1
            for pairs, _c in batches:  # aligned with txn order within a batch
                assert [t for t, _w in pairs] == sorted(t for t, _w in pairs)
                assert [w for _t, w in pairs] == list(range(pairs[0][1], pairs[0][1] + len(pairs)))
            snapshot = ms.get_valid_write_ids(table)
            assert snapshot.high_watermark == len(wids)
            for pairs, committed in batches:
                for txn, wid in pairs:
                    assert snapshot.is_write_id_valid(wid) is committed
                    assert ms.get_txn_state(txn) is (TxnStatus.COMMITTED if committed else TxnStatus.ABORTED)
