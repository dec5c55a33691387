"""Write one ORC ACID event file by stitching stripes that pyarrow encodes.

pyarrow's ORC writer is fast but cannot write user metadata or intermediate footers. So each buffered chunk of
events is encoded by pyarrow into a small in-memory ORC file; its stripes (self-contained, stripe-relative
stream positions) are copied to our output at the current offset, and we write the tail ourselves — at every
flush (an intermediate footer, as ORC Java's ``writeIntermediateFooter``) and at close. The bytes
``[0, offset)`` after any tail are a complete ORC file, which is what Hive's side-file protocol needs.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.orc as po

from acidstream.acid.checksum import FilePrefix, crc32
from acidstream.acid.names import ORC_ACID_VERSION, ORC_ACID_VERSION_FILE
from acidstream.acid.orc.compression import PYARROW_NAMES, CompressionKind, kind_of
from acidstream.acid.orc.events import (
    ACID_KEY_INDEX,
    ACID_STATS,
    ACID_VERSION,
    EVENT_FIELDS,
    META_FIELDS,
    EventKind,
    KeyIndex,
    RecordKey,
    event_schema,
    format_acid_stats,
    unsorted_at,
)
from acidstream.acid.orc.nested import has_struct, push_down_nulls
from acidstream.acid.orc.protobuf import LENGTH_DELIMITED, VARINT, Message, encode_fields, encode_varint
from acidstream.acid.orc.stats import FileStatistics
from acidstream.acid.orc.stripes import (
    EncodedEvents,
    Insert,
    from_events,
    from_indexed_events,
    from_inserted_rows,
    from_shared_inserts,
)
from acidstream.acid.orc.tail import FOOTER, MAGIC, STRIPE, TYPE, PostscriptTemplate, build_tail, read_tail
from acidstream.acid.orc.timestamps import check_writable, has_timestamp, prepare, repair
from acidstream.acid.sidefile import SideFileWriter
from acidstream.acid.types import Column, HiveType
from acidstream.errors import StreamingIOFailure
from acidstream.faults import fault_point
from acidstream.storage import (
    OutputStream,
    create_new,
    flush,
    is_object_store,
    local_path,
    make_directories,
    truncate,
)

KiB = 1 << 10
MiB = 1 << 20

#: ORC C++ (pyarrow) requires compression blocks in multiples of its 64 KiB memory block, so Hive's 32 KiB
#: delta block size cannot be used; 64 KiB is the closest it accepts.
DELTA_BLOCK_SIZE = 64 * KiB
#: pyarrow rejects row_index_stride=0 ("no row index"); the largest positive Java int gives one index entry
#: per stripe. Our files declare stride 0 all the same, as Hive's streaming writer's do: spliced stripes leave
#: pyarrow's index out, and readers ignore index streams where the stride is 0 (stripes pyarrow encoded whole).
NO_ROW_INDEX_STRIDE = (1 << 31) - 1
#: Hive's ``orc.row.index.stride``, for every file with a row index (bases, compactor output).
ROW_INDEX_STRIDE = 10000


@dataclass(frozen=True)
class WriterOptions:
    """Encoding settings (docs/format.md, Event files). ``None`` sizes take the delta or base (``is_base``)
    defaults.

    Deltas: 8 MiB stripes, 64 KiB blocks; with ``streaming_optimizations`` no dictionary and (nearly) no row
    index. Bases (compactor output): 64 MiB stripes, 256 KiB blocks, dictionary threshold 0.8, index stride
    10000.
    """

    compression: str = "ZLIB"
    stripe_size: int | None = None
    compression_block_size: int | None = None
    streaming_optimizations: bool = True
    is_base: bool = False
    batch_rows: int = 64 * 1024  # rows pyarrow converts per ORC batch (its default 1024 is slower)

    def __post_init__(self) -> None:
        kind_of(self.compression)  # validate early
        if self.block_size % (64 * KiB):
            raise ValueError(f"compression_block_size must be a multiple of 64 KiB, got {self.block_size}")

    @property
    def stripe_bytes(self) -> int:
        if self.stripe_size is not None:
            return self.stripe_size
        return 64 * MiB if self.is_base else 8 * MiB

    @property
    def block_size(self) -> int:
        if self.compression_block_size is not None:
            return self.compression_block_size
        return 256 * KiB if self.is_base else DELTA_BLOCK_SIZE

    @property
    def optimized(self) -> bool:
        return self.streaming_optimizations and not self.is_base

    def pyarrow_kwargs(self) -> dict[str, object]:
        return {
            "file_version": "0.12",
            "batch_size": self.batch_rows,
            "stripe_size": self.stripe_bytes,
            "compression": PYARROW_NAMES[kind_of(self.compression)],
            "compression_block_size": self.block_size,
            "compression_strategy": "speed",
            "row_index_stride": NO_ROW_INDEX_STRIDE if self.optimized else ROW_INDEX_STRIDE,
            "dictionary_key_size_threshold": 0.0 if self.optimized else 0.8,
        }


@dataclass(frozen=True)
class InsertedRows:
    """Rows inserted with one write id into one bucket, their rowIds counting up from ``first_row_id``.

    Buffered like this, not as events, so that their ACID columns need not be built: at the flush they are
    spliced into the stripes pyarrow encodes for the rows alone (:func:`stripes.from_inserted_rows`).
    """

    rows: pa.RecordBatch | pa.Table
    write_id: int
    bucket_property: int
    first_row_id: int

    @property
    def nbytes(self) -> int:
        return self.rows.nbytes

    def follows(self, previous: InsertedRows) -> bool:
        """Whether these rows continue ``previous``'s run (same write id and bucket, the next rowIds)."""
        return (
            self.write_id == previous.write_id
            and self.bucket_property == previous.bucket_property
            and self.first_row_id == previous.first_row_id + previous.rows.num_rows
        )


#: What :meth:`AcidWriter.take_pending_events` hands out: one run of inserted rows, or events.
TakenEvents: TypeAlias = InsertedRows | pa.Table


@dataclass(frozen=True)
class _Layout:
    """What every writer of one schema and settings shares (see :func:`_layout`)."""

    row_fields: list[pa.Field]
    row_type: pa.StructType
    row_schema: pa.Schema
    schema: pa.Schema  # the six event columns
    struct_columns: tuple[int, ...]  # row columns that need pyarrow work-arounds: most tables have none
    timestamp_columns: tuple[int, ...]
    # from the tail of an empty file: never mutated (writers copy what they change)
    postscript: PostscriptTemplate
    statistics: list[bytes]
    footer_types: bytes  # the footer's TYPES fields, encoded (char/varchar patched)
    footer_trailer: bytes  # its fields after STATISTICS (row index stride, writer, version), encoded
    unindexed_trailer: bytes  # the same, declaring no row index (for files with repaired timestamps)


_LAYOUT_CACHE_SIZE = 256
_LAYOUTS: dict[tuple[tuple[Column, ...], WriterOptions], _Layout] = {}


def _layout(columns: Sequence[Column], options: WriterOptions) -> _Layout:
    """Arrow types and the tail of an empty file for this schema and these settings, made once.

    Streaming opens a writer per (partition, bucket) per batch, and encoding even an empty file costs pyarrow
    a writer set-up: all of it is cached per schema and settings.
    """
    key = (tuple(columns), options)
    layout = _LAYOUTS.get(key)
    if layout is None:
        row_type = pa.struct([c.to_arrow() for c in columns])
        fields = list(row_type)
        schema = event_schema(row_type)
        data = _encode(schema.empty_table(), options)
        tail = read_tail(pa.BufferReader(data), data.size)
        _patch_types(tail.footer, [c.type for c in columns])
        if options.optimized:
            tail.footer.set_uint(FOOTER.ROW_INDEX_STRIDE, 0)
        unindexed = tail.footer.copy().set_uint(FOOTER.ROW_INDEX_STRIDE, 0)
        layout = _Layout(
            fields,
            row_type,
            pa.schema(fields),
            schema,
            tuple(i for i, f in enumerate(fields) if has_struct(f.type)),
            tuple(i for i, f in enumerate(fields) if has_timestamp(f.type)),
            PostscriptTemplate(tail.postscript),
            tail.footer.repeated_bytes(FOOTER.STATISTICS),
            *_constant_footer_fields(tail.footer),
            _constant_footer_fields(unindexed)[1],
        )
        if len(_LAYOUTS) >= _LAYOUT_CACHE_SIZE:
            _LAYOUTS.pop(next(iter(_LAYOUTS)))
        _LAYOUTS[key] = layout
    return layout


def _encode(
    table: pa.Table, options: WriterOptions, *, uncompressed: bool = False, timestamps: bool = False
) -> pa.Buffer:
    """pyarrow's ORC file of ``table``. ``timestamps``: it may hold timestamps before 1970 with a fraction,
    which are then stored as ORC's Java writer stores them (see :mod:`timestamps`)."""
    fix = None
    if timestamps:
        table, fix = prepare(table)
    sink = pa.BufferOutputStream()
    po.write_table(table, sink, **_pyarrow_kwargs(options, uncompressed=uncompressed))
    return sink.getvalue() if fix is None else repair(sink.getvalue(), fix)


def _pyarrow_kwargs(options: WriterOptions, *, uncompressed: bool) -> dict[str, object]:
    """``uncompressed``: for rows whose streams the splice compresses itself."""
    kwargs = options.pyarrow_kwargs()
    if uncompressed:
        kwargs["compression"] = PYARROW_NAMES[CompressionKind.NONE]
    return kwargs


def encode_together(items: Sequence[tuple[AcidWriter, TakenEvents]]) -> list[EncodedEvents]:
    """``writer.encode_events(taken)`` of each item, in order; inserted rows of writers with one layout share
    pyarrow's files, one stripe each (:func:`stripes.from_shared_inserts`).

    A commit to many partitions has many files of a few rows each, and pyarrow's set-up and tail per file cost
    more than their rows: one shared file costs those once. Anything else is encoded apart.
    """
    out: list[EncodedEvents | None] = [None] * len(items)
    by_layout: dict[int, list[int]] = {}
    for i, (writer, taken) in enumerate(items):
        if (
            isinstance(taken, InsertedRows)
            and 0 < taken.rows.num_rows <= writer._options.batch_rows
            and not writer._repaired_timestamps  # those go through _encode
        ):
            by_layout.setdefault(id(writer._layout), []).append(i)  # one pyarrow batch: one stripe
    for indexes in by_layout.values():
        if len(indexes) > 1:
            for i, encoded in zip(indexes, _encode_shared([items[i] for i in indexes]), strict=True):
                out[i] = encoded
    return [e if e is not None else w.encode_events(t) for e, (w, t) in zip(out, items, strict=True)]


def _encode_shared(items: Sequence[tuple[AcidWriter, TakenEvents]]) -> list[EncodedEvents | None]:
    """Each insert (of one layout, one pyarrow batch) a stripe of a shared file; None where that failed.

    With a one-byte stripe size pyarrow cuts a stripe after every write whose rows reached an output stream.
    Rows it still holds (a few ints wait in their RLE buffers) cannot be separated from the next write's, so
    they end their file instead: the next insert starts another, as it does once a file reaches a stripe's
    size.
    """
    first = items[0][0]
    options, nested = first._options, bool(first._struct_columns)
    kwargs = {**_pyarrow_kwargs(options, uncompressed=True), "stripe_size": 1}
    out: list[EncodedEvents | None] = []
    while len(out) < len(items):
        sink = pa.BufferOutputStream()
        writer = po.ORCWriter(sink, **kwargs)
        inserts: list[Insert] = []
        for acid_writer, taken in items[len(out) :]:
            assert isinstance(taken, InsertedRows)
            before = sink.tell()
            writer.write(acid_writer._nested(taken.rows) if nested else taken.rows)
            inserts.append(
                Insert(taken.rows.num_rows, taken.write_id, taken.bucket_property, taken.first_row_id)
            )
            written = sink.tell()
            # the first write adds the header; a stripe's size is enough for one file (memory stays bounded)
            if written <= max(before, len(MAGIC)) or written >= options.stripe_bytes:
                break
        writer.close()
        encoded = from_shared_inserts(
            sink.getvalue(),
            inserts,
            compression=kind_of(options.compression),
            block_size=options.block_size,
            nested=nested,
        )
        out.extend(encoded if encoded is not None else [None] * len(inserts))
    return out


class AcidWriter:
    """One ORC event file (one bucket of one base/delta/delete_delta directory). Not thread-safe."""

    _out: OutputStream
    _side: SideFileWriter | None

    def __init__(
        self,
        fs: pafs.FileSystem,
        path: str,
        columns: Sequence[Column],
        *,
        options: WriterOptions,
        side_file: bool,
        create_in: Executor | None = None,
        directory_ready: bool = False,
    ) -> None:
        """``create_in``: create the files in that executor instead of now. Rows are buffered meanwhile and
        the first operation that needs the files waits for them (and raises what creating them raised), so
        a caller opening many writers overlaps their file creation with its other work.
        ``directory_ready``: the caller made the directory with :func:`prepare_directory` already."""
        self._fs, self._path, self._options = fs, path, options
        self._directory_ready = directory_ready
        layout = self._layout = _layout(columns, options)
        self._row_fields, self._row_type, self._row_schema = (
            layout.row_fields,
            layout.row_type,
            layout.row_schema,
        )
        self._struct_columns, self._timestamp_columns = layout.struct_columns, layout.timestamp_columns
        self._schema = layout.schema
        self._closed = False
        self._repaired_timestamps = False  # rows hold timestamps pyarrow alone would encode wrongly
        self._failed: OSError | None = None  # a write to the file failed: it only takes close() now
        self._pending: list[pa.RecordBatch | InsertedRows] = []
        self._pending_bytes = 0
        self._stripes: list[bytes] = []  # encoded StripeInformation, offsets in this file
        self._rows = 0  # in those stripes
        self._stripe_stats: list[bytes] = []
        self._keys: list[RecordKey] = []
        self._last_key: RecordKey | None = None
        self._counts = [0, 0, 0]  # inserts, updates, deletes
        self._insert_write_id: int | None = None
        self._next_row_id = 0
        self._postscript = layout.postscript
        self._footer_types, self._footer_trailer = layout.footer_types, layout.footer_trailer
        self._column_stats = layout.statistics  # encoded ColumnStatistics of the file's only chunk so far
        self._file_stats: FileStatistics | None = None  # from its second chunk on, the running totals
        self._files_pending: Future[None] | None = None
        if create_in is None:
            self._create_files(side_file)
        else:
            self._files_pending = create_in.submit(self._create_files, side_file)
        # The file's logical bytes: its header, then what was written. The header goes out with the first
        # stripe or tail (:meth:`_write`): until then the file holds 0 bytes, as Hive's writer leaves it.
        self._offset = len(MAGIC)
        self._crc = crc32(MAGIC)  # of the bytes written so far: replication verifies copies with it
        self._header_written = False
        self._tail_offset = 0  # end of the last tail written (0: none yet)
        self._tail_stripes = 0  # stripes that tail covers

    # --- public API -----------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def rows_written(self) -> int:
        """Events accepted so far (buffered ones included)."""
        return sum(self._counts)

    @property
    def stripes(self) -> int:
        return len(self._stripes)

    @property
    def bytes_written(self) -> int:
        return self._offset

    @property
    def written_prefix(self) -> FilePrefix:
        """Length and CRC-32 of everything written to the file so far (after a flush: its readable prefix),
        kept as the bytes go out, so a commit can name its files' checksums without reading them."""
        return FilePrefix(self._offset, self._crc)

    @property
    def key_index(self) -> KeyIndex:
        return KeyIndex(tuple(self._keys))

    def insert(
        self,
        write_id: int,
        bucket_property: int,
        rows: pa.RecordBatch | pa.Table,
        *,
        nbytes: int | None = None,
    ) -> None:
        """Insert events; rowId restarts at 0 whenever the write id changes (OrcRecordUpdater.insert).
        ``nbytes``: the rows' bytes, where the caller knows them (pyarrow counts a slice's slowly)."""
        self._check_open()
        batches = self._row_batches(rows)  # validate before touching the rowId counter
        if len(batches) != 1 or batches[0] is not rows:
            nbytes = None  # cast or split: counted anew
        if write_id != self._insert_write_id:
            self._insert_write_id, self._next_row_id = write_id, 0
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            first_row_id = self._next_row_id
            self._next_row_id += n
            if self._struct_columns:
                columns = batch.columns
                for i in self._struct_columns:
                    columns[i] = push_down_nulls(columns[i])
                batch = pa.RecordBatch.from_arrays(columns, schema=self._row_schema)
            self._append(
                InsertedRows(batch, write_id, bucket_property, first_row_id),
                (write_id, bucket_property, first_row_id + n - 1),
                nbytes,
            )
            self._counts[EventKind.INSERT] += n

    def delete(self, write_id: int, row_ids: pa.Table) -> None:
        """Delete events for ROW__IDs (originalTransaction, bucket, rowId), sorted by that key; row = null."""
        self._check_open()
        try:
            keys = row_ids.select(list(EVENT_FIELDS[1:4])).cast(
                pa.schema([self._schema.field(n) for n in EVENT_FIELDS[1:4]])
            )
        except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
            raise ValueError(f"row_ids must have columns originalTransaction, bucket, rowId: {exc}") from exc
        self._check_sorted(keys)  # all rows before any is buffered: a rejected call changes nothing
        for batch in keys.to_batches():
            n = batch.num_rows
            if n == 0:
                continue
            self._append(
                pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.full(n, EventKind.DELETE, dtype=np.int32)),
                        batch.column(0),
                        batch.column(1),
                        batch.column(2),
                        pa.array(np.full(n, write_id, dtype=np.int64)),
                        pa.nulls(n, self._row_type),
                    ],
                    schema=self._schema,
                )
            )
            self._counts[EventKind.DELETE] += n

    def write_events(self, events: pa.RecordBatch | pa.Table) -> None:
        """Raw 6-column events (compaction, replication); must be sorted by (originalTransaction, bucket, rowId)."""
        self._check_open()
        table = events if isinstance(events, pa.Table) else pa.Table.from_batches([events])
        if table.schema.names != list(EVENT_FIELDS):
            raise ValueError(f"events must have the columns {EVENT_FIELDS}, got {table.schema.names}")
        if table.schema != self._schema:
            try:
                table = table.cast(self._schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
                raise ValueError(f"events do not fit the schema {self._schema}: {exc}") from exc
        n = table.num_rows
        if n == 0:
            return
        ops = table.column(0)
        if ops.null_count:
            raise ValueError("operation must not be null")
        low, high = (v.as_py() for v in pc.min_max(ops).values())
        if low < 0 or high > EventKind.DELETE:
            raise ValueError("operation must be 0 (insert), 1 (update) or 2 (delete)")
        if low == high:  # nearly always: one kind of event
            counts = np.zeros(3, dtype=np.int64)
            counts[low] = n
        else:
            counts = np.bincount(ops.to_numpy(), minlength=3)
        ot, bk, rid = self._check_sorted(table)
        if self._timestamp_columns:
            for chunk in table.column(5).chunks:
                self._repaired_timestamps |= check_writable(chunk, "row")
        end = 0
        for batch in table.to_batches():
            if not batch.num_rows:
                continue
            end += batch.num_rows
            if self._struct_columns:
                row = push_down_nulls(batch.column(5))
                batch = pa.RecordBatch.from_arrays([*batch.columns[:5], row], schema=self._schema)
            self._append(batch, (int(ot[end - 1]), int(bk[end - 1]), int(rid[end - 1])))
        for kind in EventKind:
            self._counts[kind] += int(counts[kind])

    def flush(self) -> int:
        """Encode buffered events and write an intermediate footer; returns the valid-prefix length.

        With no new stripe since the last footer nothing is written and the previous offset is returned
        (and recorded again in the side file, as Hive does).
        """
        table = self.take_pending_events()
        return self.flush_encoded(() if table is None else [self.encode_events(table)])

    def take_pending_events(self) -> TakenEvents | None:
        """First step of :meth:`flush`: the buffered events, removed from the buffer (None if there are none)."""
        self._check_open()
        return self._take_pending()

    def encode_events(self, taken: TakenEvents) -> EncodedEvents:
        """Second step of :meth:`flush`: pyarrow encodes taken events (GIL released); inserted rows then get
        their ACID columns spliced in (Python, well under pyarrow's part).

        Changes no writer state, so callers may run it in worker threads for many writers (and for several
        takes of one writer) and then call :meth:`flush_encoded` for each result, in take order, on one thread.
        (It reads whether the writer took timestamps to repair, which only turns true, before their take.)
        """
        if isinstance(taken, InsertedRows):
            options = self._options
            nested = bool(self._struct_columns)
            return from_inserted_rows(
                _encode(
                    self._nested(taken.rows) if nested else taken.rows,
                    options,
                    uncompressed=True,
                    timestamps=self._repaired_timestamps,
                ),
                taken.write_id,
                taken.bucket_property,
                taken.first_row_id,
                compression=kind_of(options.compression),
                block_size=options.block_size,
                nested=nested,
            )
        ot, bk, rid = (taken.column(n) for n in EVENT_FIELDS[1:4])

        def key_at(i: int) -> RecordKey:
            return ot[i].as_py(), bk[i].as_py(), rid[i].as_py()

        if not self._options.optimized:
            acid = [taken.column(i).to_numpy() for i in range(len(META_FIELDS))]
            row = taken.column("row")
            flat = not row.null_count and not self._struct_columns  # see _nested for struct columns
            rows = pa.Table.from_arrays(row.flatten(), schema=self._row_schema) if flat else taken.select([5])
            encoded = _encode(rows, self._options, timestamps=self._repaired_timestamps)
            return from_indexed_events(encoded, acid, key_at, stride=ROW_INDEX_STRIDE, flat=flat)
        return from_events(_encode(taken, self._options, timestamps=self._repaired_timestamps), key_at)

    def append_encoded(self, encoded: EncodedEvents) -> None:
        """Append stripes from :meth:`encode_events` (in take order) with no intermediate footer: for files
        nobody reads before their close (compaction output), whose stripes are encoded in other threads."""
        self._check_open()
        self._await_files()
        try:
            self._append_encoded(encoded)
        except OSError as exc:
            raise self._failure(f"write to {self._path} failed: {exc}", exc) from exc

    def flush_encoded(self, encoded: Sequence[EncodedEvents] = ()) -> int:
        """Last step of :meth:`flush`: append the encoded stripes (in take order), then the intermediate footer."""
        self._check_open()
        self._await_files()
        try:
            for chunk in encoded:
                self._append_encoded(chunk)
            fault_point("orc.flush.stripes")
            if len(self._stripes) > self._tail_stripes:
                self._write_tail()
            flush(self._fs, self._path, self._out)
            fault_point("orc.flush.tail")
            if self._side is not None:
                self._side.append(self._tail_offset)
            fault_point("orc.flush.published")
        except OSError as exc:
            raise self._failure(f"flush of {self._path} failed: {exc}", exc) from exc
        return self._tail_offset

    def close(self) -> None:
        """Final footer and side-file removal; an insert file without events is deleted (bases stay, empty).

        After a failed write the file is cut back to what readers were last told instead (:meth:`abort_close`):
        its physical end may be torn, and a final footer written after torn bytes would be unreadable.
        """
        if self._closed:
            return
        if self._failed is not None:
            self._abandon()
            return
        try:
            self._await_files()
        except BaseException:
            self._closed = True  # nothing of ours was created: nothing to close
            raise
        try:
            self._encode_pending()
            self._closed = True
            if self.rows_written == 0 and not self._options.is_base:
                self._out.close()
                self._fs.delete_file(self._path)
            else:
                if self._tail_offset != self._offset or self._tail_offset == 0:
                    self._write_tail()
                self._out.close()
            if self._side is not None:
                self._side.close_and_delete()
        except OSError as exc:
            failure = self._failure(f"close of {self._path} failed: {exc}", exc)
            try:
                self._abandon()
            except StreamingIOFailure as abort:  # the store that failed the close often fails this too
                failure.add_note(str(abort))  # the close's failure is the cause: it leads
            raise failure from exc

    def abort_close(self) -> None:
        """``close(abort=true)`` (docs/format.md, Side files), and the close after a failed write: buffered
        events are discarded and the file is left as readers were last told it is.

        Without a side file nothing in the file can be committed (its only transaction ends after the file's
        close), so it is deleted. With one, the last length published in the side file is what readers use and
        may already cover committed rows: the data file is cut back to that length, a complete ORC file, and
        only then is the side file deleted (Hive deletes it at once, exposing any torn tail as the file's end).
        Where the filesystem cannot truncate, the side file stays: readers trust it over the physical length.
        A file that never published a footer holds nothing committed and is deleted with its side file.
        """
        if not self._closed:
            self._abandon()

    def _abandon(self) -> None:
        self._closed = True
        self._pending.clear()
        try:
            self._await_files()
        except (FileExistsError, StreamingIOFailure):
            return  # nothing of ours was created (an existing file is someone else's)
        side = self._side
        if isinstance(self._failed, FileExistsError):  # the store refused the create (HDFS, S3): not ours
            if side is not None:
                side.close_and_delete()
            return
        published = side.last if side is not None else 0
        try:
            with contextlib.suppress(OSError):  # a torn stream may fail to close: its bytes are cut below
                self._out.close()
            if published == 0:
                with contextlib.suppress(FileNotFoundError):
                    self._fs.delete_file(self._path)
            elif not truncate(self._fs, self._path, published):
                assert side is not None
                side.close()
                return
            if side is not None:
                side.close_and_delete()
        except OSError as exc:
            raise StreamingIOFailure(f"abort of {self._path} failed: {exc}") from exc

    # --- buffering ------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"writer for {self._path} is closed")
        if self._failed is not None:
            raise StreamingIOFailure(
                f"writer for {self._path} failed earlier ({self._failed}): it only takes close() now"
            ) from self._failed

    def _failure(self, message: str, cause: OSError) -> StreamingIOFailure:
        """Remember that a write failed: the file may now end in torn bytes past the last footer."""
        self._failed = cause
        return StreamingIOFailure(message)

    def _row_batches(self, rows: pa.RecordBatch | pa.Table) -> list[pa.RecordBatch]:
        target = self._row_schema
        if rows.schema.names != target.names:
            raise ValueError(f"rows must have the columns {target.names}, got {rows.schema.names}")
        if rows.schema != target:
            try:
                rows = rows.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
                raise ValueError(f"rows do not fit the table schema {target}: {exc}") from exc
        batches = rows.to_batches() if isinstance(rows, pa.Table) else [rows]
        for batch in batches:
            for i in self._timestamp_columns:
                self._repaired_timestamps |= check_writable(batch.column(i), target.names[i])
        return batches

    def _append(
        self,
        batch: pa.RecordBatch | InsertedRows,
        last_key: RecordKey | None = None,
        nbytes: int | None = None,
    ) -> None:
        """Buffer events; ``last_key``: the key of the batch's last event (given for inserted rows); ``nbytes``:
        their bytes, if known."""
        if last_key is None:
            assert isinstance(batch, pa.RecordBatch)
            last = batch.num_rows - 1
            ot, bk, rid = (batch.column(i) for i in (1, 2, 3))
            last_key = (ot[last].as_py(), bk[last].as_py(), rid[last].as_py())
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes if nbytes is None else nbytes
        self._last_key = last_key
        if self._pending_bytes >= self._options.stripe_bytes:
            self._await_files()  # what creating the files raised, as it is (as flush_encoded raises it)
            try:
                self._encode_pending()
            except OSError as exc:
                raise self._failure(f"write to {self._path} failed: {exc}", exc) from exc

    def _check_sorted(self, events: pa.Table) -> tuple[npt.NDArray[np.int64], ...]:
        """Keys must not decrease, within ``events`` and from the previous event on (vectorised); returns
        them (originalTransaction, bucket, rowId)."""
        ot, bk, rid = (events.column(n) for n in EVENT_FIELDS[1:4])
        if ot.null_count or bk.null_count or rid.null_count:
            raise ValueError("originalTransaction, bucket and rowId must not be null")
        o, b, r = ot.to_numpy(), bk.to_numpy(), rid.to_numpy()
        if not len(o):
            return o, b, r
        first: RecordKey = (int(o[0]), int(b[0]), int(r[0]))
        if self._last_key is not None and first < self._last_key:
            raise _unsorted(self._last_key, first)
        i = unsorted_at(o, b, r)
        if i >= 0:
            raise _unsorted((o[i], b[i], r[i]), (o[i + 1], b[i + 1], r[i + 1]))
        return o, b, r

    # --- encoding and stitching -----------------------------------------------------------------------

    def _take_pending(self) -> TakenEvents | None:
        """One run of inserted rows when that is all there is; otherwise every buffered item as events.

        Not for files with a row index stride (spliced stripes have no index streams).
        """
        pending = self._pending
        if not pending:
            return None
        self._pending, self._pending_bytes = [], 0
        first = pending[0]
        if (
            isinstance(first, InsertedRows)
            and self._options.optimized
            and all(isinstance(p, InsertedRows) and p.follows(q) for q, p in itertools.pairwise(pending))
        ):
            rows = pa.Table.from_batches(
                [p.rows for p in pending if isinstance(p, InsertedRows)], self._row_schema
            )
            return InsertedRows(rows, first.write_id, first.bucket_property, first.first_row_id)
        return pa.Table.from_batches([self._as_events(p) for p in pending], schema=self._schema)

    def _nested(self, rows: pa.Table) -> pa.Table:
        """The rows as one struct column, as inside ``row``: pyarrow 26 writes a *top-level* struct column that
        is a slice misaligned (the rows of a commit are slices of one routed batch), a nested one right."""
        return pa.Table.from_batches(
            [
                pa.RecordBatch.from_arrays(
                    [pa.StructArray.from_arrays(batch.columns, fields=self._row_fields)], names=["row"]
                )
                for batch in rows.to_batches()
            ],
            schema=pa.schema([pa.field("row", self._row_type)]),
        )

    def _as_events(self, item: pa.RecordBatch | InsertedRows) -> pa.RecordBatch:
        """Inserted rows as the six event columns (events as they are)."""
        if isinstance(item, pa.RecordBatch):
            return item
        n = item.rows.num_rows
        wid = pa.array(np.full(n, item.write_id, dtype=np.int64))
        row = pa.StructArray.from_arrays(item.rows.columns, fields=self._row_fields)
        return pa.RecordBatch.from_arrays(
            [
                pa.array(np.zeros(n, dtype=np.int32)),
                wid,
                pa.array(np.full(n, item.bucket_property, dtype=np.int32)),
                pa.array(np.arange(item.first_row_id, item.first_row_id + n, dtype=np.int64)),
                wid,
                row,
            ],
            schema=self._schema,
        )

    def _encode_pending(self) -> None:
        """Encode buffered events into stripe(s) and append them to the file (no tail)."""
        table = self._take_pending()
        if table is not None:
            self._await_files()
            self._append_encoded(self.encode_events(table))

    def _append_encoded(self, encoded: EncodedEvents) -> None:
        """Copy the encoded stripes to our output and account for them (keys, statistics)."""
        if not encoded.stripes:
            return
        size = 0
        for part in encoded.body:
            self._write(part)
            self._crc = crc32(part, self._crc)
            size += len(part)
        for s in encoded.stripes:
            moved = s.copy().set_uint(STRIPE.OFFSET, (s.uint(STRIPE.OFFSET, 0) or 0) + self._offset)
            self._stripes.append(moved.encode())
        self._keys.extend(encoded.keys)
        self._stripe_stats.extend(encoded.stripe_statistics)
        # A file's first chunk: its statistics are the file's (merging with the empty template adds nothing),
        # copied as encoded. Later chunks add to running totals, encoded at each tail.
        if not self._rows:
            self._column_stats = encoded.statistics
        else:
            if self._file_stats is None:
                self._file_stats = FileStatistics(self._column_stats)
            self._file_stats.add(encoded.statistics)
        self._rows += encoded.rows
        self._offset += size

    def _write_tail(self) -> None:
        """Footer fields in canonical order: the changing ones encoded now, the template's as encoded once.

        Assembled from encoded pieces (the field tags and the ACID version's metadata item are constants):
        every flush of every file writes one, and a commit to many partitions flushes hundreds of tiny files.
        """
        footer = b"".join(
            (
                _TAIL_HEAD,
                encode_varint(self._offset - len(MAGIC)),  # ORC C++ convention
                *(_field(_STRIPES_TAG, s) for s in self._stripes),
                self._footer_types,
                _field(_METADATA_TAG, _KEY_INDEX_NAME + _field(b"\x12", self.key_index.encode().encode())),
                _field(
                    _METADATA_TAG,
                    _ACID_STATS_NAME + _field(b"\x12", format_acid_stats(*self._counts).encode()),
                ),
                _ACID_VERSION_ITEM,
                _ROWS_TAG,
                encode_varint(self._rows),
                *(_field(_STATISTICS_TAG, s) for s in self._file_statistics()),
                self._layout.unindexed_trailer if self._repaired_timestamps else self._footer_trailer,
            )
        )
        metadata = b"".join([_field(b"\x0a", s) for s in self._stripe_stats])  # StripeStatistics
        tail = build_tail(self._postscript, footer, metadata)
        self._write(tail)
        self._crc = crc32(tail, self._crc)
        self._offset += len(tail)
        self._tail_offset, self._tail_stripes = self._offset, len(self._stripes)

    def _write(self, data: bytes | pa.Buffer) -> None:
        """Append to the file, the header with its first bytes.

        A file holding only the header until its first flush (a batch's file for a bucket its transaction
        opened) is a 3-byte file whose side file says 0: Hive's footer-reading split generation fails on it
        ("chunk is null"), where it skips a 0-byte file, which is what Hive's writer leaves until its first
        flush. One write with the first bytes, so that a reader never finds the header alone."""
        if not self._header_written:
            data = MAGIC + (data.to_pybytes() if isinstance(data, pa.Buffer) else data)
        self._out.write(data)
        self._header_written = True

    def _file_statistics(self) -> list[bytes]:
        return self._column_stats if self._file_stats is None else self._file_stats.encoded()

    def _await_files(self) -> None:
        """Wait for files created in the background (see ``create_in``); raises what creating them raised."""
        if self._files_pending is not None:
            self._files_pending.result()  # a failed creation raises again on every later call

    def _create_files(self, side_file: bool) -> None:
        """Directory, ``_orc_acid_version`` (content "2") if missing, side file, then the data file.

        Like Hive (``fs.create(..., overwrite=false)``) an existing data or side file is never overwritten:
        it may hold committed rows (:func:`create_new`: where the store refuses with the file's first bytes,
        HDFS and S3, the write that sends them fails). The side file comes first, as in OrcRecordUpdater's
        constructor.
        """
        try:
            self._create_files_unchecked(side_file)
        except FileExistsError:
            raise
        except OSError as exc:
            raise StreamingIOFailure(f"cannot create {self._path}: {exc}") from exc

    def _create_files_unchecked(self, side_file: bool) -> None:
        if not self._directory_ready:
            prepare_directory(self._fs, self._path.rsplit("/", 1)[0] if "/" in self._path else ".")
        self._side = SideFileWriter.create(self._fs, self._path) if side_file else None
        try:
            self._out = create_new(self._fs, self._path)  # empty: the header waits (see _write)
        except OSError:
            if self._side is not None:
                self._side.close_and_delete()
            raise


def _unsorted(key: tuple[object, ...], following: tuple[object, ...]) -> ValueError:
    return ValueError(
        "events are not sorted by (originalTransaction, bucket, rowId): "
        f"({key[0]},{key[1]},{key[2]}) is followed by ({following[0]},{following[1]},{following[2]})"
    )


def prepare_directory(fs: pafs.FileSystem, directory: str) -> None:
    """A base/delta directory with its ``_orc_acid_version`` file (content "2"), each made if missing.

    Writers of one directory (a compaction's buckets) may make the file at the same time; on HDFS the later
    create replaces the earlier one's file while it is written, whose writer then fails: the file is there.
    On an object store the file is put without asking first (a PUT replaces an object whole, and every
    writer's holds the same bytes), and no directory is made (:func:`make_directories`): one request.
    On a local disk the file is made with ``O_EXCL`` instead of looked for first: one call where there were
    two, and a file another writer made is left as it is."""
    make_directories(fs, directory)
    version = f"{directory}/{ORC_ACID_VERSION_FILE}"
    if local_path(fs, version) is not None:
        try:
            out = create_new(fs, version)
        except FileExistsError:
            return
        with contextlib.closing(out):
            out.write(ORC_ACID_VERSION.encode("ascii"))
        return
    if is_object_store(fs) or fs.get_file_info(version).type == pafs.FileType.NotFound:
        try:
            with fs.open_output_stream(version) as out:
                out.write(ORC_ACID_VERSION.encode("ascii"))
        except OSError:
            if fs.get_file_info(version).type != pafs.FileType.File:
                raise


def prepare_directory_once(fs: pafs.FileSystem, directory: str, ready: set[str]) -> None:
    """:func:`prepare_directory` unless ``directory`` is in ``ready`` (the writer's directories made so far),
    then noted there: a writer opening many files in one directory checks it on the filesystem once."""
    if directory not in ready:
        prepare_directory(fs, directory)
        ready.add(directory)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field whose encoded tag is ``tag``."""
    return tag + encode_varint(len(payload)) + payload


#: A tail's encoded pieces (Footer fields, in order): headerLength (always 3) and contentLength's tag; the tags
#: of stripes, user metadata, numberOfRows and statistics. User metadata is sorted by key, as ORC Java's
#: TreeMap writes it: the key index, the ACID stats (both counting every event accepted so far), the version.
_TAIL_HEAD = encode_fields([(FOOTER.HEADER_LENGTH, VARINT, len(MAGIC))]) + bytes(
    [FOOTER.CONTENT_LENGTH << 3 | VARINT]
)
_STRIPES_TAG, _METADATA_TAG, _STATISTICS_TAG = (
    bytes([n << 3 | LENGTH_DELIMITED]) for n in (FOOTER.STRIPES, FOOTER.METADATA, FOOTER.STATISTICS)
)
_ROWS_TAG = bytes([FOOTER.NUMBER_OF_ROWS << 3 | VARINT])
_KEY_INDEX_NAME, _ACID_STATS_NAME = (_field(b"\x0a", k.encode()) for k in (ACID_KEY_INDEX, ACID_STATS))
_ACID_VERSION_ITEM = _field(
    _METADATA_TAG, _field(b"\x0a", ACID_VERSION.encode()) + _field(b"\x12", ORC_ACID_VERSION.encode())
)


#: Footer fields every tail sets itself; the template's others are written as they are.
_SET_PER_TAIL = {
    FOOTER.HEADER_LENGTH,
    FOOTER.CONTENT_LENGTH,
    FOOTER.STRIPES,
    FOOTER.METADATA,
    FOOTER.NUMBER_OF_ROWS,
    FOOTER.STATISTICS,
}


def _constant_footer_fields(footer: Message) -> tuple[bytes, bytes]:
    """The template footer's TYPES fields and its fields after STATISTICS, each encoded in order."""
    kept = [f for f in footer.fields if f[0] not in _SET_PER_TAIL]
    if any(n != FOOTER.TYPES and n < FOOTER.STATISTICS for n, _, _ in kept):
        raise AssertionError(f"unexpected footer fields {sorted({f[0] for f in kept})}")
    return (
        encode_fields([f for f in kept if f[0] == FOOTER.TYPES]),
        encode_fields([f for f in kept if f[0] > FOOTER.STATISTICS]),
    )


def _patch_types(footer: Message, hive_types: Sequence[HiveType]) -> None:
    """Declare char(n)/varchar(n) (pyarrow only knows string; the stream encoding is the same)."""
    types = footer.messages(FOOTER.TYPES)
    index = 7  # 0 = event struct, 1..5 = metadata columns, 6 = row, 7.. = user columns in pre-order

    def visit(t: HiveType) -> None:
        nonlocal index
        if t.name in ("char", "varchar"):
            if types[index].uint(TYPE.KIND) != TYPE.STRING:
                raise AssertionError(f"expected a STRING type at column {index} for {t}")
            types[index].set_uint(TYPE.KIND, TYPE.CHAR if t.name == "char" else TYPE.VARCHAR)
            types[index].set_uint(TYPE.MAXIMUM_LENGTH, t.length)
        index += 1
        for child in t.children:
            visit(child)

    for t in hive_types:
        visit(t)
    if index != len(types):
        raise AssertionError(f"ORC type tree has {len(types)} columns, Hive types {index}")
    footer.set_repeated(FOOTER.TYPES, [t.encode() for t in types])
