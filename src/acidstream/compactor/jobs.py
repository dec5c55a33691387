"""One compaction task: one bucket of one partition, merged from its input files into its output files.

A :class:`BucketJob` names everything the task needs (files with their readable lengths, the compactor's
snapshot, the output paths inside the compaction's ``_tmp`` directory), so it runs the same in the worker's
threads and in a Spark task. Insert events stream through :func:`merge.merge_sorted` in batches; a major
compaction drops aborted rows and the rows committed delete events hit (holding the bucket's delete keys, as
Hive's reader does), a minor one keeps committed insert and delete events in two files. ROW__IDs are never
changed: mutations planned against the old files stay valid against the new ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from acidstream.acid.evolution import convert, table_columns, text_length, truncate
from acidstream.acid.orc import WriterOptions, iter_event_batches, read_events
from acidstream.acid.orc.events import EVENT_FIELDS, KEY_FIELDS, EventKind, event_schema
from acidstream.acid.types import Column
from acidstream.acid.writeids import RangeResponse, ValidWriteIdList
from acidstream.compactor.event_merge import SortedSource, merge_sorted, sorted_order
from acidstream.compactor.output import Written, write_output
from acidstream.read.deletes import DeleteSet, check_bucket_ids, key_arrays, valid_mask
from acidstream.read.originals import original_events
from acidstream.read.planning import FileSlice
from acidstream.read.prefetch import prefetching
from acidstream.storage import table_filesystem


@dataclass(frozen=True)
class BucketJob:
    """Compact bucket ``bucket_id``: ``inserts`` (base, insert deltas or original files, each a readable
    prefix) and ``deletes`` (delete deltas) into ``insert_path`` and, for a minor compaction, ``delete_path``."""

    location: str
    bucket_id: int
    inserts: tuple[FileSlice, ...]
    deletes: tuple[FileSlice, ...]
    write_ids: ValidWriteIdList
    major: bool
    insert_path: str
    delete_path: str | None
    columns: tuple[Column, ...]
    compression: str
    batch_rows: int
    stripe_bytes: int


@dataclass(frozen=True)
class BucketResult:
    bucket_id: int
    events_read: int
    rows_written: int
    deletes_written: int
    bytes_written: int
    files: tuple[str, ...]


def run_bucket_job(job: BucketJob, encoder: Executor | None = None) -> BucketResult:
    """Run one job; ``encoder`` encodes its stripes while it merges (see :mod:`compactor.output`)."""
    fs, _ = table_filesystem(job.location)
    schema = event_schema(pa.struct([c.to_arrow() for c in job.columns]))
    options = WriterOptions(compression=job.compression, is_base=job.major, streaming_optimizations=False)
    reads = _Counter()
    reading = prefetching(fs, [*job.deletes, *job.inserts])  # on a remote store, fetched side by side
    deletes = DeleteSet.load(reading, job.deletes, job.write_ids) if job.major else None
    sources = _insert_sources(reading, job, schema, deletes, reads)
    inserted = write_output(
        fs, job.insert_path, job.columns, options, merge_sorted(sources), job.stripe_bytes, encoder
    )
    deleted = Written(0, 0, None)
    if not job.major and job.deletes:
        assert job.delete_path is not None
        delete_sources = [_delete_source(reading, piece, job, schema) for piece in job.deletes]
        deleted = write_output(
            fs, job.delete_path, job.columns, options, merge_sorted(delete_sources), job.stripe_bytes, encoder
        )
    return BucketResult(
        job.bucket_id,
        reads.events,
        inserted.events,
        deleted.events,
        inserted.bytes + deleted.bytes,
        tuple(w.path for w in (inserted, deleted) if w.path is not None),
    )


class _Counter:
    events = 0


def _insert_sources(
    fs: pafs.FileSystem, job: BucketJob, schema: pa.Schema, deletes: DeleteSet | None, reads: _Counter
) -> list[SortedSource]:
    originals = [p for p in job.inserts if p.original]
    sources = [
        SortedSource(p.path, p.min_write_id, _insert_events(fs, p, job, schema, deletes, reads))
        for p in job.inserts
        if not p.original
    ]
    if originals:
        sources.append(
            SortedSource(originals[0].path, 0, _original_events(fs, originals, job, schema, deletes, reads))
        )
    return sources


def _insert_events(
    fs: pafs.FileSystem,
    piece: FileSlice,
    job: BucketJob,
    schema: pa.Schema,
    deletes: DeleteSet | None,
    reads: _Counter,
) -> Iterator[pa.RecordBatch]:
    """Committed insert events of one file, not hit by a committed delete (major compaction)."""
    check = (
        not piece.base
        and job.write_ids.is_write_id_range_valid(piece.min_write_id, piece.max_write_id)
        is not RangeResponse.ALL
    )
    hits = (
        deletes if deletes is not None and deletes.may_hit(piece.min_write_id, piece.max_write_id) else None
    )
    for batch in iter_event_batches(fs, piece.path, length=piece.length, batch_rows=job.batch_rows):
        reads.events += batch.num_rows
        yield from _kept(piece.path, batch, job, schema, hits, check=check)


def _original_events(
    fs: pafs.FileSystem,
    pieces: Sequence[FileSlice],
    job: BucketJob,
    schema: pa.Schema,
    deletes: DeleteSet | None,
    reads: _Counter,
) -> Iterator[pa.RecordBatch]:
    """The bucket's original files in path order, with the synthetic ROW__IDs readers give them (write id 0,
    rowIds counting across the files): major compaction makes them permanent."""
    hits = deletes if deletes is not None and deletes.may_hit(0, 0) else None
    first_row_id = 0
    for piece in pieces:
        for batch in original_events(fs, piece, first_row_id, job.batch_rows):
            first_row_id += batch.num_rows
            reads.events += batch.num_rows
            yield from _kept(piece.path, batch, job, schema, hits, check=False)


def _kept(
    path: str,
    batch: pa.RecordBatch,
    job: BucketJob,
    schema: pa.Schema,
    deletes: DeleteSet | None,
    *,
    check: bool,
) -> Iterator[pa.RecordBatch]:
    mask = None
    if check:
        (current,) = key_arrays(path, batch, ["currentTransaction"])
        valid = valid_mask(job.write_ids, current)
        if not valid.all():
            mask = valid
    if deletes is not None:
        original, bucket, row_id = key_arrays(path, batch, KEY_FIELDS)
        alive = deletes.alive(original, bucket, row_id)
        if alive is not None:
            mask = alive if mask is None else mask & alive
    if mask is not None:
        kept = np.flatnonzero(mask)
        if not len(kept):
            return
        # indices (from numpy without a copy) rather than a mask to convert; in range by construction
        batch = pc.take(batch, pa.array(kept), boundscheck=False)
    yield conform(batch, schema, job.columns)


def conform(batch: pa.RecordBatch, schema: pa.Schema, columns: Sequence[Column]) -> pa.RecordBatch:
    """Events shaped as the table's event schema: ``row`` fields matched to the table's columns as Hive 4
    reads them (by name, or by position in files that name them ``_col0``...; a column the file lacks is NULL:
    :func:`acidstream.acid.evolution.table_columns`), values converted where the file's types differ (changed
    since) as Hive's reader converts them (:func:`acidstream.acid.evolution.convert`), and ``char``/``varchar``
    values cut to ``columns``' lengths now (narrowed since: :func:`acidstream.acid.evolution.truncate`)."""
    lengths = [text_length(c) for c in columns]
    cut = any(n is not None for n in lengths)
    if batch.schema == schema and not cut:  # equal but for the file's metadata, which is not the output's
        return batch.replace_schema_metadata(None)
    row = batch.column("row")
    row_type: pa.StructType = schema.field("row").type
    if row.type != row_type or cut:
        names = [f.name for f in row_type]
        children = table_columns(row, names, range(len(names)))
        children = [
            truncate(convert(c, f.type), n) for c, f, n in zip(children, row_type, lengths, strict=True)
        ]
        row = pa.StructArray.from_arrays(children, fields=list(row_type), mask=row.is_null())
    events = [batch.column(n) for n in EVENT_FIELDS[:5]]
    events = [c if c.type == f.type else c.cast(f.type) for c, f in zip(events, schema, strict=False)]
    return pa.RecordBatch.from_arrays([*events, row], schema=schema)


def _delete_source(fs: pafs.FileSystem, piece: FileSlice, job: BucketJob, schema: pa.Schema) -> SortedSource:
    """A delete delta file's committed delete events, sorted (read whole: delete files hold only keys)."""

    def events() -> Iterator[pa.RecordBatch]:
        table = read_events(fs, piece.path, length=piece.length, columns=[*EVENT_FIELDS[:5]]).combine_chunks()
        if table.num_rows == 0:
            return
        _, bucket, _, current = key_arrays(piece.path, table, [*KEY_FIELDS, "currentTransaction"])
        check_bucket_ids(piece.path, piece.bucket_id, bucket)
        valid = valid_mask(job.write_ids, current)
        if not valid.all():
            table = table.filter(pa.array(valid))
        order = sorted_order(table)
        if order is not None:
            table = table.take(order)
        n = table.num_rows
        full = pa.table(
            [
                pa.array(np.full(n, EventKind.DELETE, dtype=np.int32)),
                *(table.column(k) for k in EVENT_FIELDS[1:5]),
                pa.nulls(n, schema.field("row").type),
            ],
            schema=schema,
        )
        yield from full.to_batches(max_chunksize=job.batch_rows)

    return SortedSource(piece.path, 0, events())
