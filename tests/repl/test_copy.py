"""FileCopier on real files: ranges appended after the replica's side file says 0, checksums continued, a copy
that no longer checks out redone whole, a killed append resumed without duplicating bytes."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from acidstream.errors import ReplicationError
from acidstream.metastore.models import WrittenFile
from acidstream.repl.copy import FileCopier, LiveSource

FS = pafs.LocalFileSystem()


def _side(path: Path) -> list[int]:
    data = Path(f"{path}_flush_length").read_bytes()
    return [v for (v,) in struct.iter_unpack(">q", data)]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "src" / "delta_0000001_0000003" / "bucket_00000"
    dst = tmp_path / "dst" / "delta_0000001_0000003" / "bucket_00000"
    src.parent.mkdir(parents=True)
    return src, dst


def _commit(src: Path, data: bytes, start: int, *, open_: bool = True) -> WrittenFile:
    with src.open("ab") as f:
        f.write(data)
    whole = src.read_bytes()
    return WrittenFile(str(src), len(whole), zlib.crc32(whole), start, zlib.crc32(whole[:start]), open_)


def test_ranges_then_close(files: tuple[Path, Path]) -> None:
    src, dst = files
    copier = FileCopier(LiveSource())
    first = _commit(src, b"a" * 100, 0)
    c1 = copier.copy(FS, str(dst), first, None)
    assert (c1.length, c1.crc32) == (100, first.crc32) and _side(dst) == [0, 100]
    second = _commit(src, b"b" * 50, 100)
    c2 = copier.copy(FS, str(dst), second, (c1.length, c1.crc32))
    assert c2.length == 150 and _side(dst) == [0, 100, 150]
    last = _commit(src, b"", 150, open_=False)
    copier.copy(FS, str(dst), last, (c2.length, c2.crc32))
    assert dst.read_bytes() == src.read_bytes() and not Path(f"{dst}_flush_length").exists()
    assert copier.stats.bytes_copied == 150 and copier.stats.files_recopied == 0


def test_killed_append_resumes_without_duplicates(files: tuple[Path, Path]) -> None:
    src, dst = files
    copier = FileCopier(LiveSource())
    first = _commit(src, b"x" * 100, 0)
    c1 = copier.copy(FS, str(dst), first, None)
    second = _commit(src, bytes(range(200)), 100)
    with dst.open("ab") as f:  # an earlier attempt appended part of the range, then died
        f.write(src.read_bytes()[100:170])
    with Path(f"{dst}_flush_length").open("ab") as f:
        f.write(b"\0\0\0")  # and a torn side-file long
    c2 = copier.copy(FS, str(dst), second, (c1.length, c1.crc32))
    assert dst.read_bytes() == src.read_bytes() and c2.crc32 == second.crc32
    assert _side(dst) == [0, 100, 300]
    assert copier.stats.files_recopied == 0


def test_mismatch_copies_the_file_whole(files: tuple[Path, Path]) -> None:
    src, dst = files
    copier = FileCopier(LiveSource())
    first = _commit(src, b"x" * 100, 0)
    c1 = copier.copy(FS, str(dst), first, None)
    data = bytearray(dst.read_bytes())
    data[10] ^= 0xFF  # the replica's copy went bad
    dst.write_bytes(bytes(data))
    second = _commit(src, b"y" * 10, 100)
    c2 = copier.copy(FS, str(dst), second, (c1.length, zlib.crc32(bytes(data))))
    assert dst.read_bytes() == src.read_bytes() and c2.crc32 == second.crc32
    assert copier.stats.files_recopied == 1


def test_source_changed_under_its_checksum(files: tuple[Path, Path]) -> None:
    src, dst = files
    first = _commit(src, b"x" * 100, 0)
    src.write_bytes(b"z" * 100)  # rewritten in place: the recorded checksum no longer holds
    with pytest.raises(ReplicationError, match="changed or is corrupt"):
        FileCopier(LiveSource()).copy(FS, str(dst), first, None)
