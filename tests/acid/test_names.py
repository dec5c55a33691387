from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.names import (
    ParsedBase,
    ParsedDelta,
    base_dir,
    bucket_file,
    delete_delta_dir,
    delta_dir,
    delta_sort_key,
    is_acid_hidden,
    is_hidden,
    is_original_file,
    parse_bucket_file,
    parse_dir_name,
    parse_original_file,
    side_file_path,
)
from acidstream.errors import AcidFormatError

ids = st.integers(min_value=0, max_value=2**63 - 1)
stmts = st.none() | st.integers(min_value=0, max_value=9999)


def test_examples_from_hive() -> None:
    assert base_dir(5) == "base_0000005"
    assert base_dir(5, 25) == "base_0000005_v0000025"
    assert delta_dir(2, 3) == "delta_0000002_0000003"
    assert delta_dir(1, 1, 0) == "delta_0000001_0000001_0000"
    assert delta_dir(5, 5, 9) == "delta_0000005_0000005_0009"
    assert delta_dir(1, 1, -1) == "delta_0000001_0000001"
    assert delete_delta_dir(1, 3, None, 9) == "delete_delta_0000001_0000003_v0000009"
    assert delta_dir(12345678, 123456789) == "delta_12345678_123456789"
    assert bucket_file(0) == "bucket_00000"
    assert bucket_file(3, 0) == "bucket_00003_0"
    assert bucket_file(123456) == "bucket_123456"
    assert side_file_path("/t/delta_0000011_0000020/bucket_00000") == (
        "/t/delta_0000011_0000020/bucket_00000_flush_length"
    )


@pytest.mark.parametrize(
    "bad", [lambda: delta_dir(3, 2), lambda: delta_dir(1, 1, 10000), lambda: base_dir(-1)]
)
def test_builders_reject_impossible_names(bad: object) -> None:
    with pytest.raises(ValueError):
        bad()  # type: ignore[operator]


@given(ids, ids)
def test_base_round_trip(w: int, v: int) -> None:
    assert parse_dir_name(base_dir(w, v)) == ParsedBase(w, v)


@given(ids, ids, stmts, ids, st.booleans())
def test_delta_round_trip(a: int, b: int, stmt: int | None, v: int, is_delete: bool) -> None:
    lo, hi = min(a, b), max(a, b)
    make = delete_delta_dir if is_delete else delta_dir
    parsed = parse_dir_name(make(lo, hi, stmt, v))
    assert parsed == ParsedDelta(lo, hi, stmt, v, is_delete)
    assert parsed.name == make(lo, hi, stmt, v)


@given(st.integers(min_value=0, max_value=10**9), st.none() | st.integers(min_value=0, max_value=10**6))
def test_bucket_file_round_trip(bucket: int, attempt: int | None) -> None:
    name = bucket_file(bucket, attempt)
    assert parse_bucket_file(name) == (bucket, attempt)
    assert parse_bucket_file(side_file_path(name)) is None


@pytest.mark.parametrize("name", ["000000_0", "foo", "part-0000.orc", "mydelta_1_1", "baseline"])
def test_non_acid_dir_names(name: str) -> None:
    assert parse_dir_name(name) is None


@pytest.mark.parametrize(
    "name",
    [
        "base_",
        "base_x",
        "base_5_v",
        "delta_1",
        "delta_1_x",
        "delta_3_2",
        "delete_delta_1_1_v1_2",
        "delta_1_1_",
    ],
)
def test_malformed_acid_names_name_the_dir(name: str) -> None:
    with pytest.raises(AcidFormatError, match=name):
        parse_dir_name(name)


def test_bucket_and_original_file_names() -> None:
    assert parse_bucket_file("bucket_00000_flush_length") is None
    assert parse_bucket_file("bucket_") is None
    assert parse_bucket_file("xbucket_00001") is None
    assert parse_original_file("000000_0") == (0, 0)
    assert parse_original_file("000012_0_copy_3") == (12, 3)
    assert is_original_file("000001_1")
    assert not is_original_file("bucket_00000")
    assert not is_original_file("000001_1_copy_")


def test_hidden_names() -> None:
    assert is_hidden("_tmp_1234") and is_hidden(".hive-staging") and is_hidden("_orc_acid_version")
    assert not is_hidden("base_0000001")
    assert not is_acid_hidden("_orc_acid_version") and not is_acid_hidden("_metadata_acid")
    assert is_acid_hidden("_tmp_x")


def test_may_contain_side_file() -> None:
    assert ParsedDelta(1, 2, None, 0, False).may_contain_side_file
    assert not ParsedDelta(1, 1, None, 0, False).may_contain_side_file
    assert not ParsedDelta(1, 2, None, 0, True).may_contain_side_file
    assert not ParsedDelta(1, 2, None, 7, False).may_contain_side_file


def test_hive_delta_order() -> None:
    names = [
        "delta_0000001_0000001_0000",
        "delta_0000002_0000002_0000",
        "delete_delta_0000002_0000002_0000",
        "delta_0000003_0000003_0000",
        "delta_0000001_0000003_v0000009",
        "delete_delta_0000001_0000003_v0000009",
        "delta_0000005_0000010",
        "delta_0000005_0000020",
    ]
    parsed = {n: parse_dir_name(n) for n in names}
    ordered = sorted(names, key=lambda n: delta_sort_key(parsed[n], "/t/" + n))  # type: ignore[arg-type]
    assert ordered == [
        "delete_delta_0000001_0000003_v0000009",
        "delta_0000001_0000003_v0000009",
        "delta_0000001_0000001_0000",
        "delete_delta_0000002_0000002_0000",
        "delta_0000002_0000002_0000",
        "delta_0000003_0000003_0000",
        "delta_0000005_0000020",
        "delta_0000005_0000010",
    ]
