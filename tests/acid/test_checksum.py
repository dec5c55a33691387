"""CRC-32 continued over ranges equals the CRC-32 of the whole (the property replication's copies rely on)."""

from __future__ import annotations

import itertools
import zlib
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.checksum import crc32, crc32_of_chunks, file_prefix, read_range


@given(st.binary(max_size=4096), st.lists(st.integers(min_value=0, max_value=4096), max_size=8))
def test_continued_crc_is_the_crc_of_the_whole(data: bytes, cuts: list[int]) -> None:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    value = 0
    for a, b in itertools.pairwise(points):
        value = crc32(data[a:b], value)
    assert value == zlib.crc32(data)


def test_file_prefix_reads_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import acidstream.acid.checksum as checksum

    monkeypatch.setattr(checksum, "READ_CHUNK", 1000)  # several chunks
    data = bytes(range(256)) * 100
    path = tmp_path / "f"
    path.write_bytes(data)
    fs = pafs.LocalFileSystem()
    assert file_prefix(fs, str(path), 12345).crc32 == zlib.crc32(data[:12345])
    assert file_prefix(fs, str(path)).length == len(data)
    assert crc32_of_chunks(read_range(fs, str(path), 100, 5000)) == zlib.crc32(data[100:5000])
