"""ORC chunked compression of tail sections, for every codec we read and write."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.orc as po
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.acid.orc.compression import CompressionError, CompressionKind, compress, decompress, kind_of
from acidstream.acid.orc.tail import read_tail

KINDS = [CompressionKind.NONE, CompressionKind.ZLIB, CompressionKind.SNAPPY, CompressionKind.ZSTD]


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=40, deadline=None)
@given(data=st.one_of(st.binary(max_size=5000), st.text(max_size=3000).map(lambda s: s.encode() * 20)))
def test_round_trip(kind: CompressionKind, data: bytes) -> None:
    block = 1024
    packed = compress(kind, data, block)
    assert decompress(kind, packed, block) == data


@pytest.mark.parametrize("kind", KINDS[1:])
def test_incompressible_chunks_are_stored_original(kind: CompressionKind) -> None:
    data = bytes(range(256)) * 4  # 1 KiB that no codec shrinks below itself in one chunk
    noise = os.urandom(2048)
    packed = compress(kind, noise, 1024)
    headers = [int.from_bytes(packed[i : i + 3], "little") for i in (0, 3 + 1024)]
    assert [h & 1 for h in headers] == [1, 1] and [h >> 1 for h in headers] == [1024, 1024]
    assert decompress(kind, compress(kind, data * 10, 1024), 1024) == data * 10


@pytest.mark.parametrize("kind", KINDS[1:])
def test_chunks_below_smallest_stay_original(kind: CompressionKind) -> None:
    """Zeros compress well, but a chunk shorter than ``smallest`` is stored without trying; longer ones are not."""
    assert compress(kind, bytes(100), 1024, smallest=128) == ((100 << 1) | 1).to_bytes(3, "little") + bytes(
        100
    )
    packed = compress(kind, bytes(200), 1024, smallest=128)
    assert int.from_bytes(packed[:3], "little") & 1 == 0 and len(packed) < 200
    assert decompress(kind, packed, 1024) == bytes(200)
    assert compress(kind, b"", 1024, smallest=128) == b""  # an empty stream has no chunk at all
    # past the block size, small chunks stay original one by one
    tail = compress(kind, bytes(1100), 1024, smallest=128)
    assert tail[-79:] == ((76 << 1) | 1).to_bytes(3, "little") + bytes(76)
    assert decompress(kind, tail, 1024) == bytes(1100)


@pytest.mark.parametrize("kind", KINDS[1:])
def test_we_read_pyarrow_tails(kind: CompressionKind) -> None:
    """Tails compressed by ORC C++ decode with our codec implementation."""
    sink = pa.BufferOutputStream()
    po.write_table(pa.table({"s": [f"value {i}" for i in range(5000)]}), sink, compression=kind.name)
    data = sink.getvalue()
    tail = read_tail(pa.BufferReader(data), data.size)
    assert tail.compression == kind and tail.num_rows == 5000


@pytest.mark.parametrize("kind", KINDS[1:])
def test_damaged_chunks_raise(kind: CompressionKind) -> None:
    packed = bytearray(compress(kind, b"abc" * 1000, 65536))
    with pytest.raises(CompressionError):
        decompress(kind, bytes(packed[:-2]), 65536)  # chunk runs past the end
    packed[3:9] = b"\xff" * 6
    with pytest.raises(CompressionError):
        decompress(kind, bytes(packed), 65536)


def test_kind_names() -> None:
    assert kind_of("zlib") == CompressionKind.ZLIB
    assert kind_of("uncompressed") == CompressionKind.NONE
    for bad in ("lzo", "lz4", "brotli"):
        with pytest.raises(ValueError):
            kind_of(bad)
