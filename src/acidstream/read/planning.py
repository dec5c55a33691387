"""Turn (table, snapshot, partition filter) into per-bucket read tasks.

The plan is computed once, on the caller's side, from the metastore's snapshot and one directory listing per
partition; every task then reads only the files it names, with their logical lengths, so a plan can be shipped
to other processes (Spark tasks) and read there without a metastore.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from acidstream.acid.names import ParsedDelta, parse_bucket_file
from acidstream.acid.partitions import DEFAULT_PARTITION_NAME
from acidstream.acid.selection import AcidDir, AcidState, FileRef, get_acid_state, list_bucket_files
from acidstream.acid.sidefile import logical_extent
from acidstream.acid.types import Column
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import CorruptFileError, InvalidPartition, reading_from
from acidstream.faults import fault_point
from acidstream.runtime import LazyPool
from acidstream.storage import local_path


@dataclass(frozen=True)
class FileSlice:
    """The readable prefix of one ORC file: ``length`` is the logical length (side file), not the physical one.

    ``open_batch`` marks a file whose streaming batch is still being written (length from a side file): JVM
    readers, which read the physical tail, must not be given it. A ``base`` file skips the per-row write-id
    check, as Hive does inside a valid base: a base is chosen only when every write id it covers is resolved,
    and compaction drops aborted rows, so its range may hold exceptions without its rows holding any.
    """

    path: str
    length: int
    bucket_id: int
    min_write_id: int
    max_write_id: int
    statement_id: int | None
    open_batch: bool = False
    original: bool = False  # a non-ACID ("original") file: synthetic ROW__IDs
    base: bool = False  # in the chosen base: every event in it is visible (no per-row write-id check)
    #: ``(k, n)``: only the k-th of n consecutive runs of the file's stripes (a bucket read in parts, side by side)
    part: tuple[int, int] | None = None

    @property
    def read_bytes(self) -> int:
        """Bytes of the file this slice reads, about (its share, for a part)."""
        return self.length if self.part is None else self.length // self.part[1]


@dataclass(frozen=True)
class BucketTask:
    """Everything needed to read one bucket of one partition: insert-side files and delete events."""

    partition_values: tuple[str | None, ...]
    partition_name: str
    bucket_id: int
    insert_files: tuple[FileSlice, ...]
    delete_files: tuple[FileSlice, ...]


@dataclass(frozen=True)
class ScanPlan:
    table: str
    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...]
    write_ids: ValidWriteIdList
    tasks: tuple[BucketTask, ...]
    obsolete: tuple[str, ...] = field(default=())
    #: The scan's reader registration: whoever reads the tasks heartbeats it (``Metastore.heartbeat_readers``).
    reader_id: int | None = None


def plan_partition(
    fs: pafs.FileSystem,
    directory: str,
    write_ids: ValidWriteIdList,
    txns: ValidTxnList | None,
    partition_values: tuple[str | None, ...],
    partition_name: str,
    ignore: Collection[str] = (),
) -> tuple[list[BucketTask], AcidState | None]:
    """Tasks for one partition (or unpartitioned table) directory; a missing directory has no rows.
    ``ignore``: directory names to treat as absent (see ``get_acid_state``). A store that fails a listing or
    a side file's read raises :class:`StorageUnavailable` naming ``directory``, never its bare ``OSError``
    (a process's scans fail so at the ``scan.listing`` fault point)."""
    inserts: dict[int, list[FileSlice]] = defaultdict(list)
    deletes: dict[int, list[FileSlice]] = defaultdict(list)
    with reading_from(directory):
        fault_point("scan.listing")
        info = fs.get_file_info(directory)
        if info.type != pafs.FileType.Directory:
            return [], None
        state = get_acid_state(fs, directory, write_ids, txns, ignore=ignore)
        dirs = ([state.base] if state.base is not None else []) + list(state.deltas)
        for acid_dir, pieces in zip(dirs, dirs_slices(fs, dirs), strict=True):
            for piece in pieces:
                (deletes if acid_dir.is_delete_delta else inserts)[piece.bucket_id].append(piece)
    for original in state.original_files:
        piece = original_slice(original)
        inserts[piece.bucket_id].append(piece)
    tasks = [
        BucketTask(
            partition_values,
            partition_name,
            bucket,
            tuple(inserts[bucket]),
            tuple(deletes.get(bucket, ())),
        )
        for bucket in sorted(inserts)
    ]
    return tasks, state


#: Requests to a remote store in flight at once, per process: directory listings while a plan is made, and
#: files read ahead (:mod:`acidstream.read.prefetch`).
remote_pool = LazyPool("acidstream-remote", 8)


def dirs_slices(fs: pafs.FileSystem, dirs: Sequence[AcidDir]) -> list[list[FileSlice]]:
    """:func:`dir_slices` of each directory, in order. On a remote store (HDFS, S3) the directories are listed
    side by side: a listing is a round trip, and a compaction of 100 deltas made 200 of them one after another.
    The first directory (in order) whose listing fails raises, as one after another would."""
    if len(dirs) < 2 or local_path(fs, "/") is not None:
        return [dir_slices(fs, d) for d in dirs]
    return list(remote_pool().map(functools.partial(dir_slices, fs), dirs))


def dir_slices(fs: pafs.FileSystem, acid_dir: AcidDir) -> list[FileSlice]:
    """The readable bucket files of one base/delta directory (logical lengths).

    A file of an open batch whose side file publishes no footer yet is left out: nothing in it is committed.
    A closed file of 0 bytes is corrupt: writers (Hive's ``OrcRecordUpdater`` and ours) close every bucket file
    they keep with an ORC footer, so an empty one lost its data (a crash before it reached the disk); read as
    "no rows", it would drop committed rows, or bring deleted ones back.
    """
    parsed = acid_dir.parsed if isinstance(acid_dir.parsed, ParsedDelta) else None
    out = []
    for ref in list_bucket_files(fs, acid_dir.path):
        length, side_file = logical_extent(fs, ref.path, parsed, ref.physical_length)
        if not length and not side_file and fs.get_file_info(ref.path).type == pafs.FileType.File:
            # (still there: a batch's writer deletes a file it published nothing in, then its side file)
            raise CorruptFileError(
                ref.path, f"0 bytes in {acid_dir.name}: a committed bucket file has a footer"
            )
        if length:
            out.append(
                FileSlice(
                    ref.path,
                    length,
                    ref.bucket_id,
                    acid_dir.min_write_id,
                    acid_dir.max_write_id,
                    acid_dir.statement_id,
                    open_batch=side_file,
                    base=acid_dir.is_base,
                )
            )
    return out


def original_slice(original: FileRef) -> FileSlice:
    """An original (non-ACID) file, in the bucket its name says."""
    parsed_bucket = parse_bucket_file(original.path.rsplit("/", 1)[-1])
    bucket = parsed_bucket[0] if parsed_bucket else _original_bucket(original.path)
    return FileSlice(original.path, original.length, bucket, 0, 0, None, original=True)


def _original_bucket(path: str) -> int:
    """Bucket id of an original file ``000001_0[_copy_N]``: the number before the first underscore."""
    name = path.rsplit("/", 1)[-1]
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else 0


def partition_value_table(
    partition_keys: Sequence[Column], values: Sequence[Sequence[str | None]]
) -> pa.Table:
    """Typed partition values (default partition → null; unparsable → null, as Hive reads them)."""
    arrays = []
    for i, key in enumerate(partition_keys):
        raw = pa.array([v[i] if v[i] != DEFAULT_PARTITION_NAME else None for v in values], pa.string())
        target = key.type.to_arrow()
        if target == pa.string():
            arrays.append(raw)
            continue
        try:
            arrays.append(pc.cast(raw, target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            arrays.append(pa.array([_cast_or_null(x, target) for x in raw.to_pylist()], target))
    return pa.table(arrays, names=[k.name for k in partition_keys])


def _cast_or_null(value: str | None, target: pa.DataType) -> Any:
    if value is None:
        return None
    try:
        return pc.cast(pa.array([value]), target)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def select_partitions(
    partition_keys: Sequence[Column],
    partitions: Sequence[tuple[tuple[str, ...], str, str]],
    partition_filter: Mapping[str, Any] | pc.Expression | None,
) -> list[tuple[tuple[str, ...], str, str]]:
    """Prune ``(values, name, location)`` triples with a dict of key → value or an Arrow expression."""
    if partition_filter is None or not partitions:
        return list(partitions)
    if isinstance(partition_filter, Mapping):
        names = [k.name for k in partition_keys]
        unknown = set(k.lower() for k in partition_filter) - set(names)
        if unknown:
            raise InvalidPartition(str(dict(partition_filter)), f"unknown partition keys {sorted(unknown)}")
        types = {k.name: k.type.to_arrow() for k in partition_keys}
        expr: pc.Expression | None = None
        for k, v in partition_filter.items():
            name = k.lower()
            term = (
                pc.field(name).is_null()
                if v is None
                else pc.field(name) == _typed_value(name, v, types[name])
            )
            expr = term if expr is None else expr & term
        assert expr is not None
        partition_filter = expr
    typed = partition_value_table(partition_keys, [p[0] for p in partitions])
    typed = typed.append_column("__index", pa.array(range(len(partitions)), pa.int64()))
    try:
        kept = typed.filter(partition_filter).column("__index").to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as exc:
        raise InvalidPartition(
            str(partition_filter), f"not a filter over the partition keys: {exc}"
        ) from None
    return [partitions[i] for i in kept]


def _typed_value(key: str, value: Any, target: pa.DataType) -> pa.Scalar:
    """A dict filter value as the key's type, so ``{"year": "2024"}`` and ``{"year": 2024}`` both match."""
    try:
        return pa.scalar(value).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidPartition(f"{key}={value!r}", f"not a {target} value: {exc}") from None
