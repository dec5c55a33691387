"""ORC file tail: parse it (validating that a file prefix really ends on a footer) and build it back.

Layout of a tail at the end of ``[0, length)``: Metadata (compressed), Footer (compressed), PostScript
(never compressed), then one byte holding the PostScript length. Field numbers follow apache/orc
``orc_proto.proto`` (checked against orc-format 1.1.1's generated ``OrcProto``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from acidstream.acid.orc.compression import CompressionError, CompressionKind, compress, decompress
from acidstream.acid.orc.protobuf import VARINT, Message, ProtobufError, encode_fields, encode_varint

MAGIC = b"ORC"


class PS:
    """PostScript field numbers."""

    FOOTER_LENGTH = 1
    COMPRESSION = 2
    COMPRESSION_BLOCK_SIZE = 3
    VERSION = 4
    METADATA_LENGTH = 5
    WRITER_VERSION = 6
    MAGIC = 8000


class FOOTER:
    """Footer field numbers."""

    HEADER_LENGTH = 1
    CONTENT_LENGTH = 2
    STRIPES = 3
    TYPES = 4
    METADATA = 5
    NUMBER_OF_ROWS = 6
    STATISTICS = 7
    ROW_INDEX_STRIDE = 8
    WRITER = 9
    SOFTWARE_VERSION = 12


class STRIPE:
    """StripeInformation field numbers."""

    OFFSET = 1
    INDEX_LENGTH = 2
    DATA_LENGTH = 3
    FOOTER_LENGTH = 4
    NUMBER_OF_ROWS = 5


class TYPE:
    """Type field numbers and the kinds we touch."""

    KIND = 1
    SUBTYPES = 2
    FIELD_NAMES = 3
    MAXIMUM_LENGTH = 4
    PRECISION = 5
    SCALE = 6
    STRING = 7
    VARCHAR = 16
    CHAR = 17


class TailError(ValueError):
    """The bytes before ``length`` do not end with a valid ORC tail."""


class ReadAt(Protocol):
    """Random access to a file, as ``pyarrow.NativeFile.read_at`` offers it."""

    def read_at(self, nbytes: int, offset: int) -> bytes: ...


@dataclass
class OrcTail:
    """A parsed tail. ``postscript``/``footer``/``metadata`` are the decoded messages."""

    postscript: Message
    footer: Message
    metadata: Message
    compression: CompressionKind
    block_size: int
    length: int  # the file (prefix) length this tail ends

    @property
    def content_length(self) -> int:
        return self.footer.uint(FOOTER.CONTENT_LENGTH, 0) or 0

    @property
    def num_rows(self) -> int:
        return self.footer.uint(FOOTER.NUMBER_OF_ROWS, 0) or 0

    @cached_property
    def stripes(self) -> list[Message]:
        """Decoded once per tail (validation and stitching both walk them)."""
        return self.footer.messages(FOOTER.STRIPES)

    @property
    def types(self) -> list[Message]:
        return self.footer.messages(FOOTER.TYPES)

    @property
    def statistics(self) -> list[Message]:
        return self.footer.messages(FOOTER.STATISTICS)

    @property
    def stripe_statistics(self) -> list[bytes]:
        """Encoded StripeStatistics, one per stripe (copied verbatim when stripes move)."""
        return self.metadata.repeated_bytes(1)

    def user_metadata(self) -> dict[str, bytes]:
        """User metadata; for a repeated key the first item wins, as in ORC Java's and C++'s readers."""
        out: dict[str, bytes] = {}
        for item in self.footer.messages(FOOTER.METADATA):
            out.setdefault(item.string(1) or "", item.bytes_(2) or b"")
        return out


def read_tail(f: ReadAt, length: int) -> OrcTail:
    """Parse and sanity-check the tail of the prefix ``[0, length)`` of ``f``."""
    try:
        return _read_tail(f, length)
    except (ProtobufError, CompressionError, UnicodeDecodeError) as exc:
        raise TailError(f"malformed ORC tail: {exc}") from exc


def read_postscript(f: ReadAt, length: int) -> tuple[Message, int]:
    """The PostScript ending ``[0, length)`` and its length, checked: header and PostScript magic. Enough to
    know that ``length`` ends a tail (a cut file or a length off a footer boundary fails here)."""
    try:
        return _read_postscript(f, length)
    except ProtobufError as exc:
        raise TailError(f"malformed ORC tail: {exc}") from exc


def _read_postscript(f: ReadAt, length: int) -> tuple[Message, int]:
    if length < len(MAGIC) + 1:
        raise TailError(f"{length} bytes is too short for an ORC file")
    if f.read_at(3, 0) != MAGIC:
        raise TailError("no ORC header")
    ps_len = f.read_at(1, length - 1)[0]
    if ps_len == 0 or ps_len + 1 > length - len(MAGIC):
        raise TailError(f"postscript length {ps_len} does not fit")
    postscript = Message.decode(f.read_at(ps_len, length - 1 - ps_len))
    if postscript.bytes_(PS.MAGIC) != MAGIC:
        raise TailError("postscript has no ORC magic (length is not at a footer boundary)")
    return postscript, ps_len


def _read_tail(f: ReadAt, length: int) -> OrcTail:
    postscript, ps_len = _read_postscript(f, length)
    footer_len = postscript.uint(PS.FOOTER_LENGTH, 0) or 0
    metadata_len = postscript.uint(PS.METADATA_LENGTH, 0) or 0
    try:
        kind = CompressionKind(postscript.uint(PS.COMPRESSION, 0) or 0)
    except ValueError as exc:
        raise TailError(f"unknown compression {postscript.uint(PS.COMPRESSION)}") from exc
    block_size = postscript.uint(PS.COMPRESSION_BLOCK_SIZE, 256 * 1024) or 256 * 1024
    tail_len = footer_len + metadata_len + ps_len + 1
    content_end = length - tail_len
    if content_end < len(MAGIC):
        raise TailError("footer and metadata lengths exceed the file")
    raw = f.read_at(metadata_len + footer_len, content_end)
    if len(raw) != metadata_len + footer_len:
        raise TailError("file is shorter than its tail claims")
    metadata = Message.decode(decompress(kind, raw[:metadata_len], block_size))
    footer = Message.decode(decompress(kind, raw[metadata_len:], block_size))
    tail = OrcTail(postscript, footer, metadata, kind, block_size, length)
    _check_layout(tail, content_end)
    return tail


def _check_layout(tail: OrcTail, content_end: int) -> None:
    footer = tail.footer
    # ORC Java counts the 3-byte header in contentLength, ORC C++ (and so we) do not: accept both.
    if footer.uint(FOOTER.CONTENT_LENGTH) not in (content_end, content_end - len(MAGIC)):
        raise TailError(
            f"footer content length {footer.uint(FOOTER.CONTENT_LENGTH)} does not end at {content_end}"
        )
    if not footer.has(FOOTER.TYPES):
        raise TailError("footer declares no types")
    pos, rows = len(MAGIC), 0
    for s in tail.stripes:
        offset = s.uint(STRIPE.OFFSET, 0) or 0
        size = sum(s.uint(k, 0) or 0 for k in (STRIPE.INDEX_LENGTH, STRIPE.DATA_LENGTH, STRIPE.FOOTER_LENGTH))
        if offset < pos or offset + size > content_end:
            raise TailError(f"stripe at {offset} (+{size}) lies outside the content [3, {content_end})")
        pos = offset + size
        rows += s.uint(STRIPE.NUMBER_OF_ROWS, 0) or 0
    if rows != tail.num_rows:
        raise TailError(f"stripes hold {rows} rows but the footer says {tail.num_rows}")
    stats = tail.stripe_statistics
    if stats and len(stats) != len(tail.stripes):
        raise TailError(f"{len(stats)} stripe statistics for {len(tail.stripes)} stripes")


class PostscriptTemplate:
    """A file's PostScript, encoded once but for the footer and metadata lengths, which every tail sets.

    The lengths go where the PostScript has them (as ``Message.set_uint`` would put them), the other fields
    stay as encoded: a writer writes a tail at every flush, and its PostScript never changes otherwise.
    """

    def __init__(self, postscript: Message) -> None:
        self.compression = CompressionKind(postscript.uint(PS.COMPRESSION, 0) or 0)
        self.block_size = postscript.uint(PS.COMPRESSION_BLOCK_SIZE, 256 * 1024) or 256 * 1024
        placed = postscript.copy().set_uint(PS.FOOTER_LENGTH, 0).set_uint(PS.METADATA_LENGTH, 0)
        # encoded runs of fields around the two lengths: before, between and after them
        self._runs: list[bytes] = []
        self._footer_first = True
        run: list[tuple[int, int, int | bytes]] = []
        for field in placed.fields:
            if field[0] in (PS.FOOTER_LENGTH, PS.METADATA_LENGTH):
                if not self._runs:
                    self._footer_first = field[0] == PS.FOOTER_LENGTH
                self._runs.append(encode_fields(run) + encode_varint(field[0] << 3 | VARINT))
                run = []
            else:
                run.append(field)
        self._runs.append(encode_fields(run))

    def encode(self, footer_length: int, metadata_length: int) -> bytes:
        first, second = (
            (footer_length, metadata_length) if self._footer_first else (metadata_length, footer_length)
        )
        before, between, after = self._runs
        return b"".join((before, encode_varint(first), between, encode_varint(second), after))


#: Footer and Metadata sections shorter than this are stored as they are ("original" chunks, which every ORC
#: reader reads): a file of a few rows has a ~480-byte footer and ~180 bytes of metadata, which deflate shrinks
#: by ~230 bytes at ~10 µs each (ISA-L's set-up, whatever the length), a fifth of such a file's tail.
SMALLEST_COMPRESSED_SECTION = 512


def build_tail(postscript: PostscriptTemplate, footer: bytes, metadata: bytes) -> bytes:
    """Serialise a tail from the encoded Footer and Metadata; the PostScript gets the compressed lengths."""
    kind, block, smallest = postscript.compression, postscript.block_size, SMALLEST_COMPRESSED_SECTION
    meta = compress(kind, metadata, block, smallest)
    foot = compress(kind, footer, block, smallest)
    ps_bytes = postscript.encode(len(foot), len(meta))
    if len(ps_bytes) > 255:
        raise ValueError("postscript longer than 255 bytes")
    return meta + foot + ps_bytes + bytes([len(ps_bytes)])
