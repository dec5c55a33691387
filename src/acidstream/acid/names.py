"""Names of ACID directories and files (docs/format.md, Directory layout): build them, parse them, order them.

Every other module derives meaning from names only through this one, so Hive's grammar lives in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from acidstream.errors import AcidFormatError

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"
DELETE_DELTA_PREFIX = "delete_delta_"
VISIBILITY_PREFIX = "_v"
BUCKET_PREFIX = "bucket_"
ORC_ACID_VERSION_FILE = "_orc_acid_version"
ORC_ACID_VERSION = "2"
METADATA_ACID_FILE = "_metadata_acid"
SIDE_FILE_SUFFIX = "_flush_length"
COPY_KEYWORD = "_copy_"
MAX_STATEMENTS_PER_TXN = 10000

_BASE_RE = re.compile(r"base_(\d+)(?:_v(\d+))?")
_DELTA_RE = re.compile(r"(delete_delta_|delta_)(\d+)_(\d+)(?:_(\d+))?(?:_v(\d+))?")
_BUCKET_RE = re.compile(r"bucket_([0-9]+)(?:_([0-9]+))?")
_ORIGINAL_RE = re.compile(r"([0-9]+)_([0-9]+)(?:_copy_([0-9]+))?")


def _write_id(n: int) -> str:
    """``%07d``: zero-padded to seven digits, longer numbers printed in full (Hive's ``DELTA_DIGITS``)."""
    if n < 0:
        raise ValueError(f"write/txn ids in directory names must be >= 0, got {n}")
    return f"{n:07d}"


def _with_visibility(name: str, visibility_txn_id: int) -> str:
    """``addVisibilitySuffix``: txn 0 means "always visible" and adds nothing."""
    return name if visibility_txn_id == 0 else f"{name}{VISIBILITY_PREFIX}{_write_id(visibility_txn_id)}"


def base_dir(write_id: int, visibility_txn_id: int = 0) -> str:
    return _with_visibility(BASE_PREFIX + _write_id(write_id), visibility_txn_id)


def _delta(prefix: str, min_wid: int, max_wid: int, statement_id: int | None, visibility_txn_id: int) -> str:
    if min_wid > max_wid:
        raise ValueError(f"delta range {min_wid}..{max_wid} is empty")
    name = f"{prefix}{_write_id(min_wid)}_{_write_id(max_wid)}"
    if statement_id is not None and statement_id != -1:  # -1 is Hive's "no statement id"
        if not 0 <= statement_id < MAX_STATEMENTS_PER_TXN:
            raise ValueError(f"statement id {statement_id} outside 0..{MAX_STATEMENTS_PER_TXN - 1}")
        name += f"_{statement_id:04d}"
    return _with_visibility(name, visibility_txn_id)


def delta_dir(min_wid: int, max_wid: int, statement_id: int | None = None, visibility_txn_id: int = 0) -> str:
    return _delta(DELTA_PREFIX, min_wid, max_wid, statement_id, visibility_txn_id)


def delete_delta_dir(
    min_wid: int, max_wid: int, statement_id: int | None = None, visibility_txn_id: int = 0
) -> str:
    return _delta(DELETE_DELTA_PREFIX, min_wid, max_wid, statement_id, visibility_txn_id)


def bucket_file(bucket_id: int, attempt_id: int | None = None) -> str:
    """``createBucketFile``: ``bucket_%05d`` plus ``_<attempt>`` for Hive 4 direct-insert files."""
    if bucket_id < 0:
        raise ValueError(f"bucket id must be >= 0, got {bucket_id}")
    name = f"{BUCKET_PREFIX}{bucket_id:05d}"
    return name if attempt_id is None else f"{name}_{attempt_id}"


@dataclass(frozen=True)
class ParsedBase:
    write_id: int
    visibility_txn_id: int = 0

    @property
    def name(self) -> str:
        return base_dir(self.write_id, self.visibility_txn_id)


@dataclass(frozen=True)
class ParsedDelta:
    min_write_id: int
    max_write_id: int
    statement_id: int | None
    visibility_txn_id: int
    is_delete: bool

    @property
    def may_contain_side_file(self) -> bool:
        """``ParsedDeltaLight.mayContainSideFile``: only open multi-txn streaming insert deltas have one."""
        return not self.is_delete and self.min_write_id != self.max_write_id and self.visibility_txn_id <= 0

    @property
    def order_key(self) -> tuple[int, int, int]:
        """``ParsedDeltaLight.compareTo`` without its final path tie-break (see ``delta_sort_key``).

        min ascending, max descending (wider first), statement ascending with "none" as -1 (compacted first).
        """
        stmt = -1 if self.statement_id is None else self.statement_id
        return (self.min_write_id, -self.max_write_id, stmt)

    @property
    def name(self) -> str:
        make = delete_delta_dir if self.is_delete else delta_dir
        return make(self.min_write_id, self.max_write_id, self.statement_id, self.visibility_txn_id)


def delta_sort_key(parsed: ParsedDelta, path: str) -> tuple[int, int, int, str]:
    """Hive's full delta order: ``order_key`` then the path (so ``delete_delta_x`` precedes ``delta_x``)."""
    return (*parsed.order_key, path)


def parse_dir_name(name: str) -> ParsedBase | ParsedDelta | None:
    """Parse a directory name; None for names that are not ACID; AcidFormatError for malformed ACID ones."""
    if name.startswith(BASE_PREFIX):
        m = _BASE_RE.fullmatch(name)
        if m is None:
            raise AcidFormatError(f"malformed base directory name {name!r}")
        return ParsedBase(int(m[1]), int(m[2] or 0))
    if name.startswith((DELTA_PREFIX, DELETE_DELTA_PREFIX)):
        m = _DELTA_RE.fullmatch(name)
        if m is None:
            raise AcidFormatError(f"malformed delta directory name {name!r}")
        lo, hi = int(m[2]), int(m[3])
        if lo > hi:
            raise AcidFormatError(f"delta directory {name!r} has min write id {lo} > max {hi}")
        stmt = None if m[4] is None else int(m[4])
        return ParsedDelta(lo, hi, stmt, int(m[5] or 0), m[1] == DELETE_DELTA_PREFIX)
    return None


def without_visibility(name: str) -> str:
    """A base or delta directory's name without its ``_vT`` suffix (other names as they are): what the
    directory is called where the compactor txn T means nothing, e.g. on a replica."""
    parsed = parse_dir_name(name)
    return name if parsed is None else replace(parsed, visibility_txn_id=0).name


def parse_bucket_file(name: str) -> tuple[int, int | None] | None:
    """``BUCKET_PATTERN`` on a file name: (bucket id, attempt id or None); None for anything else."""
    m = _BUCKET_RE.fullmatch(name)
    if m is None:
        return None
    return int(m[1]), None if m[2] is None else int(m[2])


def is_original_file(name: str) -> bool:
    """``ORIGINAL_PATTERN`` / ``ORIGINAL_PATTERN_COPY``: pre-ACID files such as ``000000_0_copy_1``."""
    return _ORIGINAL_RE.fullmatch(name) is not None


def parse_original_file(name: str) -> tuple[int, int] | None:
    """(bucket id, copy number) of an original file (copy 0 = no ``_copy_`` suffix); None otherwise."""
    m = _ORIGINAL_RE.fullmatch(name)
    if m is None:
        return None
    return int(m[1]), int(m[3] or 0)


def side_file_path(data_path: str) -> str:
    """``OrcAcidUtils.getSideFile``: the data path plus ``_flush_length``."""
    return data_path + SIDE_FILE_SUFFIX


def is_side_file(name: str) -> bool:
    return name.endswith(SIDE_FILE_SUFFIX)


def is_hidden(name: str) -> bool:
    """``hiddenFileFilter``: names starting with ``_`` or ``.`` (staging, ``_tmp_*``, markers) are not data."""
    return name.startswith(("_", "."))


def is_acid_hidden(name: str) -> bool:
    """``acidHiddenFileFilter``: hidden, except the two ACID marker files, which it keeps."""
    return is_hidden(name) and name not in (METADATA_ACID_FILE, ORC_ACID_VERSION_FILE)
