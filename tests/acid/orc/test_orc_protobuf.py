"""The protobuf wire codec: round trips of every wire type and of typed accessors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.orc.protobuf import (
    FIXED32,
    FIXED64,
    LENGTH_DELIMITED,
    VARINT,
    Message,
    ProtobufError,
    decode_varint,
    encode_varint,
    zigzag_decode,
    zigzag_encode,
)

u64 = st.integers(0, (1 << 64) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
field_number = st.integers(1, 8000)
raw_field = st.one_of(
    st.tuples(field_number, st.just(VARINT), u64),
    st.tuples(field_number, st.just(FIXED64), u64),
    st.tuples(field_number, st.just(FIXED32), st.integers(0, (1 << 32) - 1)),
    st.tuples(field_number, st.just(LENGTH_DELIMITED), st.binary(max_size=300)),
)


@given(u64)
def test_varint_round_trip(v: int) -> None:
    data = encode_varint(v)
    assert decode_varint(data, 0) == (v, len(data))


@given(i64)
def test_zigzag_round_trip(v: int) -> None:
    assert zigzag_decode(zigzag_encode(v)) == v
    assert zigzag_encode(v) <= 2 * abs(v)


def test_known_encodings() -> None:
    assert encode_varint(300) == b"\xac\x02"
    assert zigzag_encode(-1) == 1 and zigzag_encode(1) == 2
    assert Message().set_string(8000, "ORC").encode() == b"\x82\xf4\x03\x03ORC"


@given(st.lists(raw_field, max_size=30))
def test_message_round_trip(fields: list[tuple[int, int, int | bytes]]) -> None:
    m = Message(fields)
    assert Message.decode(m.encode()) == m


@given(i64, u64, st.floats(allow_nan=False), st.text(max_size=50), st.lists(u64, max_size=20))
def test_typed_accessors(s: int, u: int, d: float, text: str, packed: list[int]) -> None:
    m = (
        Message()
        .set_sint(1, s)
        .set_uint(2, u)
        .set_double(3, d)
        .set_string(4, text)
        .set_packed_uints(5, packed)
    )
    m = Message.decode(m.encode())
    assert (m.sint(1), m.uint(2), m.double(3), m.string(4), m.packed_uints(5)) == (s, u, d, text, packed)
    assert m.int64(2) == (u - (1 << 64) if u >= 1 << 63 else u)


def test_nan_double_and_unpacked_repeated() -> None:
    m = Message.decode(Message().set_double(1, math.nan).encode())
    assert math.isnan(m.double(1) or 0.0)
    unpacked = Message([(2, VARINT, 7), (2, VARINT, 8)])
    assert unpacked.packed_uints(2) == [7, 8]


def test_set_replaces_and_set_repeated_keeps_position() -> None:
    m = Message([(1, VARINT, 1), (3, LENGTH_DELIMITED, b"a"), (1, VARINT, 2), (4, VARINT, 0)])
    m.set_uint(1, 9)
    assert m.fields == [(1, VARINT, 9), (3, LENGTH_DELIMITED, b"a"), (4, VARINT, 0)]
    m.set_repeated(3, [b"x", b"y"])
    assert m.fields == [
        (1, VARINT, 9),
        (3, LENGTH_DELIMITED, b"x"),
        (3, LENGTH_DELIMITED, b"y"),
        (4, VARINT, 0),
    ]
    m.set_repeated(7, [b"z"])
    assert m.fields[-1] == (7, LENGTH_DELIMITED, b"z")
    copied = m.copy().set_uint(4, 5)  # a copy's changes never reach the original
    assert (copied.uint(4), m.uint(4)) == (5, 0)


@pytest.mark.parametrize(
    "data",
    [b"\x08", b"\x0a\x05abc", b"\x09\x01\x02", b"\x0b", b"\x00\x01", b"\x08" + b"\xff" * 11],
)
def test_malformed_input_raises(data: bytes) -> None:
    with pytest.raises(ProtobufError):
        Message.decode(data)


def test_wrong_wire_type_access_raises() -> None:
    m = Message([(1, LENGTH_DELIMITED, b"x"), (2, VARINT, 1)])
    with pytest.raises(ProtobufError):
        m.uint(1)
    with pytest.raises(ProtobufError):
        m.bytes_(2)
