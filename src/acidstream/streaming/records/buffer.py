"""Records handed to ``write()`` one by one, held until a bulk parse.

``write()`` is called once per record, so its per-call cost bounds a connection's rate. The buffer's ``append``
*is* the connection's ``write``: plain bytes are taken while the buffer has room, and everything else (other
types, a full buffer, no open transaction) goes to an ``overflow`` callable, which checks, converts and stores
the record with ``add`` or raises. Built from C (``_native.c``, ~25 ns a record, bytes copied at once into
one contiguous buffer) when the extension compiled; the same behaviour in Python otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa

from acidstream.streaming.records.base import records_array

Overflow = Callable[[Any], None]


class RecordBuffer(Protocol):
    """What a connection needs of its record buffer."""

    @property
    def nbytes(self) -> int: ...

    def __len__(self) -> int: ...

    def append(self, record: Any) -> None:
        """Buffer plain ``bytes`` while there is room; hand anything else to the overflow callable."""

    def add(self, record: bytes | bytearray | memoryview) -> None:
        """Buffer a copy of a record (C-contiguous) whatever the room: the overflow callable's way in."""

    def set_room(self, records: int, nbytes: int) -> None:
        """``append`` takes plain bytes while fewer than ``records`` are buffered and the bytes with the new
        one stay within ``nbytes``; (0, 0) sends every record to the overflow callable."""

    def take(self) -> pa.BinaryArray | pa.LargeBinaryArray:
        """The buffered records as one Arrow array; the buffer is emptied."""

    def clear(self) -> None:
        """Drop the buffered records."""


class PyRecordBuffer:
    """:class:`RecordBuffer` in Python: records kept as the caller's bytes objects (copies of others)."""

    __slots__ = ("_nbytes", "_overflow", "_records", "_room_bytes", "_room_records")

    def __init__(self, overflow: Overflow) -> None:
        self._overflow = overflow
        self._records: list[bytes] = []
        self._nbytes = 0
        self._room_records = self._room_bytes = 0

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def __len__(self) -> int:
        return len(self._records)

    def append(self, record: Any) -> None:
        records = self._records
        if type(record) is bytes and len(records) < self._room_records:
            size = self._nbytes + len(record)
            if size <= self._room_bytes:
                records.append(record)
                self._nbytes = size
                return
        self._overflow(record)

    def add(self, record: bytes | bytearray | memoryview) -> None:
        data = record if type(record) is bytes else bytes(record)  # the caller may reuse a mutable buffer
        self._records.append(data)
        self._nbytes += len(data)

    def set_room(self, records: int, nbytes: int) -> None:
        self._room_records, self._room_bytes = records, nbytes

    def take(self) -> pa.BinaryArray | pa.LargeBinaryArray:
        records, self._records, self._nbytes = self._records, [], 0
        return records_array(records)

    def clear(self) -> None:
        self._records, self._nbytes = [], 0


def _c_buffer_class() -> type | None:
    """The C implementation as a :class:`RecordBuffer`, or None if the extension was not built."""
    try:
        from acidstream.streaming.records._native import CRecordBuffer
    except ImportError:
        return None

    class CBuffer(CRecordBuffer):
        """:class:`RecordBuffer` in C; ``take`` wraps its two buffers as an array without a copy."""

        __slots__ = ()

        def take(self) -> pa.LargeBinaryArray:
            data, offsets = self.take_buffers()
            count = len(offsets) // 8 - 1
            return pa.Array.from_buffers(
                pa.large_binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
            )

    return CBuffer


#: The C buffer, or None when the extension is not built (no C compiler where the package was installed).
C_RECORD_BUFFER = _c_buffer_class()


def new_record_buffer(overflow: Overflow) -> RecordBuffer:
    """The C buffer if built, else the Python one."""
    if C_RECORD_BUFFER is not None:
        buffer: RecordBuffer = C_RECORD_BUFFER(overflow)
        return buffer
    return PyRecordBuffer(overflow)
