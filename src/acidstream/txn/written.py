"""Describing closed files for a commit's ACID_WRITE events (replicas copy and verify what they name).

Writers of growing files (streaming batches) keep the checksum as they write; files a txn wrote and closed
(mutations, Spark tasks) are read once here, at commit, and fsynced first when the table asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from acidstream.acid.checksum import file_prefix
from acidstream.acid.names import ORC_ACID_VERSION_FILE
from acidstream.metastore.models import WrittenFile
from acidstream.storage import sync_files, table_filesystem


def describe_closed(location: str, paths: Sequence[str], *, fsync: bool = False) -> list[WrittenFile]:
    """Each file under table ``location`` (whose filesystem it shares) with its length and CRC-32; with
    ``fsync``, the files, their directories' version files and the directories up to ``location`` are made
    durable first (see ``Table.fsync``)."""
    fs, root = table_filesystem(location)
    if fsync:
        versions = sorted({f"{p.rsplit('/', 1)[0]}/{ORC_ACID_VERSION_FILE}" for p in paths})
        sync_files(fs, [*paths, *versions], root)
    out = []
    for path in paths:
        prefix = file_prefix(fs, path)
        out.append(WrittenFile(path, prefix.length, prefix.crc32))
    return out


def describe_partitions(
    location: str, files: Mapping[str | None, Sequence[str]], *, fsync: bool = False
) -> dict[str | None, list[WrittenFile]]:
    return {partition: describe_closed(location, paths, fsync=fsync) for partition, paths in files.items()}
