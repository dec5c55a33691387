"""Random streaming histories and deletes against an in-memory model of the visible rows.

Each drawn history: streaming connections with random batch sizes whose txns commit or abort, rows spread
over partitions (the default partition included) and two buckets, interleaved with delete txns (committed
or aborted) of random visible rows. After every step the scan must equal the model, and every snapshot
taken earlier must still show exactly the rows it showed then.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readhelpers import connect, create, row_id, write_delete_events

from acidstream import Metastore
from acidstream.acid.writeids import ValidWriteIdList

PARTITIONS = ["a", "b", None]
_names = itertools.count()

rows_st = st.lists(st.tuples(st.integers(-50, 50), st.sampled_from(PARTITIONS)), max_size=6)
stream_st = st.tuples(
    st.just("stream"), st.integers(1, 4), st.lists(st.tuples(rows_st, st.booleans()), min_size=1, max_size=5)
)
delete_st = st.tuples(st.just("delete"), st.lists(st.integers(0, 10_000), max_size=5), st.booleans())
history_st = st.lists(st.one_of(stream_st, delete_st), min_size=1, max_size=6)

Model = dict[str, tuple[int, str | None]]  # msg (unique per inserted row) → (id, partition)


def visible(ms: Metastore, table: str, **kw: Any) -> Model:
    rows = ms.table(f"db.{table}").scan(**kw).to_arrow().to_pylist()
    model = {r["msg"]: (r["id"], r["p"]) for r in rows}
    assert len(model) == len(rows), "a row came back twice"
    return model


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=history_st)
def test_scan_matches_model(ms: Metastore, history: list[tuple[Any, ...]]) -> None:
    table = f"m{next(_names)}"
    create(ms, table, "id int, msg string", "PARTITIONED BY (p string) CLUSTERED BY (id) INTO 2 BUCKETS")
    location = ms.table(f"db.{table}").location
    model: Model = {}
    snapshots: list[tuple[ValidWriteIdList, Model]] = []
    serial = itertools.count()
    for step in history:
        if step[0] == "stream":
            _, batch, txns = step
            with connect(ms, table, batch=batch) as conn:
                for rows, commit in txns:
                    data = {f"r{next(serial)}": (i, p) for i, p in rows}
                    conn.begin_transaction()
                    conn.write_batch(
                        pa.table(
                            {
                                "id": pa.array([v[0] for v in data.values()], pa.int32()),
                                "msg": list(data),
                                "p": [v[1] for v in data.values()],
                            }
                        )
                    )
                    if commit:
                        conn.commit_transaction()
                        model.update(data)
                    else:
                        conn.abort_transaction()
        else:
            _, picks, commit = step
            current = ms.table(f"db.{table}").scan(with_row_id=True).to_arrow().to_pylist()
            chosen = (
                {current[i % len(current)]["msg"]: current[i % len(current)] for i in picks}
                if current
                else {}
            )
            txn = ms.open_txns(1)[0]
            [(_, write_id)] = ms.allocate_table_write_ids([txn], f"db.{table}")
            for part in PARTITIONS:
                ids = [row_id(r) for r in chosen.values() if r["p"] == part]
                if ids:
                    name = "__HIVE_DEFAULT_PARTITION__" if part is None else part
                    write_delete_events(ms, table, write_id, ids, str(Path(location) / f"p={name}"))
            if commit:
                ms.commit_txn(txn)
                for msg in chosen:
                    del model[msg]
            else:
                ms.abort_txn(txn)
        assert visible(ms, table) == model
        assert ms.table(f"db.{table}").scan().count() == len(model)
        snapshots.append((ms.get_valid_write_ids(f"db.{table}"), dict(model)))
    for snapshot, expected in snapshots:
        assert visible(ms, table, snapshot=snapshot) == expected
        assert visible(ms, table, snapshot=str(snapshot)) == expected
    for part in PARTITIONS:
        expected = {m: v for m, v in model.items() if v[1] == part}
        assert visible(ms, table, partition_filter={"p": part}) == expected
