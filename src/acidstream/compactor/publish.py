"""Moving a compaction's output into place: written under ``<partition>/_tmp_<uuid>`` (hidden from readers),
then each directory renamed into the partition once all of it is complete (Hive's CompactorMR job commit).

Renames are idempotent, so a dead worker's publication can be completed by anyone (``move_into_place`` skips
what is already in place); a target name that exists before publication means the compaction must not go on.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow.fs as pafs

from acidstream.acid.checksum import file_prefix
from acidstream.acid.names import METADATA_ACID_FILE, ParsedBase, ParsedDelta, parse_dir_name
from acidstream.acid.orc import prepare_directory
from acidstream.acid.selection import METADATA_FILE_VERSION
from acidstream.errors import AcidFormatError
from acidstream.metastore.models import WrittenFile

TMP_PREFIX = "_tmp_"
#: In a request's meta: its outputs are written in place, with the compactor txn's visibility suffix.
IN_PLACE = "in_place"


def new_tmp_dir(path: str) -> str:
    return f"{path.rstrip('/')}/{TMP_PREFIX}{uuid.uuid4().hex}"


def finish_outputs(fs: pafs.FileSystem, tmp: str, outputs: Sequence[str]) -> list[str]:
    """Complete the output directories in ``tmp`` and return those to publish.

    A base always exists (an empty one says "no rows") and gets Hive 3's ``_metadata_acid`` compacted marker; an
    insert delta always exists (it replaces its inputs even when none of their rows survived); a delete delta
    only when a delete event survived.
    """
    kept = []
    for name in outputs:
        directory = f"{tmp}/{name}"
        parsed = parse_dir_name(name)
        exists = fs.get_file_info(directory).type == pafs.FileType.Directory
        if parsed is not None and not isinstance(parsed, ParsedBase) and parsed.is_delete and not exists:
            continue
        prepare_directory(fs, directory)
        if isinstance(parsed, ParsedBase):
            marker = json.dumps({"thisFileVersion": METADATA_FILE_VERSION, "dataFormat": "compacted"})
            with fs.open_output_stream(f"{directory}/{METADATA_ACID_FILE}") as out:
                out.write(marker.encode("utf-8"))
        kept.append(name)
    return kept


def describe_outputs(
    fs: pafs.FileSystem, tmp: str, outputs: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """Every file of each output directory, by path inside it, with its length and CRC-32 (replicas copy and
    verify them: the COMPACTED event carries this)."""
    described: dict[str, list[dict[str, Any]]] = {}
    for name in outputs:
        directory = f"{tmp}/{name}"
        files = []
        for info in fs.get_file_info(pafs.FileSelector(directory, recursive=True)):
            if info.type == pafs.FileType.File:
                prefix = file_prefix(fs, info.path, info.size)
                relative = info.path[len(directory) + 1 :]
                files.append(WrittenFile(relative, prefix.length, prefix.crc32).to_json())
        described[name] = sorted(files, key=lambda f: str(f["path"]))
    return described


def check_free(fs: pafs.FileSystem, path: str, outputs: Sequence[str]) -> None:
    """Refuse to publish over an existing directory (it would mix two compactions' files)."""
    for name in outputs:
        if fs.get_file_info(f"{path}/{name}").type != pafs.FileType.NotFound:
            raise AcidFormatError(
                f"{path}/{name} already exists: the compaction's output cannot be published"
            )


def move_into_place(fs: pafs.FileSystem, tmp: str, path: str, outputs: Sequence[str]) -> None:
    """Rename each output directory from ``tmp`` into ``path``, skipping those already moved."""
    for name in outputs:
        source, target = f"{tmp}/{name}", f"{path}/{name}"
        if fs.get_file_info(source).type == pafs.FileType.NotFound:
            if fs.get_file_info(target).type == pafs.FileType.Directory:
                continue  # moved by an earlier attempt
            raise AcidFormatError(f"compaction output {name} is neither in {tmp} nor in {path}")
        try:
            fs.move(source, target)
        except FileNotFoundError:
            if fs.get_file_info(target).type != pafs.FileType.Directory:
                raise  # a concurrent roll-forward moved it: fine; anything else is not


def acid_dirs(fs: pafs.FileSystem, path: str) -> Iterator[tuple[pafs.FileInfo, ParsedBase | ParsedDelta]]:
    """The base and delta directories directly in ``path`` (none if it is gone), with their parsed names;
    other entries and malformed names are passed over."""
    for info in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
        if info.type != pafs.FileType.Directory:
            continue
        try:
            parsed = parse_dir_name(info.base_name)
        except AcidFormatError:
            continue
        if parsed is not None:
            yield info, parsed


def discard_in_place(fs: pafs.FileSystem, path: str, txn_id: int) -> None:
    """Remove the output directories compactor txn ``txn_id`` wrote in place (``*_v<txn_id>``) and never
    published: no reader uses them (the txn is not committed), and the cleaner would not know them."""
    for info, parsed in acid_dirs(fs, path):
        if parsed.visibility_txn_id == txn_id:
            with contextlib.suppress(FileNotFoundError):
                fs.delete_dir(info.path)


def discard(fs: pafs.FileSystem, tmp: str | None) -> None:
    """Remove a ``_tmp`` directory and whatever is left in it."""
    if tmp:
        with contextlib.suppress(FileNotFoundError):
            fs.delete_dir(tmp)
