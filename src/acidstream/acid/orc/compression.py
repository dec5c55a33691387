"""ORC's chunked compression of tail sections (and any stream): 3-byte headers, then the chunk.

Header = little-endian 24-bit ``(chunk_length << 1) | is_original``; an "original" chunk is stored
uncompressed because compressing it did not make it smaller. ZLIB is raw deflate (no zlib header).
"""

from __future__ import annotations

import zlib
from enum import IntEnum

import pyarrow as pa
from isal import isal_zlib

from acidstream.acid.orc.protobuf import ProtobufError, decode_varint


class CompressionKind(IntEnum):
    """orc_proto ``CompressionKind`` values."""

    NONE = 0
    ZLIB = 1
    SNAPPY = 2
    LZO = 3
    LZ4 = 4
    ZSTD = 5


#: names pyarrow.orc.write_table accepts for each kind we support
PYARROW_NAMES = {
    CompressionKind.NONE: "UNCOMPRESSED",
    CompressionKind.ZLIB: "ZLIB",
    CompressionKind.SNAPPY: "SNAPPY",
    CompressionKind.ZSTD: "ZSTD",
}

_MAX_CHUNK = (1 << 23) - 1


class CompressionError(ValueError):
    """Compressed bytes are malformed or use a codec we cannot read."""


def kind_of(name: str) -> CompressionKind:
    """Map a user-facing name (``"zlib"``, ``"NONE"``, ``"uncompressed"``) to a supported kind."""
    key = name.upper()
    if key == "UNCOMPRESSED":
        key = "NONE"
    try:
        kind = CompressionKind[key]
    except KeyError:
        raise ValueError(f"unknown ORC compression {name!r}") from None
    if kind not in PYARROW_NAMES:
        raise ValueError(f"ORC compression {name!r} is not supported (use NONE, ZLIB, SNAPPY or ZSTD)")
    return kind


#: ISA-L's deflate level (0-3) for everything we compress: its level 1 runs about five times faster than
#: zlib's level 2 (ORC C++'s SPEED level, which pyarrow uses) and, on streaming data, packs a little tighter.
#: The output is plain raw deflate, which every ORC reader's inflater reads.
DEFLATE_LEVEL = 1


def _compress_one(kind: CompressionKind, data: bytes) -> bytes:
    if kind == CompressionKind.ZLIB:
        return isal_zlib.compress(data, DEFLATE_LEVEL, -15)
    if kind in (CompressionKind.ZSTD, CompressionKind.SNAPPY):
        return bytes(pa.compress(data, codec=kind.name.lower(), asbytes=True))
    raise CompressionError(f"cannot compress with {kind.name}")


def _check_size(size: int, block_size: int) -> int:
    """A chunk never inflates beyond the block size; a larger claim is corruption (and must not be allocated)."""
    if size > block_size:
        raise CompressionError(
            f"chunk claims {size} bytes, more than the compression block size {block_size}"
        )
    return size


def _zstd_content_size(data: bytes) -> int:
    """Frame_Content_Size from a zstd frame header (ORC's Java and C++ writers always record it)."""
    if len(data) < 5 or int.from_bytes(data[:4], "little") != 0xFD2FB528:
        raise CompressionError("not a zstd frame")
    fhd = data[4]
    fcs_flag, single_segment, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    width = (single_segment, 2, 4, 8)[fcs_flag]
    if width == 0:
        raise CompressionError("zstd frame without a content size")
    if pos + width > len(data):
        raise CompressionError("truncated zstd frame header")
    size = int.from_bytes(data[pos : pos + width], "little")
    return size + 256 if width == 2 else size


def _decompress_one(kind: CompressionKind, data: bytes, block_size: int) -> bytes:
    try:
        if kind == CompressionKind.ZLIB:
            d = zlib.decompressobj(-15)
            out = d.decompress(data, block_size)
            if d.unconsumed_tail:
                raise CompressionError("zlib chunk inflates beyond the compression block size")
            return out
        if kind == CompressionKind.SNAPPY:
            size, _ = decode_varint(data, 0)  # a snappy block starts with its uncompressed length
            return bytes(pa.decompress(data, _check_size(size, block_size), codec="snappy", asbytes=True))
        if kind == CompressionKind.ZSTD:
            size = _check_size(_zstd_content_size(data), block_size)
            return bytes(pa.decompress(data, size, codec="zstd", asbytes=True))
    except CompressionError:
        raise
    except ProtobufError as exc:
        raise CompressionError(f"{kind.name} chunk has a bad length prefix") from exc
    except (zlib.error, pa.ArrowException, OSError, ValueError) as exc:
        raise CompressionError(f"{kind.name} chunk does not decompress: {exc}") from exc
    raise CompressionError(f"cannot decompress {kind.name}")


def compress(kind: CompressionKind, data: bytes, block_size: int, smallest: int = 0) -> bytes:
    """ORC-frame ``data``: split into ``block_size`` chunks, compress each, keep the original if not smaller.

    ``smallest``: chunks shorter than this stay original without trying (an "original" chunk is valid in
    every ORC reader, and for a few bytes setting up the codec costs more than it could save)."""
    if kind == CompressionKind.NONE:
        return data
    if not 0 < block_size <= _MAX_CHUNK:
        raise ValueError(f"compression block size {block_size} out of range")
    if 0 < len(data) < smallest and len(data) <= block_size:  # the common case of tiny streams
        return _original(data)
    out = bytearray()
    for start in range(0, len(data), block_size):
        chunk = data[start : start + block_size]
        packed = _compress_one(kind, chunk) if len(chunk) >= smallest else chunk
        if len(packed) < len(chunk):
            out += (len(packed) << 1).to_bytes(3, "little") + packed
        else:
            out += _original(chunk)
    return bytes(out)


def _original(chunk: bytes) -> bytes:
    """A chunk stored as it is: its 3-byte header has the "original" bit set."""
    return ((len(chunk) << 1) | 1).to_bytes(3, "little") + chunk


def decompress(kind: CompressionKind, data: bytes | memoryview, block_size: int) -> bytes:
    """Undo :func:`compress` (for any ORC writer's output of this codec)."""
    if kind == CompressionKind.NONE:
        return bytes(data)
    out = bytearray()
    pos, end = 0, len(data)
    while pos < end:
        if pos + 3 > end:
            raise CompressionError("truncated compression chunk header")
        header = int.from_bytes(data[pos : pos + 3], "little")
        pos += 3
        length = header >> 1
        if pos + length > end:
            raise CompressionError("compression chunk runs past the end of the section")
        chunk = bytes(data[pos : pos + length])
        pos += length
        if header & 1:
            out += chunk
        else:
            out += _decompress_one(kind, chunk, max(block_size, 1))
    return bytes(out)
