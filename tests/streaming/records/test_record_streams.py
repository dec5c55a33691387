"""split_records: a binary stream cut into records on a delimiter regex, whatever the read boundaries."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.streaming.records import split_records
from acidstream.streaming.records.streams import _ONE_BYTE, _split_on_regex


def split(data: bytes, pattern: str, chunk_size: int) -> list[bytes]:
    return [r for chunk in split_records(io.BytesIO(data), pattern, chunk_size) for r in chunk.to_pylist()]


@pytest.mark.parametrize(
    ("data", "pattern", "expected"),
    [
        (b"a\nb\n", r"[\r\n]", [b"a", b"b"]),
        (b"a\r\nb\r\n\r\nc", r"[\r\n]", [b"a", b"b", b"c"]),  # empty records skipped
        (b"\n\na", r"\n", [b"a"]),
        (b"a\rb\r\nc", r"\r\n?", [b"a", b"b", b"c"]),
        (b"a||b|c", r"\|\|", [b"a", b"b|c"]),
        (b"", r"\n", []),
        (b"only", r"\n", [b"only"]),
        (b"x1y22z", r"[0-9]+", [b"x", b"y", b"z"]),
        (b"a(b", r"(\()", [b"a", b"b"]),  # groups in the user's pattern
    ],
)
@pytest.mark.parametrize("chunk_size", [1, 2, 3, 1 << 20])
def test_split(data: bytes, pattern: str, expected: list[bytes], chunk_size: int) -> None:
    assert split(data, pattern, chunk_size) == expected


def test_chunks_are_bounded() -> None:
    data = b"\n".join(b"record %d" % i for i in range(10_000))
    chunks = list(split_records(io.BytesIO(data), r"\n", 4096))
    assert len(chunks) > 10 and max(len(c) for c in chunks) < 1000
    assert sum(len(c) for c in chunks) == 10_000


def test_rejects_non_positive_chunk_size() -> None:
    with pytest.raises(ValueError):
        list(split_records(io.BytesIO(b"a"), r"\n", 0))


DELIMITERS = {
    r"[\r\n]": [b"\n", b"\r", b"\r\n"],
    r"\r?\n": [b"\n", b"\r\n"],
    r"\r\n?": [b"\r", b"\r\n"],
    "##": [b"##"],
}


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(DELIMITERS)),
    st.lists(st.binary(min_size=0, max_size=12), max_size=30),
    st.data(),
    st.integers(1, 40),
)
def test_random_records_reassemble_across_random_chunk_sizes(
    pattern: str, records: list[bytes], data: st.DataObject, chunk_size: int
) -> None:
    clean = [re.sub(rb"[\r\n#]", b"", r) for r in records]
    joined = b""
    for r in clean:
        joined += r + data.draw(st.sampled_from(DELIMITERS[pattern]))
    assert split(joined, pattern, chunk_size) == [r for r in clean if r]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([r"[\r\n]", r"\n", ",", r"\|", r"[,;]", r"\d"]),
    st.binary(max_size=60),
    st.integers(1, 20),
)
def test_one_byte_fast_path_matches_the_regex_path(pattern: str, data: bytes, chunk_size: int) -> None:
    assert _ONE_BYTE.match(pattern)
    fast = split(data, pattern, chunk_size)
    slow = [r for c in _split_on_regex(io.BytesIO(data), pattern, chunk_size) for r in c.to_pylist()]
    assert fast == slow == [r for r in re.split(pattern.encode(), data) if r]
