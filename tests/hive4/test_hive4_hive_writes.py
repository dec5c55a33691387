"""We read what Hive 4 writes: a table of a standalone Hive Metastore, its transactions and write ids taken
from that metastore and its files written by Hive's ``OrcRecordUpdater`` — the writer under Hive's streaming
API (a transaction batch in one delta, flushed per commit, an aborted transaction, a batch left open with its
side files) and its DML (split updates and deletes in ``delete_delta`` directories). Our directory-level read
path (``read.planning``, no acidstream metastore) at the Hive Metastore's snapshot returns exactly the rows and
ROW__IDs Hive's own reader returns, and the rows the committed transactions wrote.

Hive's streaming client itself (``org.apache.hive:hive-streaming``) is not published for Hive 4 on Maven
Central, so its metastore calls are made here one by one, as it makes them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream.acid.codec import BucketCodec
from acidstream.acid.types import Column, parse_type
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.metastore.models import Table
from acidstream.read.merge import ROW_ID, ROW_ID_TYPE
from acidstream.read.planning import plan_partition
from acidstream.read.scan import bucket_readers
from acidstream.storage import table_filesystem
from hive4.referee import HiveRow, Referee

pytestmark = pytest.mark.hive4

COLUMNS = [("id", "int"), ("msg", "string")]
_tables = itertools.count()


def read_directory(
    location: str, columns: Sequence[tuple[str, str]], txns: str, write_ids: str
) -> list[HiveRow]:
    """Our read path over one table or partition directory at a snapshot given as Hive's strings."""
    valid = ValidWriteIdList.parse(write_ids)
    definition = Table(
        db="hive",
        name="t",
        columns=tuple(Column(name, parse_type(type_)) for name, type_ in columns),
        partition_keys=(),
        bucket_columns=(),
        num_buckets=-1,
        bucketing_version=2,
        properties={"transactional": "true"},
        location=location,
        table_id=0,
    )
    fs, path = table_filesystem(location)
    tasks, _ = plan_partition(fs, path, valid, ValidTxnList.parse(txns), (), "")
    schema = pa.schema(
        [pa.field(ROW_ID, ROW_ID_TYPE), *(pa.field(c.name, c.type.to_arrow()) for c in definition.columns)]
    )
    rows = []
    for reader in bucket_readers(definition, tasks, valid, schema, with_row_id=True):
        for r in pa.Table.from_batches(list(reader.batches()), schema=schema).to_pylist():
            rid = r.pop(ROW_ID)
            rows.append(((rid["writeid"], rid["bucketid"], rid["rowid"]), tuple(r.values())))
    return sorted(rows)


class HiveTable:
    """A table of the Hive Metastore written the way Hive's writers do, with the rows it should hold."""

    def __init__(self, hive4: Referee, uri: str, partitions: Sequence[str] = ()) -> None:
        self.hive4, self.uri, self.name = hive4, uri, f"t{next(_tables)}"
        self.location = self._call(
            "create_table",
            columns=[c for c, _ in COLUMNS],
            types=[t for _, t in COLUMNS],
            partition_keys=["part"] if partitions else [],
        )["location"].removeprefix("file:")
        self.dirs = {
            p: self._call("add_partition", values=[p])["location"].removeprefix("file:") for p in partitions
        } or {"": self.location}
        self.committed: dict[str, set[tuple[Any, ...]]] = {d: set() for d in self.dirs}

    def _call(self, call: str, **request: Any) -> dict[str, Any]:
        return self.hive4.metastore(self.uri, call, db="hive", table=self.name, **request)

    def open_batch(self, size: int) -> list[tuple[int, int]]:
        """``open_txns`` then ``allocate_table_write_ids``, as Hive's streaming connection opens a batch."""
        txns = self._call("open_txns", count=size)["txns"]
        return list(zip(txns, self._call("allocate_write_ids", txns=txns)["write_ids"], strict=True))

    def end(self, txn: int, commit: bool) -> None:
        self._call("commit_txn" if commit else "abort_txn", txn=txn)

    def snapshot(self) -> tuple[str, str]:
        answer = self._call("snapshot")
        return answer["txns"], answer["writeids"]

    def judge(self) -> None:
        """At the Hive Metastore's snapshot now, our directory reader returns Hive's rows and ROW__IDs and
        exactly the committed rows."""
        txns, write_ids = self.snapshot()
        for part, location in self.dirs.items():
            theirs = self.hive4.read(location, COLUMNS, write_ids, txns)
            ours = read_directory(location, COLUMNS, txns, write_ids)
            assert ours == theirs, f"{part or self.name} at {txns} / {write_ids}"
            assert self.hive4.read(location, COLUMNS, write_ids, txns, vectorized=True) == theirs
            assert {row for _, row in ours} == self.committed[part]


def stream(
    table: HiveTable, size: int, used: int, *, abort: int | None = None, leave_open: bool = False
) -> None:
    """One transaction batch of ``size`` as Hive's streaming connection writes it: one delta of the batch's
    write ids per directory, a flush (stripe, side file) per commit, ``used`` transactions used (``abort``
    aborted, a last one left open without commit when ``leave_open``), the unused ones aborted at close."""
    txns = table.open_batch(size)
    first, last = txns[0][1], txns[-1][1]
    for k, (txn, write_id) in enumerate(txns[:used]):
        for part, location in table.dirs.items():
            rows = [(write_id * 100 + i, f"{part} w{write_id}") for i in range(k + 1)]
            table.hive4.write(
                location,
                COLUMNS,
                [("insert", write_id, list(r)) for r in rows],
                bucket=0,
                min_write_id=first,
                max_write_id=last,
                statement_id=-1,  # streaming: delta_<first>_<last>, no statement suffix
                flush="open",
                handle=f"{table.name}/{part}/{first}",
            )
            if k != abort and not (leave_open and k == used - 1):
                table.committed[part] |= set(rows)
        if not (leave_open and k == used - 1):
            table.end(txn, commit=k != abort)
        table.judge()
    if leave_open:
        return
    for part in table.dirs:
        table.hive4.call(op="write", close=f"{table.name}/{part}/{first}")
    for txn, _ in txns[used:]:
        table.end(txn, commit=False)
    table.judge()


@pytest.mark.parametrize("batch", [1, 10])
def test_transaction_batches(hive4: Referee, hive4_metastore: str, batch: int) -> None:
    table = HiveTable(hive4, hive4_metastore, partitions=["a", "b"])
    if batch == 1:
        for k in range(3):
            stream(table, 1, 1, abort=0 if k == 1 else None)
        stream(table, 1, 1, leave_open=True)
    else:
        stream(table, batch, 3, abort=1)
        stream(table, batch, 3, leave_open=True)
    # Hive's updater keeps a side file for batches of several write ids only (one of one closes or aborts whole)
    assert any(Path(table.location).rglob("*_flush_length")) == (batch > 1)
    assert sum(len(rows) for rows in table.committed.values()) == 2 * (2 if batch == 1 else 1 + 3 + 1 + 2)


def test_split_updates_and_deletes(hive4: Referee, hive4_metastore: str) -> None:
    table = HiveTable(hive4, hive4_metastore)
    location = table.location
    codec = BucketCodec.V1.encode(0, 0)
    [(txn, w1)] = table.open_batch(1)
    hive4.write(
        location,
        COLUMNS,
        [("insert", w1, [i, f"r{i}"]) for i in range(10)],
        bucket=0,
        min_write_id=w1,
        max_write_id=w1,
        statement_id=0,
    )
    table.end(txn, commit=True)
    table.committed[""] = {(i, f"r{i}") for i in range(10)}
    table.judge()
    [(txn, w2)] = table.open_batch(1)
    ops: list[Sequence[Any]] = [("delete", w2, [w1, codec, 1]), ("delete", w2, [w1, codec, 2])]
    ops += [("update", w2, [w1, codec, 5], [5, "updated"]), ("insert", w2, [100, "new"])]
    hive4.write(location, COLUMNS, ops, bucket=0, min_write_id=w2, max_write_id=w2, statement_id=0)
    table.end(txn, commit=True)
    table.committed[""] = {r for r in table.committed[""] if r[0] not in (1, 2, 5)} | {
        (5, "updated"),
        (100, "new"),
    }
    table.judge()
    [(txn, w3)] = table.open_batch(1)
    hive4.write(
        location,
        COLUMNS,
        [("delete", w3, [w1, codec, 0])],
        bucket=0,
        min_write_id=w3,
        max_write_id=w3,
        statement_id=0,
    )
    table.end(txn, commit=False)
    table.judge()
    assert {p.name for p in Path(location).iterdir()} >= {
        f"delete_delta_{w2:07d}_{w2:07d}_0000",
        f"delta_{w2:07d}_{w2:07d}_0000",
    }
