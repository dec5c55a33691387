"""Describing closed files for a commit's ACID_WRITE events (replicas copy and verify what they name).

Writers of growing files (streaming batches) keep the checksum as they write; files a txn wrote and closed
(mutations, Spark tasks) are read once here, at commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from acidstream.acid.checksum import file_prefix
from acidstream.metastore.models import WrittenFile
from acidstream.storage import table_filesystem


def describe_closed(location: str, paths: Sequence[str]) -> list[WrittenFile]:
    """Each file under table ``location`` (whose filesystem it shares) with its length and CRC-32."""
    fs, _ = table_filesystem(location)
    out = []
    for path in paths:
        prefix = file_prefix(fs, path)
        out.append(WrittenFile(path, prefix.length, prefix.crc32))
    return out


def describe_partitions(
    location: str, files: Mapping[str | None, Sequence[str]]
) -> dict[str | None, list[WrittenFile]]:
    return {partition: describe_closed(location, paths) for partition, paths in files.items()}
