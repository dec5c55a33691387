"""What a worker compacts in one partition: the input directories, the output names, one job per bucket.

Hive's rules (``Worker.isEnoughToCompact``, ``CompactorMR``): a major compaction reads the base (or the original
files), every current delta and delete delta, and writes ``base_N`` (N = the highest write id it covers) with only
live rows; a minor one reads the current deltas only and writes ``delta_min_max`` and ``delete_delta_min_max``
(no statement id, no ``_v`` suffix: Hive 3 names). Only deltas whose whole write-id range lies below the lowest
open write id are current for the compactor, so an open transaction batch holds its delta back.

More current deltas than ``hive.compactor.max.num.delta`` are first minor-compacted in runs of that many
(Hive's ``CompactorMR`` pre-pass), so that no merge reads more than about that many deltas at once. Unlike Hive,
the runs' outputs stay in the request's ``_tmp`` directory and only feed the final merge: nothing but the
request's own outputs is ever published, and a failure or a crash leaves the partition as it was.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pyarrow.fs as pafs

from acidstream.acid.names import (
    ParsedDelta,
    base_dir,
    bucket_file,
    delete_delta_dir,
    delta_dir,
    delta_sort_key,
    parse_bucket_file,
    parse_dir_name,
)
from acidstream.acid.selection import AcidDir, AcidState
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.compactor.config import CompactorConfig
from acidstream.compactor.jobs import BucketJob
from acidstream.errors import CorruptFileError
from acidstream.metastore.models import TableDefinition
from acidstream.read.planning import FileSlice, dirs_slices, original_slice


@dataclass(frozen=True)
class PartitionPlan:
    """``outputs``: directory names to publish, in order (a minor compaction's delete delta is dropped again
    when no delete event survives); ``inputs``: top-level names they replace (plus obsolete leftovers),
    which the cleaner deletes."""

    kind: str
    outputs: tuple[str, ...]
    inputs: tuple[str, ...]
    jobs: tuple[BucketJob, ...]
    highest_write_id: int


def row_filter(write_ids: ValidWriteIdList) -> ValidWriteIdList:
    """The compactor's snapshot as a reader's: the same valid write ids, but a range holding an aborted one is
    "some valid" (the compactor's own list answers "all" for any resolved range: it selects directories, the
    rows inside still need their aborted events dropped)."""
    return ValidWriteIdList(write_ids.high_watermark, (), write_ids.aborted_ids, table=write_ids.table)


def is_enough_to_compact(kind: str, state: AcidState) -> bool:
    """Whether a compaction of ``kind`` has work: major needs original files or a delta or delete delta above
    the base, so that asking for one always leaves a base (Hive's ``Worker.isEnoughToCompact`` wants two
    directories, base included, and leaves a lone delta as it is: a major asked for right after a minor that
    merged every delta would publish nothing); minor needs two deltas, not just the insert/delete pair of one
    range (as Hive's)."""
    deltas = state.deltas
    if kind == "major":
        return bool(state.original_files) or bool(deltas)
    if len(deltas) == 2:
        return deltas[0].is_delete_delta == deltas[1].is_delete_delta
    return len(deltas) > 1


def nothing_to_compact(kind: str, path: str, state: AcidState | None = None) -> str:
    """Why a request is refused (:func:`is_enough_to_compact` said no, or ``path`` holds no files): what the
    partition holds against what a compaction of ``kind`` needs. No threshold is involved: those only decide
    what the initiator requests."""
    if state is None:
        return f"nothing to compact: {path} holds no files"
    need = (
        "original files, or a delta or delete delta above its base"
        if kind == "major"
        else "two deltas (not only the insert and delete delta of one write)"
    )
    held = [d.name for d in ([state.base] if state.base is not None else []) + list(state.deltas)]
    if state.original_files:
        held.append(f"{len(state.original_files)} original file(s)")
    holds = ", ".join(held) or "nothing"
    return f"nothing to compact in {path}: a {kind} compaction needs {need}; it holds {holds}"


def needs_cleaning(state: AcidState) -> bool:
    """Obsolete or aborted directories the cleaner could remove (Hive's ``needsCleaning``)."""
    return bool(state.obsolete or state.aborted)


def top_level_names(path: str, paths: list[str]) -> tuple[str, ...]:
    """The children of ``path`` that hold ``paths`` (an original file in a subdirectory names the subdirectory)."""
    prefix = path.rstrip("/") + "/"
    return tuple(sorted({p[len(prefix) :].split("/", 1)[0] for p in paths if p.startswith(prefix)}))


def plan_partition(
    fs: pafs.FileSystem,
    location: str,
    path: str,
    tmp: str,
    kind: str,
    state: AcidState,
    write_ids: ValidWriteIdList,
    table: TableDefinition,
    config: CompactorConfig,
    visibility_txn_id: int = 0,
    scratch: str | None = None,
) -> PartitionPlan | None:
    """The compaction of one partition directory at ``path`` (``location`` as the metastore names it), writing
    under ``tmp`` (which may be ``path`` itself: see ``worker.publish``) directories named with
    ``visibility_txn_id``'s suffix (0: none); None when there is not enough to compact. ``scratch`` (default:
    ``tmp``) holds the pre-pass's outputs, which are not inputs the cleaner removes."""
    if not is_enough_to_compact(kind, state):
        return None
    major = kind == "major"
    dirs: list[AcidDir] = ([state.base] if major and state.base is not None else []) + list(state.deltas)
    originals = list(state.original_files) if major and state.base is None else []
    if major:
        top = max((d.max_write_id for d in dirs), default=write_ids.high_watermark)
        outputs: tuple[str, ...] = (base_dir(top, visibility_txn_id),)
        insert_dir, delete_dir = outputs[0], None
    else:
        lo, top = min(d.min_write_id for d in dirs), max(d.max_write_id for d in dirs)
        insert_dir = delta_dir(lo, top, visibility_txn_id=visibility_txn_id)
        delete_dir = delete_delta_dir(lo, top, visibility_txn_id=visibility_txn_id)
        outputs = (delete_dir, insert_dir)  # published in this order
    inserts: dict[int, list[FileSlice]] = defaultdict(list)
    deletes: dict[int, list[FileSlice]] = defaultdict(list)
    for d, pieces in zip(dirs, dirs_slices(fs, dirs), strict=True):
        for piece in pieces:
            (deletes if d.is_delete_delta else inserts)[piece.bucket_id].append(piece)
    for original in originals:
        piece = original_slice(original)
        inserts[piece.bucket_id].append(piece)
    buckets = sorted(set(inserts) | (set() if major else set(deletes)))
    tmp_prefix = (scratch or tmp).rstrip("/") + "/"
    rows_view = row_filter(write_ids)
    jobs = tuple(
        BucketJob(
            location=location,
            bucket_id=b,
            inserts=tuple(inserts.get(b, ())),
            deletes=tuple(deletes.get(b, ())),
            write_ids=rows_view,
            major=major,
            insert_path=f"{tmp}/{insert_dir}/{bucket_file(b)}",
            delete_path=None if delete_dir is None else f"{tmp}/{delete_dir}/{bucket_file(b)}",
            columns=table.columns,
            compression=table.orc_compression,
            batch_rows=config.batch_rows,
            stripe_bytes=config.stripe_bytes,
        )
        for b in buckets
    )
    replaced = [d.path for d in dirs] + [f.path for f in originals] + list(state.obsolete)
    replaced = [p for p in replaced if not p.startswith(tmp_prefix)]  # a pre-pass's outputs go with _tmp
    return PartitionPlan(kind, outputs, top_level_names(path, replaced), jobs, top)


def check_recorded(fs: pafs.FileSystem, deltas: Sequence[AcidDir], recorded: Mapping[str, int]) -> None:
    """Refuse inputs that lost bytes their commits recorded (``recorded``: per ``delta_x_y/bucket_n``, the
    length a commit named, see ``Metastore.recorded_lengths``): a file cut back to an earlier footer (as a
    crash before its bytes reached the disk can leave it) reads as valid with fewer rows, and a compaction
    would make that permanent. Files a commit did not describe, and files that hold no rows (the
    ``_orc_acid_version`` marker a writer may list among its files), are not checked."""
    for d, pieces in zip(deltas, dirs_slices(fs, deltas), strict=True):
        have = {piece.path.rsplit("/", 1)[-1]: piece.length for piece in pieces}
        prefix = f"{d.name}/"
        for name, length in recorded.items():
            if not name.startswith(prefix):
                continue
            file = name[len(prefix) :]
            if parse_bucket_file(file) is None:
                continue
            if have.get(file, 0) < length:
                found = f"{have[file]} bytes" if file in have else "no readable bytes"
                raise CorruptFileError(f"{d.path}/{file}", f"{found}, but its commit recorded {length}")


def delta_runs(state: AcidState, max_deltas: int) -> list[list[AcidDir]]:
    """The pre-pass: ``len(deltas) // max_deltas`` consecutive runs of ``max_deltas`` current deltas (insert
    and delete deltas counted together, in Hive's order), each to be minor-compacted first; the rest of the
    deltas stay as they are. No run when there are not more than ``max_deltas`` (or it is below 2)."""
    deltas = state.deltas
    if max_deltas < 2 or len(deltas) <= max_deltas:
        return []
    return [deltas[i : i + max_deltas] for i in range(0, len(deltas) - max_deltas + 1, max_deltas)]


def after_runs(
    state: AcidState, runs: list[list[AcidDir]], outputs: list[tuple[str, list[str]]]
) -> AcidState:
    """``state`` with each run's deltas replaced by its outputs (``outputs[i]``: the directory holding them,
    and their names): the replaced deltas count as obsolete (the cleaner deletes them with the request's
    other inputs)."""
    replaced = {d.path for run in runs for d in run}
    made = [
        AcidDir(f"{where}/{name}", name, parsed)
        for where, names in outputs
        for name in names
        if (parsed := parse_dir_name(name)) is not None
    ]
    kept = [d for d in state.deltas if d.path not in replaced]
    return replace(
        state, deltas=sorted(made + kept, key=_order), obsolete=[*state.obsolete, *sorted(replaced)]
    )


def _order(d: AcidDir) -> tuple[int, int, int, str]:
    """Hive's delta order, by name (the paths of a pre-pass's outputs lie elsewhere)."""
    assert isinstance(d.parsed, ParsedDelta)
    return delta_sort_key(d.parsed, d.name)
