"""Describing closed files for a commit's ACID_WRITE events (replicas copy and verify what they name).

Writers keep the checksum as they write (streaming batches, mutations' coordinators); files whose writer did not
hand it over (Spark tasks) are read once here, at commit. Each is fsynced first when the table asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from acidstream.acid.checksum import file_prefix
from acidstream.acid.names import ORC_ACID_VERSION_FILE
from acidstream.metastore.models import WrittenFile
from acidstream.storage import sync_files, table_filesystem


def describe_closed(
    location: str,
    paths: Sequence[str],
    *,
    fsync: bool = False,
    checksums: Mapping[str, tuple[int, int]] | None = None,
) -> list[WrittenFile]:
    """Each file under table ``location`` (whose filesystem it shares) with its length and CRC-32, read from
    the file unless ``checksums`` has them (``(length, crc32)`` its writer kept); with ``fsync``, the files,
    their directories' version files and the directories up to ``location`` are made durable first (see
    ``Table.fsync``)."""
    fs, root = table_filesystem(location)
    if fsync:
        versions = sorted({f"{p.rsplit('/', 1)[0]}/{ORC_ACID_VERSION_FILE}" for p in paths})
        sync_files(fs, [*paths, *versions], root)
    out = []
    for path in paths:
        kept = (checksums or {}).get(path)
        if kept is None:
            prefix = file_prefix(fs, path)
            kept = (prefix.length, prefix.crc32)
        out.append(WrittenFile(path, *kept))
    return out


def describe_partitions(
    location: str,
    files: Mapping[str | None, Sequence[str]],
    *,
    fsync: bool = False,
    checksums: Mapping[str, tuple[int, int]] | None = None,
) -> dict[str | None, list[WrittenFile]]:
    return {
        partition: describe_closed(location, paths, fsync=fsync, checksums=checksums)
        for partition, paths in files.items()
    }
