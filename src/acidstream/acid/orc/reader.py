"""Read ORC ACID event files, or the committed prefix ``[0, length)`` of a file still being written.

The tail is parsed and checked by us first (so a length that is not on a footer boundary, a truncated file
or a non-ACID schema is a :class:`CorruptFileError`, never wrong rows); pyarrow then decodes the stripes
through a view bounded at ``length``. Bytes the store fails to deliver are a :class:`StorageUnavailable`, never
a :class:`CorruptFileError`: pyarrow's ORC reader reports both as ``OSError``, so the view remembers its own
failed reads to tell them apart.
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po

from acidstream.acid.evolution import maps_by_position, row_field_key
from acidstream.acid.orc.events import (
    ACID_KEY_INDEX,
    ACID_STATS,
    ACID_VERSION,
    EVENT_FIELDS,
    META_FIELDS,
    KeyIndex,
    RecordKey,
    parse_acid_stats,
)
from acidstream.acid.orc.protobuf import Message
from acidstream.acid.orc.tail import FOOTER, TYPE, OrcTail, TailError, read_postscript, read_tail
from acidstream.errors import CorruptFileError, StorageUnavailable, reading_from

_STRUCT = 12
T = TypeVar("T")
_EVENT_NAMES = [n.lower() for n in EVENT_FIELDS]
_NOT_EVENTS = "not an ACID event file (top-level fields {})"
_ROW_NOT_STRUCT = "the ACID 'row' column is not a struct"
DEFAULT_BATCH_ROWS = 64 * 1024


@dataclass(frozen=True)
class AcidFileMetadata:
    """What the tail of an event file says, without reading any stripe."""

    key_index: list[RecordKey]
    stats: tuple[int, int, int]
    version: str | None
    num_rows: int
    stripes: int
    schema_row_type: pa.StructType


class _BoundedFile(io.RawIOBase):
    """A read-only view of the first ``length`` bytes of a pyarrow file (for non-local filesystems)."""

    def __init__(self, f: pa.NativeFile, length: int) -> None:
        self._f, self._length, self._pos = f, length, 0
        self.failure: OSError | None = None  # what the store raised on a read (pyarrow then reports its own)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._length}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = max(0, min(len(buffer), self._length - self._pos))
        try:
            data = self._f.read_at(n, self._pos) if n else b""
        except OSError as exc:
            self.failure = exc
            raise
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)


#: A file of a remote filesystem up to this size is read in one request: ORC's reader asks for its PostScript,
#: its footer and each stream of a stripe apart, a request each on an object store (8 GETs for a small delta file
#: on S3, where a merge's or a compaction's reads were nine requests in ten).
WHOLE_READ_BYTES = 16 << 20


@dataclass
class _View:
    """A random-access view of ``[0, length)`` of a file, and whether that is the whole file."""

    path: str
    file: pa.NativeFile
    length: int
    whole: bool
    source: _BoundedFile | None  # the store's file, read on demand (else the bytes are all in memory)

    def unavailable(self) -> StorageUnavailable | None:
        """The store's failure to deliver bytes of this view, if a read of it failed."""
        failure = self.source.failure if self.source is not None else None
        return StorageUnavailable(self.path, failure) if failure is not None else None

    @contextlib.contextmanager
    def decoding(self, what: str) -> Iterator[None]:
        """pyarrow's failures inside as :class:`CorruptFileError` ("``what``: ..."), unless a read of the
        store failed meanwhile: then the bytes were never there to decode."""
        try:
            yield
        except (pa.ArrowException, OSError) as exc:
            raise (self.unavailable() or CorruptFileError(self.path, f"{what}: {exc}")) from exc


@contextlib.contextmanager
def _view(fs: pafs.FileSystem, path: str, length: int | None, *, all_of_it: bool = True) -> Iterator[_View]:
    """A view of ``[0, length)`` (the whole file when None). What the store raises while the file is opened
    or read, by pyarrow or by our own tail checks, is a :class:`StorageUnavailable`; a missing file stays
    ``FileNotFoundError``. ``all_of_it``: the caller reads every stripe, so a file up to
    :data:`WHOLE_READ_BYTES` is read in one request (a part of a file split between threads reads its range
    only: each part reading the whole file multiplied the bytes read by the number of parts)."""
    with reading_from(path):
        raw = pa.memory_map(path, "r") if isinstance(fs, pafs.LocalFileSystem) else fs.open_input_file(path)
    with raw:
        with reading_from(path):
            size = raw.size()
            if length is None:
                length = size
            if length > size:
                raise CorruptFileError(path, f"length {length} is beyond the end of the file ({size} bytes)")
            source = None
            if isinstance(raw, pa.MemoryMappedFile) or (all_of_it and length <= WHOLE_READ_BYTES):
                file: pa.NativeFile = pa.BufferReader(
                    raw.read_buffer(length) if length else pa.py_buffer(b"")
                )
            else:
                source = _BoundedFile(raw, length)
                file = pa.PythonFile(source, mode="r")
        view = _View(path, file, length, length == size, source)
        try:
            yield view
        except OSError as exc:
            unavailable = view.unavailable()
            if unavailable is None:
                raise
            raise unavailable from exc


@contextlib.contextmanager
def _open(fs: pafs.FileSystem, path: str, length: int | None) -> Iterator[tuple[_View, OrcTail]]:
    """A random-access view of ``[0, length)`` and its validated tail."""
    with _view(fs, path, length) as view:
        yield view, _checked_tail(path, view.file, view.length)


def _checked_tail(path: str, view: pa.NativeFile, length: int) -> OrcTail:
    tail = _at_footer(path, length, functools.partial(read_tail, view, length))
    _check_event_schema(path, tail)
    return tail


def _at_footer(path: str, length: int, read: Callable[[], T]) -> T:
    """``read()`` of a tail (or its PostScript) ending at ``length``; a file that does not end in one there is
    corrupt, whichever check found it."""
    try:
        return read()
    except TailError as exc:
        raise CorruptFileError(path, f"no valid ORC footer ends at {length}: {exc}") from exc


@contextlib.contextmanager
def _open_orc(
    fs: pafs.FileSystem, path: str, length: int | None, *, all_of_it: bool = True
) -> Iterator[tuple[po.ORCFile, pa.Schema, _View]]:
    """pyarrow's reader of ``[0, length)``, its schema, checked to be an event file's, and the view it reads.

    A prefix (a file still being written, its length from a side file) gets our whole tail check first: a
    length off a footer boundary must fail, never decode part of a stripe. A whole file only needs its
    PostScript checked (a cut file fails there) before ORC C++ parses the footer, and its schema checked from
    pyarrow's: parsing every committed file's tail twice was a tenth of a merge's time. ``all_of_it``: see
    :func:`_view`."""
    with _view(fs, path, length, all_of_it=all_of_it) as view:
        if view.whole:
            _at_footer(path, view.length, functools.partial(read_postscript, view.file, view.length))
        else:
            _checked_tail(path, view.file, view.length)
        with view.decoding("the ORC footer does not decode"):
            orc = po.ORCFile(view.file)
            schema = orc.schema
        problem = _arrow_event_schema_problem(schema) if view.whole else None
        if problem is not None:
            raise CorruptFileError(path, problem)
        yield orc, schema, view


def _check_event_schema(path: str, tail: OrcTail) -> None:
    problem = _event_schema_problem(tuple(tail.footer.repeated_bytes(FOOTER.TYPES)))
    if problem is not None:
        raise CorruptFileError(path, problem)


@functools.lru_cache(maxsize=256)
def _event_schema_problem(types: tuple[bytes, ...]) -> str | None:
    """What makes these encoded types not an event file's, if anything. Cached: a table's files share their
    types, and a compaction or scan opens hundreds of them."""
    root = Message.decode(types[0])
    names = [n.decode("utf-8", "replace") for n in root.repeated_bytes(TYPE.FIELD_NAMES)]
    if root.uint(TYPE.KIND) != _STRUCT or _not_event_names(names):
        return _NOT_EVENTS.format([n.lower() for n in names])
    row_id = root.packed_uints(TYPE.SUBTYPES)[5]
    if row_id >= len(types) or Message.decode(types[row_id]).uint(TYPE.KIND) != _STRUCT:
        return _ROW_NOT_STRUCT
    return None


def _arrow_event_schema_problem(schema: pa.Schema) -> str | None:
    """:func:`_event_schema_problem` for the schema pyarrow read from the footer."""
    if _not_event_names(schema.names):
        return _NOT_EVENTS.format([n.lower() for n in schema.names])
    if not pa.types.is_struct(schema.field(5).type):
        return _ROW_NOT_STRUCT
    return None


def _not_event_names(names: Sequence[str]) -> bool:
    return [n.lower() for n in names] != _EVENT_NAMES


def _columns(columns: Sequence[str] | None, include_row: bool) -> list[str]:
    if columns is not None:
        unknown = [c for c in columns if c not in EVENT_FIELDS]
        if unknown:
            raise ValueError(f"unknown event columns {unknown}; choose from {EVENT_FIELDS}")
        return list(columns)
    return list(EVENT_FIELDS if include_row else META_FIELDS)


def _project_row(
    schema: pa.Schema, cols: list[str], row_fields: Sequence[int] | None, row_names: Sequence[str] | None
) -> list[str]:
    """Replace ``row`` by the ``row`` children holding the table columns at ``row_fields`` (positions in the
    table; ``row_names``: the table's column names, matched to the file's as Hive 4 matches them, see
    :func:`maps_by_position`; without them, by position). A column the file lacks (added since it was
    written, or renamed) is left out: it reads as NULL."""
    if row_fields is None or "row" not in cols:
        return cols
    if any(i < 0 for i in row_fields):
        raise ValueError(f"negative row field positions in {list(row_fields)}")
    names = [f.name for f in schema.field("row").type]
    if row_names is None:
        indices = [i for i in row_fields if i < len(names)]
    else:
        by_position = maps_by_position(names)
        wanted = {row_field_key(i, row_names[i], by_position) for i in row_fields}
        indices = [i for i, n in enumerate(names) if n.lower() in wanted]
    picked = [f"row.{names[i]}" for i in sorted(set(indices))]
    # at least one column, so that batches still count rows when the file has none of those asked for
    return [c for c in cols if c != "row"] + picked or ["operation"]


def read_events(
    fs: pafs.FileSystem,
    path: str,
    *,
    length: int | None = None,
    columns: Sequence[str] | None = None,
    include_row: bool = True,
    row_fields: Sequence[int] | None = None,
    row_names: Sequence[str] | None = None,
) -> pa.Table:
    """All events of ``[0, length)`` (the whole file when ``length`` is None) as one Arrow table.

    ``row_fields`` (positions in the table) decodes only the children of ``row`` holding those columns, in
    file order; ``row_names`` (the table's column names) matches them as Hive does (:func:`_project_row`).
    """
    cols = _columns(columns, include_row)
    with _open_orc(fs, path, length) as (orc, schema, view), view.decoding("stripes do not decode"):
        return orc.read(columns=_project_row(schema, cols, row_fields, row_names))


def iter_event_batches(
    fs: pafs.FileSystem,
    path: str,
    length: int | None = None,
    columns: Sequence[str] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    row_fields: Sequence[int] | None = None,
    part: tuple[int, int] | None = None,
    row_names: Sequence[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Events stripe by stripe (memory bounded by one stripe), in batches of at most ``batch_rows``;
    ``row_fields`` as in :func:`read_events`. ``part`` ``(k, n)`` reads only the k-th of n consecutive runs of
    the file's stripes, as near equal in count as can be: parts ``0..n-1`` read every stripe once, in order."""
    cols = _columns(columns, True)
    k, n = part or (0, 1)
    with (
        _open_orc(fs, path, length, all_of_it=n == 1) as (orc, schema, view),
        view.decoding("stripes do not decode"),
    ):
        count = orc.nstripes
        cols = _project_row(schema, cols, row_fields, row_names)
        for i in range(count * k // n, count * (k + 1) // n):
            stripe = orc.read_stripe(i, columns=cols)
            for start in range(0, stripe.num_rows, batch_rows):
                yield stripe.slice(start, batch_rows)


def iter_orc_stripes(fs: pafs.FileSystem, path: str) -> Iterator[pa.RecordBatch]:
    """The stripes of any ORC file (an original, non-ACID one), one at a time. Bytes that do not decode are a
    :class:`CorruptFileError`, bytes the store could not deliver a :class:`StorageUnavailable`."""
    with _view(fs, path, None) as view, view.decoding("original file does not decode as ORC"):
        orc = po.ORCFile(view.file)
        for i in range(orc.nstripes):
            yield orc.read_stripe(i)


def read_acid_metadata(fs: pafs.FileSystem, path: str, length: int | None = None) -> AcidFileMetadata:
    """Key index, acid stats and version from the footer of ``[0, length)``."""
    with _open(fs, path, length) as (view, tail):
        meta = tail.user_metadata()
        try:
            key_index = list(KeyIndex.parse(meta[ACID_KEY_INDEX].decode("utf-8")).entries)
            stats = parse_acid_stats(meta[ACID_STATS].decode("utf-8")) if ACID_STATS in meta else (0, 0, 0)
        except KeyError:
            raise CorruptFileError(path, f"no {ACID_KEY_INDEX} in the ORC user metadata") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptFileError(path, f"bad ACID metadata: {exc}") from exc
        version = meta[ACID_VERSION].decode("utf-8", "replace") if ACID_VERSION in meta else None
        with view.decoding("schema does not decode"):
            row_type = po.ORCFile(view.file).schema.field("row").type
        return AcidFileMetadata(
            key_index=key_index,
            stats=stats,
            version=version,
            num_rows=tail.num_rows,
            stripes=len(tail.footer.repeated_bytes(FOOTER.STRIPES)),
            schema_row_type=row_type,
        )
