"""The tail builder: a PostScript encoded once per schema gives the bytes of setting its lengths field by field."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.orc import AcidWriter, WriterOptions
from acidstream.acid.orc.protobuf import Message
from acidstream.acid.orc.tail import (
    PS,
    SMALLEST_COMPRESSED_SECTION,
    PostscriptTemplate,
    build_tail,
    read_tail,
)
from acidstream.acid.types import Column, parse_type

COLUMNS = [Column("id", parse_type("int"))]


def pyarrow_postscript(compression: str) -> Message:
    sink = pa.BufferOutputStream()
    po.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int32())}), sink, compression=compression)
    data = sink.getvalue()
    return read_tail(pa.BufferReader(data), data.size).postscript


POSTSCRIPTS = {c: pyarrow_postscript(c) for c in ("uncompressed", "zlib", "snappy", "zstd")}
LENGTHS = st.integers(0, 1 << 40)


@pytest.mark.parametrize("compression", sorted(POSTSCRIPTS))
@given(footer=LENGTHS, metadata=LENGTHS)
def test_template_encodes_as_setting_the_lengths(compression: str, footer: int, metadata: int) -> None:
    postscript = POSTSCRIPTS[compression]
    expected = postscript.copy().set_uint(PS.FOOTER_LENGTH, footer).set_uint(PS.METADATA_LENGTH, metadata)
    assert PostscriptTemplate(postscript).encode(footer, metadata) == expected.encode()


def test_lengths_missing_from_the_postscript_go_last_as_set_would_put_them() -> None:
    bare = Message().set_uint(PS.COMPRESSION, 0).set_bytes(PS.MAGIC, b"ORC")
    expected = bare.copy().set_uint(PS.FOOTER_LENGTH, 300).set_uint(PS.METADATA_LENGTH, 7).encode()
    assert PostscriptTemplate(bare).encode(300, 7) == expected


@given(footer=LENGTHS, metadata=LENGTHS)
def test_lengths_keep_their_places_whichever_comes_first(footer: int, metadata: int) -> None:
    swapped = (
        Message().set_uint(PS.METADATA_LENGTH, 1).set_uint(PS.COMPRESSION, 1).set_uint(PS.FOOTER_LENGTH, 2)
    )
    expected = swapped.copy().set_uint(PS.FOOTER_LENGTH, footer).set_uint(PS.METADATA_LENGTH, metadata)
    assert PostscriptTemplate(swapped).encode(footer, metadata) == expected.encode()


def test_built_tail_reads_back() -> None:
    """A tail built for an empty file's footer is what read_tail parses, lengths and codec included."""
    sink = pa.BufferOutputStream()
    po.write_table(pa.table({"id": pa.array([], pa.int32())}), sink, compression="zlib")
    data = sink.getvalue()
    tail = read_tail(pa.BufferReader(data), data.size)
    rebuilt = b"ORC" + build_tail(
        PostscriptTemplate(tail.postscript), tail.footer.encode(), tail.metadata.encode()
    )
    again = read_tail(pa.BufferReader(pa.py_buffer(rebuilt)), len(rebuilt))
    assert again.footer == tail.footer and again.metadata == tail.metadata
    assert again.compression == tail.compression and again.block_size == tail.block_size


@pytest.mark.parametrize("compression", ["ZLIB", "ZSTD"])
def test_a_tiny_files_tail_sections_are_stored_as_they_are(tmp_path: Path, compression: str) -> None:
    """A file of a few rows: its metadata and footer are "original" chunks (deflate's set-up costs more than it
    saves there), which pyarrow and our reader read; a section as long as SMALLEST_COMPRESSED_SECTION is
    compressed."""
    path = str(tmp_path / "bucket_00000")
    writer = AcidWriter(
        pafs.LocalFileSystem(), path, COLUMNS, options=WriterOptions(compression), side_file=False
    )
    writer.insert(1, 536870912, pa.table({"id": pa.array([1, 2, 3], pa.int32())}))
    writer.close()
    data = Path(path).read_bytes()
    tail = read_tail(pa.BufferReader(data), len(data))
    footer_length = tail.postscript.uint(PS.FOOTER_LENGTH) or 0
    metadata_length = tail.postscript.uint(PS.METADATA_LENGTH) or 0
    footer_at = len(data) - 1 - data[-1] - footer_length
    for at in (footer_at - metadata_length, footer_at):
        assert data[at] & 1 == 1  # the chunk header's "original" bit
    assert po.ORCFile(pa.BufferReader(data)).read().num_rows == 3
    template = PostscriptTemplate(tail.postscript)
    built = build_tail(template, bytes(SMALLEST_COMPRESSED_SECTION), b"")
    assert built[0] & 1 == 0 and len(built) < SMALLEST_COMPRESSED_SECTION
