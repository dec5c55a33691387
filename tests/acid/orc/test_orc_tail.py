"""The tail builder: a PostScript encoded once per schema gives the bytes of setting its lengths field by field."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.orc as po
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.orc.protobuf import Message
from acidstream.acid.orc.tail import PS, PostscriptTemplate, build_tail, read_tail


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
