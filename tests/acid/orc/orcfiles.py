"""ORC files taken apart in tests: a stripe's streams as stored, and one column written by pyarrow (ORC C++)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.orc as po

from acidstream.acid.orc import WriterOptions
from acidstream.acid.orc.compression import CompressionKind, decompress
from acidstream.acid.orc.protobuf import Message
from acidstream.acid.orc.tail import OrcTail, read_tail

Streams = dict[tuple[int, int], bytes]


def stripe_streams(data: bytes, tail: OrcTail, info: Message) -> tuple[Message, Streams]:
    """The footer of the stripe ``info`` describes and its streams by (kind, column), as stored (compressed)."""
    off, il, dl, fl = (info.uint(k, 0) or 0 for k in (1, 2, 3, 4))
    footer = Message.decode(
        decompress(tail.compression, data[off + il + dl : off + il + dl + fl], tail.block_size)
    )
    streams, pos = {}, off
    for s in footer.messages(1):
        kind, column, length = (s.uint(f, 0) or 0 for f in (1, 2, 3))
        streams[(kind, column)] = data[pos : pos + length]
        pos += length
    assert pos == off + il + dl
    return footer, streams


def pyarrow_column(
    values: pa.Array, compression: CompressionKind, block: int, **kwargs: object
) -> tuple[OrcTail, Streams]:
    """Column ``c`` of ``values`` written by pyarrow as a base file is (one stripe): the file's tail and the
    stripe's streams."""
    sink = pa.BufferOutputStream()
    options = {
        **WriterOptions(is_base=True, streaming_optimizations=False).pyarrow_kwargs(),
        "compression": {CompressionKind.NONE: "uncompressed", CompressionKind.ZLIB: "zlib"}[compression],
        "compression_block_size": block,
        **kwargs,
    }
    po.write_table(pa.table({"c": values}), sink, **options)  # type: ignore[arg-type]
    data = sink.getvalue()
    tail = read_tail(pa.BufferReader(data), data.size)
    [info] = tail.stripes
    return tail, stripe_streams(data.to_pybytes(), tail, info)[1]
