"""Hive 4 judges a table we wrote: at a snapshot, Hive's reader, read every way a Hive query reads, and ours
return the same rows under the same ROW__IDs, and (where the test says) exactly the rows it knows committed.

Two readers agreeing is not enough: a damaged file both read alike, or a snapshot both take wrongly, passes
such a comparison. So the judge also holds the rows to what the test committed (``expected``), takes the snapshot
from the Hive Metastore where the table lives there (Hive computes the write ids it reads at), reads through
the split generation production queries use (footer-reading ETL splits, a split per stripe), and checks that no
ROW__ID repeats within a directory.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections import Counter
from collections.abc import Iterable
from decimal import Context, Decimal
from typing import Any

import pytest

from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.catalog import Metastore
from acidstream.errors import NotEnoughHistory
from hive4.referee import HiveError, HiveRow, Referee

#: The start of Hive's ``ACID_NOT_ENOUGH_HISTORY`` message.
NOT_ENOUGH_HISTORY = "Not enough history available for"


def hive_metastore_uri(ms: Metastore) -> str | None:
    """The ``thrift://`` URI of the Hive Metastore ``ms`` is a client of; None for acidstream's metastore."""
    url = getattr(ms, "url", None)
    return url if isinstance(url, str) and url.startswith("thrift://") else None


def hive_snapshot(
    hive4: Referee, ms: Metastore, table_name: str, txns: ValidTxnList | None = None
) -> tuple[ValidTxnList, ValidWriteIdList]:
    """The snapshot a Hive query takes of the table, from Hive's own metastore client: its txns now (or
    ``txns``) and the table's write ids at them. Where the table lives in our metastore, ours."""
    uri = hive_metastore_uri(ms)
    if uri is None:
        txns = txns if txns is not None else ms.snapshot()
        return txns, ms.get_valid_write_ids(table_name, snapshot=txns)
    db, name = table_name.split(".", 1)
    answer = hive4.metastore(uri, "snapshot", db=db, table=name, txns=None if txns is None else str(txns))
    return ValidTxnList.parse(answer["txns"]), ValidWriteIdList.parse(answer["writeids"])


def hive_rows(
    hive4: Referee,
    ms: Metastore,
    table_name: str,
    txns: ValidTxnList,
    *,
    vectorized: bool = False,
    splits: str = "hybrid",
    write_ids: ValidWriteIdList | None = None,
) -> list[HiveRow]:
    """What Hive reads of every partition directory of the table at ``txns`` (see ``Referee.read``), at
    ``write_ids`` (default: our metastore's at ``txns``); partition values follow the data columns, as in our
    scans. No ROW__ID may repeat within a directory."""
    table = ms.table(table_name)
    if write_ids is None:
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
        read = hive4.read(
            location, columns, write_ids, txns, buckets=buckets, vectorized=vectorized, splits=splits
        )
        repeated = [rid for rid, n in Counter(rid for rid, _ in read).items() if n > 1]
        assert not repeated, f"{location}: ROW__IDs read twice: {repeated[:5]}"
        rows += [(row_id, (*row, *values)) for row_id, row in read]
    return sorted(rows)


def our_rows(
    ms: Metastore, table_name: str, txns: ValidTxnList, write_ids: ValidWriteIdList | None = None
) -> list[tuple[tuple[int, int, int], tuple[Any, ...]]]:
    """What our reader reads at ``write_ids`` (default: our metastore's at ``txns``)."""
    table = ms.table(table_name)
    names = [c.name for c in table.all_columns]
    snapshot = write_ids if write_ids is not None else ms.get_valid_write_ids(table_name, snapshot=txns)
    scanned = table.scan(with_row_id=True, snapshot=snapshot)
    return sorted(
        (
            (r["ROW__ID"]["writeid"], r["ROW__ID"]["bucketid"], r["ROW__ID"]["rowid"]),
            tuple(r[n] for n in names),
        )
        for r in scanned.to_arrow().to_pylist()
    )


def as_hive(value: Any) -> Any:
    """One of our scan's values as the referee prints Hive's (see ``hive4.referee``)."""
    if isinstance(value, Decimal):
        return format(value.normalize(Context(prec=40)), "f")  # decimal(38,s) exceeds the default 28 digits
    if isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float):
        return value
    if isinstance(value, list):
        return [list(map(as_hive, v)) if isinstance(v, tuple) else as_hive(v) for v in value]
    if isinstance(value, dict):
        return [as_hive(v) for v in value.values()]
    return value


def hashable(value: Any) -> Any:
    """``value`` with its lists (Hive's structs, arrays and maps) as tuples, to count rows."""
    return tuple(map(hashable, value)) if isinstance(value, list | tuple) else value


def judge(
    hive4: Referee,
    ms: Metastore,
    table_name: str,
    txns: ValidTxnList | None = None,
    *,
    expected: Iterable[tuple[Any, ...]] | None = None,
    splits: Iterable[str] = ("hybrid", "etl"),
) -> list[HiveRow]:
    """Asserts that Hive 4's readers (row-mode and vectorized, each through ``splits``: Hive's default split
    strategy and the footer-reading ETL one) and ours read the same rows and ROW__IDs at ``txns``; returns them.

    ``txns``: default now. Where the table lives in a Hive Metastore, the snapshot (txns now, and the table's
    write ids at ``txns``) is the Hive Metastore's own, as a Hive query takes it; our metastore client must
    compute the same write ids.
    ``expected``: the rows (data columns, then partition values) the test knows committed at ``txns``; every
    reader must return exactly these, each once.
    Where Hive refuses a snapshot older than a compacted base (its history is gone), we must refuse it too:
    then it returns no rows (and ``expected`` is not consulted)."""
    txns, write_ids = hive_snapshot(hive4, ms, table_name, txns)
    if hive_metastore_uri(ms) is not None:
        ours_ids = ms.get_valid_write_ids(table_name, snapshot=txns)
        assert str(ours_ids) == str(write_ids), f"{table_name} at {txns}: our write ids differ from Hive's"
    ways = [(vectorized, s) for s in splits for vectorized in (False, True)]
    try:
        theirs = hive_rows(hive4, ms, table_name, txns, write_ids=write_ids, splits=ways[0][1])
    except HiveError as exc:
        if NOT_ENOUGH_HISTORY not in str(exc):
            raise
        with pytest.raises(NotEnoughHistory) as ours_refused:
            our_rows(ms, table_name, txns, write_ids)
        assert str(ours_refused.value).split(".")[0] in str(exc)  # the same snapshot
        return []
    ours = [(rid, tuple(as_hive(v) for v in row)) for rid, row in our_rows(ms, table_name, txns, write_ids)]
    assert ours == theirs, f"{table_name} at {txns}: {differences(ours, theirs, 'ours', 'Hive')}"
    for vectorized, s in ways[1:]:
        read = hive_rows(hive4, ms, table_name, txns, vectorized=vectorized, splits=s, write_ids=write_ids)
        way = f"{'vectorized' if vectorized else 'row-mode'}, {s} splits"
        assert read == theirs, f"{table_name} at {txns}: {differences(read, theirs, way, 'row-mode')}"
    if expected is not None:
        got = [row for _, row in theirs]
        assert Counter(map(hashable, got)) == Counter(map(hashable, expected)), (
            f"{table_name} at {txns}: {differences(got, expected, 'read', 'committed')}"
        )
    return theirs


def differences(left: Iterable[Any], right: Iterable[Any], left_name: str, right_name: str) -> str:
    """What only one side has (the first few of each, counted as multisets)."""
    a, b = Counter(map(hashable, left)), Counter(map(hashable, right))
    only = [
        (name, sorted((x - y).elements(), key=repr)) for name, x, y in ((left_name, a, b), (right_name, b, a))
    ]
    return "; ".join(f"only {name} ({len(rows)}): {rows[:8]}" for name, rows in only if rows)
