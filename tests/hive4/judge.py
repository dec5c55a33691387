"""Hive 4 judges a table we wrote: at a snapshot of our metastore, Hive's reader and ours return the same rows
under the same ROW__IDs."""

from __future__ import annotations

from typing import Any

import pytest

from acidstream.acid.writeids import ValidTxnList
from acidstream.catalog import Metastore
from acidstream.errors import NotEnoughHistory
from hive4.referee import HiveError, HiveRow, Referee

#: The ways of Hive's reader the judge compares beyond the first (row mode, Hive's default "hybrid" splits):
#: (vectorized, split strategy); "etl" reads every file's footer at split generation, a split per stripe.
READS = ((True, "hybrid"), (False, "etl"), (True, "etl"))

#: The start of Hive's ``ACID_NOT_ENOUGH_HISTORY`` message.
NOT_ENOUGH_HISTORY = "Not enough history available for"


def hive_rows(
    hive4: Referee,
    ms: Metastore,
    table_name: str,
    txns: ValidTxnList,
    *,
    vectorized: bool = False,
    splits: str = "hybrid",
) -> list[HiveRow]:
    """What Hive reads of every partition directory of the table at ``txns`` (see ``Referee.read``); partition
    values follow the data columns, as in our scans."""
    table = ms.table(table_name)
    write_ids = ms.get_valid_write_ids(table_name, snapshot=txns)
    columns = [(c.name, str(c.type)) for c in table.columns]
    buckets = table.num_buckets if table.num_buckets > 0 else None
    places = (
        [(tuple(p.values), p.location) for p in ms.list_partitions(table_name)]
        if table.is_partitioned
        else [((), table.location)]
    )
    rows = []
    for values, location in places:
        for row_id, row in hive4.read(
            location, columns, write_ids, txns, buckets=buckets, vectorized=vectorized, splits=splits
        ):
            rows.append((row_id, (*row, *values)))
    return sorted(rows)


def our_rows(
    ms: Metastore, table_name: str, txns: ValidTxnList
) -> list[tuple[tuple[int, int, int], tuple[Any, ...]]]:
    table = ms.table(table_name)
    names = [c.name for c in table.all_columns]
    scanned = table.scan(with_row_id=True, snapshot=ms.get_valid_write_ids(table_name, snapshot=txns))
    return sorted(
        (
            (r["ROW__ID"]["writeid"], r["ROW__ID"]["bucketid"], r["ROW__ID"]["rowid"]),
            tuple(r[n] for n in names),
        )
        for r in scanned.to_arrow().to_pylist()
    )


def judge(hive4: Referee, ms: Metastore, table_name: str, txns: ValidTxnList | None = None) -> list[HiveRow]:
    """Asserts that Hive 4's two readers (row-mode and vectorized) and ours read the same rows and ROW__IDs at
    ``txns`` (now by default); returns them.
    Where Hive refuses a snapshot older than a compacted base (its history is gone), we must refuse it too:
    then it returns no rows."""
    txns = txns if txns is not None else ms.snapshot()
    try:
        theirs = hive_rows(hive4, ms, table_name, txns)
    except HiveError as exc:
        if NOT_ENOUGH_HISTORY not in str(exc):
            raise
        with pytest.raises(NotEnoughHistory) as ours_refused:
            our_rows(ms, table_name, txns)
        assert str(ours_refused.value).split(".")[0] in str(exc)  # the same snapshot
        return []
    ours = our_rows(ms, table_name, txns)
    assert ours == theirs, f"{table_name} at {txns}"
    for vectorized, splits in READS:
        assert hive_rows(hive4, ms, table_name, txns, vectorized=vectorized, splits=splits) == theirs, (
            f"{'vectorized' if vectorized else 'row-mode'}, {splits} splits: {table_name} at {txns}"
        )
    return theirs
