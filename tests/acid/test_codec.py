from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.codec import (
    BucketCodec,
    decode_statement_id,
    decode_writer_id,
    decode_writer_ids,
    determine_version,
)
from acidstream.errors import AcidFormatError

buckets = st.integers(min_value=0, max_value=4095)
statements = st.integers(min_value=-1, max_value=4095)
int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@pytest.mark.parametrize(
    ("bucket", "stmt", "prop"),
    [(0, -1, 536870912), (0, 0, 0x20000000), (1, 0, 536936448), (3, 2, 537067522), (4095, 4095, 0x2FFF0FFF)],
)
def test_spec_examples(bucket: int, stmt: int, prop: int) -> None:
    assert BucketCodec.V1.encode(bucket, stmt) == prop
    assert determine_version(prop) is BucketCodec.V1
    assert decode_writer_id(prop) == bucket
    assert decode_statement_id(prop) == max(stmt, 0)


def test_v1_is_default_and_bit_layout() -> None:
    prop = BucketCodec.V1.encode(0xABC, 0x123)
    assert prop >> 29 == 1
    assert (prop >> 28) & 1 == 0 and (prop >> 12) & 0xF == 0
    assert (prop >> 16) & 0xFFF == 0xABC and prop & 0xFFF == 0x123


@given(buckets, statements)
def test_round_trip(bucket: int, stmt: int) -> None:
    prop = BucketCodec.V1.encode(bucket, stmt)
    assert -(2**31) <= prop < 2**31
    codec = BucketCodec.determine_version(prop)
    assert codec is BucketCodec.V1
    assert codec.decode_writer_id(prop) == bucket
    assert codec.decode_statement_id(prop) == max(stmt, 0)


@given(st.integers(min_value=0, max_value=2**29 - 1))
def test_v0_passthrough(bucket: int) -> None:
    assert determine_version(bucket) is BucketCodec.V0
    assert decode_writer_id(bucket) == bucket
    assert decode_statement_id(bucket) == 0
    assert BucketCodec.V0.encode(bucket, 7) == bucket


@given(int32)
def test_version_bits_decide(prop: int) -> None:
    version = (prop & 0xFFFFFFFF) >> 29
    if version > 1:
        with pytest.raises(AcidFormatError, match=f"Illegal 'bucket' format. Version={version}"):
            determine_version(prop)
    else:
        assert determine_version(prop).value == version


@pytest.mark.parametrize(("bucket", "stmt"), [(-1, 0), (4096, 0), (0, 4096), (0, -2)])
def test_encode_range_checks(bucket: int, stmt: int) -> None:
    with pytest.raises(ValueError, match="must be in"):
        BucketCodec.V1.encode(bucket, stmt)


@given(st.lists(st.one_of(st.builds(BucketCodec.V1.encode, buckets, statements), st.integers(0, 2**29 - 1))))
def test_vectorised_matches_scalar(props: list[int]) -> None:
    arr = np.array(props, dtype=np.int32)
    assert decode_writer_ids(arr).tolist() == [decode_writer_id(p) for p in props]
    v1 = [p for p in props if p >= 2**29]
    assert BucketCodec.V1.decode_writer_ids(np.array(v1, dtype=np.int32)).tolist() == [
        BucketCodec.V1.decode_writer_id(p) for p in v1
    ]
    assert BucketCodec.V1.decode_statement_ids(np.array(v1, dtype=np.int32)).tolist() == [
        BucketCodec.V1.decode_statement_id(p) for p in v1
    ]


def test_vectorised_rejects_illegal_versions() -> None:
    with pytest.raises(AcidFormatError, match="Version=2"):
        decode_writer_ids(np.array([536870912, 0x40000000], dtype=np.int32))
    with pytest.raises(AcidFormatError, match="Version=7"):
        decode_writer_ids(np.array([-1], dtype=np.int32))


@given(st.lists(buckets, max_size=20), statements)
def test_encode_many_matches_encode(bucket_ids: list[int], stmt: int) -> None:
    encoded = BucketCodec.V1.encode_many(np.array(bucket_ids, dtype=np.int32), stmt)
    assert encoded.dtype == np.int32
    assert encoded.tolist() == [BucketCodec.V1.encode(b, stmt) for b in bucket_ids]


@given(
    st.lists(buckets | st.integers(-(2**40), 2**40), min_size=1, max_size=5),
    statements | st.integers(-(2**33), 2**33),
)
def test_encode_many_refuses_what_encode_refuses(bucket_ids: list[int], stmt: int) -> None:
    def scalar() -> list[int]:
        return [BucketCodec.V1.encode(b, stmt) for b in bucket_ids]

    try:
        expected = scalar()
    except ValueError:
        with pytest.raises(ValueError, match="must be in"):
            BucketCodec.V1.encode_many(np.array(bucket_ids, dtype=np.int64), stmt)
    else:
        assert BucketCodec.V1.encode_many(np.array(bucket_ids, dtype=np.int64), stmt).tolist() == expected
    with pytest.raises(ValueError, match="only BucketCodec V1"):
        BucketCodec.V0.encode_many(np.array(bucket_ids, dtype=np.int64), stmt)
