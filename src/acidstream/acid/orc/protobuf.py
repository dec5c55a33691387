"""A minimal protocol-buffers wire codec for ORC's file tail.

ORC's tail (PostScript, Footer, Metadata) is protobuf. We only need to decode it into fields, change a few and
encode it back, so a field-list :class:`Message` that keeps unknown fields verbatim is enough and avoids a
generated-code dependency.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
FIXED32 = 5

_U64 = (1 << 64) - 1


class ProtobufError(ValueError):
    """The bytes are not a well-formed protobuf message."""


#: Encoded one-byte varints: tags and lengths are nearly always below 128, and a tail has hundreds of them.
_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def encode_varint(value: int) -> bytes:
    """Base-128 varint of an unsigned 64-bit value (negative int64 values are sent as their 2's complement)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= _U64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Read a varint at ``pos``; returns (value, next position)."""
    if pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & _U64, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint too long")


def encode_fields(fields: Iterable[tuple[int, int, int | bytes]]) -> bytes:
    """The wire form of (number, wire type, raw value) fields, in the order given."""
    out = bytearray()
    one = _ONE_BYTE
    for number, wire, value in fields:
        key = (number << 3) | wire
        out += one[key] if key < 0x80 else encode_varint(key)
        if wire == LENGTH_DELIMITED:
            assert isinstance(value, bytes)
            size = len(value)
            out += one[size] if size < 0x80 else encode_varint(size)
            out += value
        elif wire == VARINT:
            assert isinstance(value, int)
            out += one[value] if 0 <= value < 0x80 else encode_varint(value)
        elif wire == FIXED64:
            assert isinstance(value, int)
            out += value.to_bytes(8, "little")
        elif wire == FIXED32:
            assert isinstance(value, int)
            out += value.to_bytes(4, "little")
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return bytes(out)


def zigzag_encode(value: int) -> int:
    return ((value << 1) ^ (value >> 63)) & _U64


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def to_signed64(value: int) -> int:
    return value - (1 << 64) if value & (1 << 63) else value


@dataclass
class Message:
    """A decoded message: an ordered list of (field number, wire type, raw value).

    Raw values are ``int`` for varint/fixed fields (fixed values as unsigned integers) and ``bytes`` for
    length-delimited ones. Accessors interpret them; unknown fields survive a decode/encode round trip.
    """

    fields: list[tuple[int, int, int | bytes]] = field(default_factory=list)

    # --- decoding / encoding --------------------------------------------------------------------------

    @classmethod
    def decode(cls, buf: bytes | memoryview) -> Message:
        fields: list[tuple[int, int, int | bytes]] = []
        append = fields.append
        pos, end = 0, len(buf)
        while pos < end:
            key = buf[pos]  # tags, small values and lengths are one byte nearly always: no call for those
            if key < 0x80:
                pos += 1
            else:
                key, pos = decode_varint(buf, pos)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise ProtobufError("field number 0")
            value: int | bytes
            if wire == VARINT:
                if pos < end and buf[pos] < 0x80:
                    value = buf[pos]
                    pos += 1
                else:
                    value, pos = decode_varint(buf, pos)
            elif wire == LENGTH_DELIMITED:
                if pos < end and buf[pos] < 0x80:
                    length = buf[pos]
                    pos += 1
                else:
                    length, pos = decode_varint(buf, pos)
                if pos + length > end:
                    raise ProtobufError("truncated length-delimited field")
                value = bytes(buf[pos : pos + length])
                pos += length
            elif wire == FIXED64:
                if pos + 8 > end:
                    raise ProtobufError("truncated fixed64")
                value = int.from_bytes(buf[pos : pos + 8], "little")
                pos += 8
            elif wire == FIXED32:
                if pos + 4 > end:
                    raise ProtobufError("truncated fixed32")
                value = int.from_bytes(buf[pos : pos + 4], "little")
                pos += 4
            else:
                raise ProtobufError(f"unsupported wire type {wire}")
            append((number, wire, value))
        return cls(fields)

    def encode(self) -> bytes:
        return encode_fields(self.fields)

    # --- reading --------------------------------------------------------------------------------------

    def has(self, number: int) -> bool:
        return any(f[0] == number for f in self.fields)

    def _last(self, number: int) -> int | bytes | None:
        found: int | bytes | None = None
        for n, _, v in self.fields:
            if n == number:
                found = v  # protobuf: the last occurrence of a scalar wins
        return found

    def uint(self, number: int, default: int | None = None) -> int | None:
        v = self._last(number)
        return default if v is None else _as_int(v)

    def int64(self, number: int) -> int | None:
        v = self._last(number)
        return None if v is None else to_signed64(_as_int(v))

    def sint(self, number: int) -> int | None:
        v = self._last(number)
        return None if v is None else zigzag_decode(_as_int(v))

    def double(self, number: int) -> float | None:
        v = self._last(number)
        return None if v is None else struct.unpack("<d", _as_int(v).to_bytes(8, "little"))[0]

    def bytes_(self, number: int) -> bytes | None:
        v = self._last(number)
        return None if v is None else _as_bytes(v)

    def string(self, number: int) -> str | None:
        v = self.bytes_(number)
        return None if v is None else v.decode("utf-8")

    def repeated_bytes(self, number: int) -> list[bytes]:
        return [_as_bytes(v) for n, _, v in self.fields if n == number]

    def messages(self, number: int) -> list[Message]:
        return [Message.decode(b) for b in self.repeated_bytes(number)]

    def message(self, number: int) -> Message | None:
        v = self.bytes_(number)
        return None if v is None else Message.decode(v)

    def packed_uints(self, number: int) -> list[int]:
        """A repeated varint field, accepting both packed and unpacked encodings as protobuf requires."""
        out: list[int] = []
        for n, wire, v in self.fields:
            if n != number:
                continue
            if wire == LENGTH_DELIMITED:
                buf = _as_bytes(v)
                pos = 0
                while pos < len(buf):
                    x, pos = decode_varint(buf, pos)
                    out.append(x)
            else:
                out.append(_as_int(v))
        return out

    # --- writing --------------------------------------------------------------------------------------

    def remove(self, number: int) -> Message:
        self.fields = [f for f in self.fields if f[0] != number]
        return self

    def set(self, number: int, wire: int, value: int | bytes) -> Message:
        """Replace every occurrence of a field by one value, keeping the position of the first occurrence."""
        fields = self.fields
        at = -1
        repeated = False
        for i, f in enumerate(fields):  # one pass, no helper call: stripes set a few fields each
            if f[0] == number:
                if at < 0:
                    at = i
                else:
                    repeated = True  # rare: a repeated scalar
        if at < 0:
            fields.append((number, wire, value))
            return self
        fields[at] = (number, wire, value)
        if repeated:
            self.fields = fields[: at + 1] + [g for g in fields[at + 1 :] if g[0] != number]
        return self

    def set_uint(self, number: int, value: int) -> Message:
        return self.set(number, VARINT, value & _U64)

    def set_sint(self, number: int, value: int) -> Message:
        return self.set(number, VARINT, zigzag_encode(value))

    def set_double(self, number: int, value: float) -> Message:
        return self.set(number, FIXED64, int.from_bytes(struct.pack("<d", value), "little"))

    def set_bytes(self, number: int, value: bytes) -> Message:
        return self.set(number, LENGTH_DELIMITED, value)

    def set_string(self, number: int, value: str) -> Message:
        return self.set_bytes(number, value.encode("utf-8"))

    def set_message(self, number: int, value: Message) -> Message:
        return self.set_bytes(number, value.encode())

    def set_packed_uints(self, number: int, values: Iterable[int]) -> Message:
        return self.set_bytes(number, b"".join(encode_varint(v) for v in values))

    def set_repeated(self, number: int, values: Iterable[bytes]) -> Message:
        """Replace a repeated length-delimited field (at the position of its first occurrence, else at the end)."""
        first = next((i for i, f in enumerate(self.fields) if f[0] == number), len(self.fields))
        kept = [f for f in self.fields if f[0] != number]
        first = min(first, len(kept))
        self.fields = kept[:first] + [(number, LENGTH_DELIMITED, v) for v in values] + kept[first:]
        return self

    def copy(self) -> Message:
        return Message(list(self.fields))


def _as_int(v: int | bytes) -> int:
    if not isinstance(v, int):
        raise ProtobufError("expected a scalar field, found a length-delimited one")
    return v


def _as_bytes(v: int | bytes) -> bytes:
    if not isinstance(v, bytes):
        raise ProtobufError("expected a length-delimited field, found a scalar one")
    return v
