"""Helpers for reader tests: real metastores, tables streamed with StreamingConnection, deletes written as
``delete_delta`` files with AcidWriter (the layout of Hive's split update, docs/format.md, Event files)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.acid.codec import decode_writer_id
from acidstream.acid.names import bucket_file, delete_delta_dir
from acidstream.acid.orc import AcidWriter, WriterOptions

RowId = tuple[int, int, int]
DELIM = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()


def create(ms: Metastore, name: str, columns: str, extra: str = "") -> None:
    ms.execute(
        f"CREATE TABLE db.{name} ({columns}) {extra} STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )


def connect(ms: Metastore, table: str, *, batch: int = 1, **kw: Any) -> StreamingConnection:
    b = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("db")
        .with_table(table)
        .with_record_writer(DELIM)
        .with_transaction_batch_size(batch)
    )
    if "static" in kw:
        b = b.with_static_partition_values(kw.pop("static"))
    if "write_id" in kw:
        b = b.with_write_id(kw.pop("write_id")).with_statement_id(kw.pop("statement_id"))
    return b.connect()


def stream(ms: Metastore, table: str, txns: Iterable[tuple[dict[str, list[Any]], bool]], **kw: Any) -> None:
    """One transaction per ``(columns, commit?)`` through one connection (``batch`` txns per file)."""
    with connect(ms, table, **kw) as conn:
        for data, commit in txns:
            conn.begin_transaction()
            conn.write_batch(pa.table(data))
            if commit:
                conn.commit_transaction()
            else:
                conn.abort_transaction()


def delete_rows(
    ms: Metastore,
    table: str,
    row_ids: Sequence[RowId],
    *,
    commit: bool | None = True,
    partition_dir: str | None = None,
    file_bucket: int | None = None,
) -> int:
    """Delete events for ``row_ids`` in one new txn (``commit`` None leaves it open); returns its write id."""
    handle = ms.table(f"db.{table}")
    txn = ms.open_txns(1)[0]
    [(_, write_id)] = ms.allocate_table_write_ids([txn], handle.full_name)
    write_delete_events(
        ms, table, write_id, row_ids, partition_dir or handle.location, file_bucket=file_bucket
    )
    if commit:
        ms.commit_txn(txn)
    elif commit is False:
        ms.abort_txn(txn)
    return write_id


def write_delete_events(
    ms: Metastore,
    table: str,
    write_id: int,
    row_ids: Sequence[RowId],
    directory: str,
    *,
    file_bucket: int | None = None,
) -> None:
    """``directory/delete_delta_w_w/bucket_N`` files, N the writer id of each ROW__ID's bucket property (or
    ``file_bucket``, to misplace events deliberately); events sorted as Hive writes them."""
    handle = ms.table(f"db.{table}")
    by_file: dict[int, list[RowId]] = defaultdict(list)
    for rid in row_ids:
        by_file[decode_writer_id(rid[1]) if file_bucket is None else file_bucket].append(rid)
    for bucket, ids in by_file.items():
        ids.sort()
        keys = pa.table(
            {
                "originalTransaction": pa.array([i[0] for i in ids], pa.int64()),
                "bucket": pa.array([i[1] for i in ids], pa.int32()),
                "rowId": pa.array([i[2] for i in ids], pa.int64()),
            }
        )
        path = f"{directory}/{delete_delta_dir(write_id, write_id)}/{bucket_file(bucket)}"
        writer = AcidWriter(
            pafs.LocalFileSystem(), path, handle.columns, options=WriterOptions(), side_file=False
        )
        writer.delete(write_id, keys)
        writer.close()


def row_id(r: dict[str, Any]) -> RowId:
    rid = r["ROW__ID"]
    return rid["writeid"], rid["bucketid"], rid["rowid"]


def sorted_rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=repr)
