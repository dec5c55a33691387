"""Splitting a binary stream into records on the writer's line-delimiter regex, in bounded memory.

Hive splits ``write(InputStream)`` with ``java.util.Scanner`` on the delimiter pattern. That Scanner returns an
empty token between two single-character delimiters (``\\r\\n`` under the default ``[\\r\\n]``), which Hive then
writes as an all-null row; we skip empty records instead (see the report/README of the record writers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa


def split_records(
    stream: BinaryIO, line_delimiter_pattern: str, chunk_size: int = 1 << 20
) -> Iterator[pa.LargeBinaryArray]:
    """Yield the non-empty records of ``stream`` in chunks of about ``chunk_size`` bytes.

    A delimiter that ends exactly where the data read so far ends is held back and matched again with the next
    read, so a delimiter that more input could extend (``\\r\\n?``, ``[\\r\\n]+``) is never cut in two.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    pattern = re.compile(b"(" + line_delimiter_pattern.encode() + b")")
    stride = pattern.groups + 1  # split() returns every group between pieces
    carry = b""
    while True:
        data = stream.read(chunk_size)
        eof = not data
        buf = carry + data
        parts = pattern.split(buf)
        pieces = parts[::stride]
        carry = b""
        if not eof:
            carry = pieces.pop()
            if carry == b"" and len(parts) > 1:  # the buffer ends in a delimiter: rescan it with more input
                carry = parts[-stride]
        records = [p for p in pieces if p]
        if records:
            yield pa.array(records, pa.large_binary())
        if eof:
            return
