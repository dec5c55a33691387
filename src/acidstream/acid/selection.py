"""Directory selection for one table/partition snapshot: Hive's ``AcidUtils.getAcidState``.

Given the children of a partition directory and a snapshot, choose the one base and the minimal ordered set
of deltas whose union holds every visible event exactly once, and say which directories are obsolete
(shadowed by a compacted result) or aborted, so the cleaner may delete them. Row-level filtering by write
id is the reader's job; this module only picks directories. The rules: docs/format.md, Directory selection.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from acidstream.acid.names import (
    METADATA_ACID_FILE,
    ParsedBase,
    ParsedDelta,
    delta_sort_key,
    is_hidden,
    parse_bucket_file,
    parse_dir_name,
)
from acidstream.acid.writeids import LONG_MAX, RangeResponse, ValidTxnList, ValidWriteIdList
from acidstream.errors import AcidFormatError, CorruptFileError, NotEnoughHistory

#: ``AcidMetaDataFile.CURRENT_VERSION``; any other ``thisFileVersion`` is an error, as in Hive.
METADATA_FILE_VERSION = "0"


@dataclass(frozen=True)
class FileRef:
    """A data file with the physical length seen when it was listed."""

    path: str
    length: int


@dataclass(frozen=True)
class BucketFileRef:
    path: str
    bucket_id: int
    attempt_id: int | None
    physical_length: int


@dataclass(frozen=True)
class AcidDir:
    """One base/delta/delete_delta directory with its parsed name."""

    path: str
    name: str
    parsed: ParsedBase | ParsedDelta
    is_compacted_base: bool = False

    @property
    def is_base(self) -> bool:
        return isinstance(self.parsed, ParsedBase)

    @property
    def is_delete_delta(self) -> bool:
        return isinstance(self.parsed, ParsedDelta) and self.parsed.is_delete

    @property
    def min_write_id(self) -> int:
        # A base holds everything up to its write id, down to 0 (the write id of rows from original files).
        return self.parsed.min_write_id if isinstance(self.parsed, ParsedDelta) else 0

    @property
    def max_write_id(self) -> int:
        return self.parsed.max_write_id if isinstance(self.parsed, ParsedDelta) else self.parsed.write_id

    @property
    def statement_id(self) -> int | None:
        return self.parsed.statement_id if isinstance(self.parsed, ParsedDelta) else None

    @property
    def visibility_txn_id(self) -> int:
        return self.parsed.visibility_txn_id


@dataclass
class AcidState:
    """Result of ``get_acid_state``; ``deltas`` holds insert and delete deltas together, in Hive's order."""

    base: AcidDir | None
    original_files: list[FileRef] = field(default_factory=list)
    deltas: list[AcidDir] = field(default_factory=list)
    obsolete: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)

    @property
    def insert_deltas(self) -> list[AcidDir]:
        return [d for d in self.deltas if not d.is_delete_delta]

    @property
    def delete_deltas(self) -> list[AcidDir]:
        return [d for d in self.deltas if d.is_delete_delta]


def read_metadata_acid(fs: pafs.FileSystem, dir_path: str) -> dict[str, str] | None:
    """The ``_metadata_acid`` JSON of a directory, or None when absent."""
    path = f"{dir_path}/{METADATA_ACID_FILE}"
    try:
        with fs.open_input_stream(path) as stream:
            raw = stream.read()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFileError(path, f"not a JSON object: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise CorruptFileError(path, "not a JSON object of strings")
    version = data.get("thisFileVersion")
    if version != METADATA_FILE_VERSION:
        raise AcidFormatError(f"{path}: unexpected thisFileVersion {version!r} (expected '0')")
    return data


def is_compacted_base(fs: pafs.FileSystem, dir_path: str, parsed: ParsedBase) -> bool:
    """``isCompactedBase``: a visibility suffix (Hive 4) or ``dataFormat=compacted`` (Hive 3) marks compactor output.

    Only a compacted base erases history; an INSERT OVERWRITE base is visible exactly when its write id is.
    """
    if parsed.visibility_txn_id > 0:
        return True
    meta = read_metadata_acid(fs, dir_path)
    return meta is not None and meta.get("dataFormat", "").lower() == "compacted"


def list_bucket_files(fs: pafs.FileSystem, acid_dir_path: str) -> list[BucketFileRef]:
    """Bucket files of one ACID directory, by bucket then attempt (side, hidden and other files excluded)."""
    out = []
    for info in fs.get_file_info(pafs.FileSelector(acid_dir_path)):
        if info.type != pafs.FileType.File or is_hidden(info.base_name):
            continue
        parsed = parse_bucket_file(info.base_name)
        if parsed is not None:
            out.append(BucketFileRef(info.path, parsed[0], parsed[1], info.size))
    out.sort(key=lambda f: (f.bucket_id, -1 if f.attempt_id is None else f.attempt_id, f.path))
    return out


def _list_originals(fs: pafs.FileSystem, dir_path: str) -> list[FileRef]:
    selector = pafs.FileSelector(dir_path, recursive=True)
    return [
        FileRef(i.path, i.size)
        for i in fs.get_file_info(selector)
        if i.type == pafs.FileType.File and not any(is_hidden(p) for p in i.path[len(dir_path) :].split("/"))
    ]


@dataclass
class _Walk:
    """Mutable state of one directory scan (Hive's ``AcidDirectory`` while it is being built)."""

    write_ids: ValidWriteIdList
    txns: ValidTxnList | None
    base: AcidDir | None = None
    oldest_base: AcidDir | None = None
    candidates: list[AcidDir] = field(default_factory=list)
    originals: list[FileRef] = field(default_factory=list)
    original_dirs: list[str] = field(default_factory=list)
    obsolete: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)

    def txn_valid(self, txn: int) -> bool:
        return self.txns is None or self.txns.is_txn_valid(txn)

    def usable(self, path: str, visibility_txn_id: int) -> bool:
        """``isDirUsable``: compactor output is invisible until the compactor's txn commits."""
        if visibility_txn_id == 0 or self.txn_valid(visibility_txn_id):
            return True
        if self.txns is not None and self.txns.is_txn_aborted(visibility_txn_id):
            self.aborted.append(path)
        return False

    def valid_base(self, d: AcidDir) -> bool:
        """``isValidBase``, including Hive 4's shortcut ``w <= minOpenWriteId``.

        The shortcut accepts the base of an INSERT OVERWRITE that is itself the lowest open write id. Hive
        never shows that to a reader (the overwrite holds an exclusive lock); a lock-free reader racing an
        open overwrite would see an empty base, so writers of ``base_w`` must keep readers out until commit.
        """
        w = d.max_write_id
        min_open = self.write_ids.min_open_write_id
        if min_open != LONG_MAX and w <= min_open:
            return True
        if d.is_compacted_base:
            return self.write_ids.is_valid_base(w)
        return self.write_ids.is_write_id_valid(w)

    def add_base(self, d: AcidDir) -> None:
        """``processBaseDir``."""
        w = d.max_write_id
        if self.oldest_base is None or self.oldest_base.max_write_id > w:
            self.oldest_base = d
        if self.write_ids.is_write_id_aborted(w) and not d.is_compacted_base:
            self.aborted.append(d.path)  # an aborted INSERT OVERWRITE
            return
        best = self.base
        if (
            best is None
            or best.max_write_id < w
            or (best.max_write_id == w and d.is_compacted_base and self.txn_valid(d.visibility_txn_id))
        ):
            if self.valid_base(d):
                if best is not None:
                    self.obsolete.append(best.path)
                self.base = d
        else:
            self.obsolete.append(d.path)

    def add_delta(self, d: AcidDir) -> None:
        """``processDeltaDir``: wholly aborted → aborted; wholly invalid (e.g. open) → neither used nor obsolete."""
        lo, hi = d.min_write_id, d.max_write_id
        if self.write_ids.is_write_id_range_aborted(lo, hi) is RangeResponse.ALL:
            self.aborted.append(d.path)
        elif self.write_ids.is_write_id_range_valid(lo, hi) is not RangeResponse.NONE:
            self.candidates.append(d)

    def best_working_deltas(self) -> list[AcidDir]:
        """``findBestWorkingDeltas``: walk deltas in Hive's order, keeping those that add visible write ids."""
        ordered = sorted(self.candidates, key=lambda d: delta_sort_key(_delta(d), d.path))
        current = 0 if self.base is None else self.base.max_write_id
        last_stmt = -1
        prev: AcidDir | None = None
        kept: list[AcidDir] = []
        for d in ordered:
            stmt = -1 if d.statement_id is None else d.statement_id
            if d.max_write_id > current:
                if (
                    self.write_ids.is_write_id_range_valid(current + 1, d.max_write_id)
                    is not RangeResponse.NONE
                ):
                    kept.append(d)
                    current, last_stmt, prev = d.max_write_id, stmt, d
            elif d.max_write_id == current and last_stmt >= 0:
                kept.append(d)  # another statement of the same multi-statement txn
                prev = d
            elif prev is not None and (prev.min_write_id, prev.max_write_id, prev.statement_id) == (
                d.min_write_id,
                d.max_write_id,
                d.statement_id,
            ):
                kept.append(d)  # the delete_delta/delta pair of one range
                prev = d
            else:
                self.obsolete.append(d.path)
        return kept


def _delta(d: AcidDir) -> ParsedDelta:
    assert isinstance(d.parsed, ParsedDelta)
    return d.parsed


def _not_enough_history(write_ids: ValidWriteIdList, oldest: AcidDir) -> NotEnoughHistory:
    """Hive's ``ACID_NOT_ENOUGH_HISTORY`` text (two spaces after the first sentence, as Hive's tests assert)."""
    exceptions = write_ids.invalid_write_ids()
    first = str(exceptions[0]) if exceptions else "x"
    return NotEnoughHistory(
        f"Not enough history available for ({write_ids.high_watermark},{first}).  "
        f"Oldest available base: {oldest.path}"
    )


def get_acid_state(
    fs: pafs.FileSystem,
    directory: str,
    write_ids: ValidWriteIdList,
    txns: ValidTxnList | None = None,
    *,
    ignore: Collection[str] = (),
) -> AcidState:
    """Choose base, deltas and originals of ``directory`` for the snapshot ``write_ids``.

    ``txns`` is the snapshot's ValidTxnList; with it, directories carrying a ``_vT`` suffix are used only
    once compactor txn T is committed (Hive 4). Without it every directory counts as visible (Hive 3
    behaviour). ``ignore``: child names to treat as absent (Hive 3 style compactor output still being moved
    into place, which the directories it replaces stand for until it is complete).
    Raises NotEnoughHistory when only compacted bases newer than the snapshot allows exist.
    """
    directory = directory.rstrip("/") or "/"
    walk = _Walk(write_ids, txns)
    children = sorted(fs.get_file_info(pafs.FileSelector(directory)), key=lambda i: i.path)
    for info in children:
        name = info.base_name
        if is_hidden(name) or name in ignore:
            continue
        if info.type == pafs.FileType.File:
            walk.originals.append(FileRef(info.path, info.size))
            continue
        if info.type != pafs.FileType.Directory:
            continue
        parsed = parse_dir_name(name)
        if parsed is None:
            walk.original_dirs.append(info.path)
        elif walk.usable(info.path, parsed.visibility_txn_id):
            if isinstance(parsed, ParsedBase):
                walk.add_base(AcidDir(info.path, name, parsed, is_compacted_base(fs, info.path, parsed)))
            else:
                walk.add_delta(AcidDir(info.path, name, parsed))

    originals: list[FileRef] = []
    if walk.base is not None:
        walk.obsolete.extend(f.path for f in walk.originals)
        walk.obsolete.extend(walk.original_dirs)
    else:
        originals = walk.originals + [f for d in walk.original_dirs for f in _list_originals(fs, d)]
        originals.sort(key=lambda f: f.path)
    deltas = walk.best_working_deltas()
    if walk.base is None and walk.oldest_base is not None and walk.oldest_base.is_compacted_base:
        raise _not_enough_history(write_ids, walk.oldest_base)
    return AcidState(walk.base, originals, deltas, sorted(walk.obsolete), sorted(walk.aborted))
