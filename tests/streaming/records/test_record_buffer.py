"""The record buffer behind write(): the C one and the Python one behave alike."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.streaming.records.buffer import C_RECORD_BUFFER, PyRecordBuffer, RecordBuffer

IMPLEMENTATIONS = [
    pytest.param(PyRecordBuffer, id="python"),
    pytest.param(
        C_RECORD_BUFFER,
        id="c",
        marks=pytest.mark.skipif(C_RECORD_BUFFER is None, reason="the C extension is not built"),
    ),
]


class Recorder:
    """An overflow callable that stores what it gets with ``add`` (as the connection does) and keeps a log."""

    def __init__(self) -> None:
        self.buffer: RecordBuffer | None = None
        self.seen: list[Any] = []

    def __call__(self, record: Any) -> None:
        self.seen.append(record)
        assert self.buffer is not None
        self.buffer.add(record.encode() if isinstance(record, str) else record)


@pytest.fixture(params=IMPLEMENTATIONS)
def make(request: pytest.FixtureRequest) -> Any:
    def build() -> tuple[RecordBuffer, Recorder]:
        overflow = Recorder()
        buffer = request.param(overflow)
        overflow.buffer = buffer
        return buffer, overflow

    return build


def test_the_c_extension_is_built_where_a_compiler_and_headers_are() -> None:
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    if shutil.which("cc") is None or not headers:
        pytest.skip("no C compiler or Python headers here: the pure-Python buffer is used")
    assert C_RECORD_BUFFER is not None, "setup.py's extension failed to build: write() runs in pure Python"


def test_append_takes_plain_bytes_within_the_room_without_overflow(make: Any) -> None:
    buffer, overflow = make()
    buffer.set_room(10, 100)
    for record in (b"1,a", b"", b"3,ccc"):
        buffer.append(record)
    assert (len(buffer), buffer.nbytes, overflow.seen) == (3, 8, [])
    assert buffer.take().to_pylist() == [b"1,a", b"", b"3,ccc"]
    assert (len(buffer), buffer.nbytes) == (0, 0)


def test_other_types_and_records_past_the_room_go_to_overflow(make: Any) -> None:
    buffer, overflow = make()
    buffer.set_room(3, 10)
    buffer.append(b"12345")
    buffer.append("text")  # not bytes
    buffer.append(bytearray(b"ba"))  # not bytes
    buffer.append(b"x")  # fourth record: 3 are buffered already
    assert overflow.seen == ["text", bytearray(b"ba"), b"x"]
    buffer.clear()
    buffer.append(b"0123456789")  # exactly the byte room
    buffer.append(b"!")  # one byte past it
    assert overflow.seen[3:] == [b"!"]
    assert buffer.take().to_pylist() == [b"0123456789", b"!"]


def test_no_room_sends_every_record_to_overflow(make: Any) -> None:
    buffer, overflow = make()
    buffer.set_room(0, 0)
    buffer.append(b"")
    buffer.append(b"a")
    assert overflow.seen == [b"", b"a"]


def test_overflow_errors_reach_the_caller(make: Any) -> None:
    def refuse(record: Any) -> None:
        raise TypeError(f"refused {record!r}")

    buffer = type(make()[0])(refuse)
    buffer.set_room(1, 1)
    with pytest.raises(TypeError, match="refused 5"):
        buffer.append(5)
    assert len(buffer) == 0


def test_add_copies_mutable_buffers(make: Any) -> None:
    buffer, _ = make()
    data = bytearray(b"first")
    buffer.add(data)
    data[:] = b"XXXXX"
    buffer.add(memoryview(b"view"))
    assert buffer.take().to_pylist() == [b"first", b"view"]


def test_take_of_nothing_is_an_empty_array(make: Any) -> None:
    buffer, _ = make()
    assert buffer.take().to_pylist() == []
    buffer.set_room(5, 5)
    buffer.append(b"a")
    buffer.clear()
    assert buffer.take().to_pylist() == []


def test_buffer_is_reused_across_takes_including_after_a_huge_one(make: Any) -> None:
    buffer, _ = make()
    buffer.set_room(1 << 20, 1 << 30)
    big = b"y" * (65 << 20)  # past the size at which the C buffer gives its memory back
    for round_ in range(3):
        records = [f"{round_}-{i}".encode() * (i % 7) for i in range(5000)]
        for record in records:
            buffer.append(record)
        assert buffer.take().to_pylist() == records
        buffer.append(big)
        buffer.append(b"tail")
        taken = buffer.take()
        assert len(taken) == 2 and taken[0].as_py() == big and taken[1].as_py() == b"tail"


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(
        st.one_of(st.binary(max_size=40), st.text(max_size=10), st.binary(max_size=8).map(bytearray)),
        max_size=60,
    ),
    room_records=st.integers(0, 70),
    room_bytes=st.integers(0, 400),
    python=st.booleans(),
)
def test_every_record_is_buffered_once_in_order(
    records: list[Any], room_records: int, room_bytes: int, python: bool
) -> None:
    if not python and C_RECORD_BUFFER is None:
        python = True
    overflow = Recorder()
    buffer: RecordBuffer = (PyRecordBuffer if python else C_RECORD_BUFFER)(overflow)  # type: ignore[misc]
    overflow.buffer = buffer
    buffer.set_room(room_records, room_bytes)
    for record in records:
        buffer.append(record)
    expected = [r.encode() if isinstance(r, str) else bytes(r) for r in records]
    assert (len(buffer), buffer.nbytes) == (len(expected), sum(map(len, expected)))
    assert buffer.take().to_pylist() == expected
    # the fast path took exactly the plain bytes that fit the room; overflow got the others, in order
    count = size = 0
    overflowed = []
    for record, data in zip(records, expected, strict=True):
        if not (type(record) is bytes and count < room_records and size + len(data) <= room_bytes):
            overflowed.append(record)
        count, size = count + 1, size + len(data)
    assert overflow.seen == overflowed
