"""Splitting a binary stream into records on the writer's line-delimiter regex, in bounded memory.

Hive splits ``write(InputStream)`` with ``java.util.Scanner`` on the delimiter pattern. That Scanner returns an
empty token between two single-character delimiters (``\\r\\n`` under the default ``[\\r\\n]``), which Hive then
writes as an all-null row; we skip empty records instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa

#: Patterns that always match exactly one byte: one (escaped) character or a class of them, e.g. ``[\r\n]``.
_ONE_BYTE = re.compile(
    r"^(?:[^\\\[\]^$|()*+?{}]|\\[rntdDsSwW\\\[\]|.^$*+?(){}/-]|\[(?:[^\\\[\]^-]|\\[rnt\\\[\]|^-])+\])$"
)


def is_one_byte(pattern: str) -> bool:
    """Whether ``pattern`` always matches exactly one byte (the vectorised split's case)."""
    return _ONE_BYTE.match(pattern) is not None


def split_records(
    stream: BinaryIO, line_delimiter_pattern: str, chunk_size: int = 1 << 20
) -> Iterator[pa.LargeBinaryArray]:
    """Yield the non-empty records of ``stream`` in chunks of about ``chunk_size`` bytes.

    A delimiter that ends exactly where the data read so far ends is held back and matched again with the next
    read, so a delimiter that more input could extend (``\\r\\n?``, ``[\\r\\n]+``) is never cut in two.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    if is_one_byte(line_delimiter_pattern):
        table = _byte_table(line_delimiter_pattern)
        return _split_on_bytes(stream, lambda buf: table[buf], chunk_size)
    return _split_on_regex(stream, line_delimiter_pattern, chunk_size)


def split_quoted_records(
    stream: BinaryIO, line_delimiter_pattern: str, field_delimiter: str, chunk_size: int = 1 << 20
) -> Iterator[pa.LargeBinaryArray]:
    """:func:`split_records` for RFC 4180 CSV: a line delimiter inside a quoted field is part of the field.

    A quote opens a quoted field only where a field starts (the record's start, after a field delimiter), as
    spreadsheets and Python's ``csv`` read it; elsewhere it is a character of the field. A quoted field ends at
    a quote not followed by another (``""`` is a quote inside the field). The line delimiter must be one byte
    (a character or a class of them).
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    if not is_one_byte(line_delimiter_pattern):
        raise ValueError(f"quoted CSV records end at one byte, not at {line_delimiter_pattern!r}")
    table = _byte_table(line_delimiter_pattern)
    starts_field = table.copy()
    starts_field[ord(field_delimiter)] = True
    return _split_on_bytes(stream, lambda buf: table[buf] & ~quoted_bytes(buf, starts_field), chunk_size)


_QUOTE = ord('"')


def quoted_bytes(buf: np.ndarray, starts_field: np.ndarray) -> np.ndarray:
    """The bytes of ``buf`` (which starts a record) inside quoted fields, quotes included; a field still open
    at the end runs to the end. ``starts_field[b]``: a field starts after byte b. Only the quotes are visited."""
    inside = np.zeros(len(buf) + 1, dtype=np.int8)
    quotes = np.flatnonzero(buf == _QUOTE)
    opened, skip = -1, -1
    for p in quotes.tolist():
        if p == skip:
            continue
        if opened < 0:
            if p == 0 or starts_field[buf[p - 1]]:
                opened = p
        elif p + 1 < len(buf) and buf[p + 1] == _QUOTE:
            skip = p + 1  # "" inside a quoted field
        else:
            inside[opened] += 1
            inside[p + 1] -= 1
            opened = -1
    if opened >= 0:
        inside[opened] += 1
    return np.cumsum(inside[:-1]) > 0


def _byte_table(pattern: str) -> np.ndarray:
    compiled = re.compile(pattern.encode())
    return np.array([compiled.fullmatch(bytes([b])) is not None for b in range(256)])


def _split_on_bytes(
    stream: BinaryIO, delimiters_of: Callable[[np.ndarray], np.ndarray], chunk_size: int
) -> Iterator[pa.LargeBinaryArray]:
    """Vectorised split on one-byte delimiters (``delimiters_of(buf)`` marks them in a buffer that starts a
    record): delimiter bytes dropped, records rebuilt from offsets."""
    carry = b""
    while True:
        data = stream.read(chunk_size)
        eof = not data
        buf = np.frombuffer(carry + data, dtype=np.uint8)
        delimiters = delimiters_of(buf)
        cuts = np.flatnonzero(delimiters)
        if eof:
            body, carry = buf, b""
        else:
            last = cuts[-1] + 1 if len(cuts) else 0
            body, carry = buf[:last], buf[last:].tobytes()
            delimiters = delimiters[:last]
        cut_at = cuts[cuts < len(body)]
        starts = np.concatenate(([0], cut_at + 1))
        ends = np.concatenate((cut_at, [len(body)]))
        lengths = (ends - starts)[ends > starts]
        if len(lengths):
            offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
            values = body[~delimiters]
            yield pa.Array.from_buffers(
                pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(values)]
            )
        if eof:
            return


def _split_on_regex(stream: BinaryIO, pattern_text: str, chunk_size: int) -> Iterator[pa.LargeBinaryArray]:
    pattern = re.compile(b"(" + pattern_text.encode() + b")")
    stride = pattern.groups + 1  # split() returns every group between pieces
    carry = b""
    while True:
        data = stream.read(chunk_size)
        eof = not data
        parts = pattern.split(carry + data)
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
