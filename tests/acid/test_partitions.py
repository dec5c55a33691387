from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.partitions import (
    DEFAULT_PARTITION_NAME,
    escape_path_name,
    make_part_name,
    parse_part_name,
    partition_path,
    unescape_path_name,
)
from acidstream.errors import InvalidPartition

text = st.text(st.characters(codec=None, exclude_categories=("Cs",)), min_size=1)
tricky = st.text(st.sampled_from(list("%/=:a\x00\x1f\x7f{[]^é 日#\\'\"*?-_.")), min_size=1)


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("Asia", "Asia"),
        ("a b-c_d.e", "a b-c_d.e"),
        ("2024-01-01 10:00", "2024-01-01 10%3A00"),
        ("a/b=c", "a%2Fb%3Dc"),
        ("100%", "100%25"),
        ("\x01\x7f", "%01%7F"),
        ("\"#'*?\\{[]^", "%22%23%27%2A%3F%5C%7B%5B%5D%5E"),
        ("héllo 日本", "héllo 日本"),
        ("", DEFAULT_PARTITION_NAME),
        (None, DEFAULT_PARTITION_NAME),
    ],
)
def test_escape_examples(raw: str | None, escaped: str) -> None:
    assert escape_path_name(raw) == escaped


def test_unescape_keeps_malformed_sequences_and_java_quirks() -> None:
    assert unescape_path_name("%zz%4") == "%zz%4"
    assert unescape_path_name("%41%2f") == "A/"
    assert unescape_path_name("%+F%-0") == "\x0f\x00"


@given(text | tricky)
def test_escape_round_trip(s: str) -> None:
    escaped = escape_path_name(s)
    assert unescape_path_name(escaped) == s
    assert "/" not in escaped and "=" not in escaped


@given(
    st.lists(
        st.tuples(text | tricky, st.none() | text | tricky),
        min_size=1,
        max_size=4,
        unique_by=lambda kv: kv[0].lower(),
    )
)
def test_part_name_round_trip(pairs: list[tuple[str, str | None]]) -> None:
    keys = [k for k, _ in pairs]
    values = [v for _, v in pairs]
    spec = parse_part_name(make_part_name(keys, values))
    assert list(spec) == [k.lower() for k in keys]
    assert list(spec.values()) == [v if v else DEFAULT_PARTITION_NAME for v in values]


def test_make_part_name_and_path() -> None:
    assert make_part_name(["Continent", "country"], ["Asia", None]) == (
        "continent=Asia/country=__HIVE_DEFAULT_PARTITION__"
    )
    assert partition_path("/wh/t/", ["ds"], ["2024/01"]) == "/wh/t/ds=2024%2F01"


@pytest.mark.parametrize("bad", ["a", "a=1/b", "=1", "a=", "a=1/a=2"])
def test_parse_part_name_rejects(bad: str) -> None:
    with pytest.raises(InvalidPartition):
        parse_part_name(bad)


def test_make_part_name_rejects_mismatched_lengths() -> None:
    with pytest.raises(InvalidPartition):
        make_part_name(["a", "b"], ["1"])
