"""The Mutation API's ordering validators against a model: strictly ascending ROW__IDs within a group
(record by record and batch by batch alike), and each (partition, bucket) group visited once."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.errors import GroupRevisitedException, RecordSequenceException
from acidstream.mutate import GroupingValidator, RecordIdentifier, SequenceValidator

# whole ranges, with their ends and values far apart likely (differences beyond the type's range)
INT64 = st.one_of(
    st.sampled_from([-(2**63), -(2**62), -1, 0, 2**62, 2**63 - 1]), st.integers(-(2**63), 2**63 - 1)
)
INT32 = st.one_of(st.sampled_from([-(2**31), -1, 0, 2**31 - 1]), st.integers(-(2**31), 2**31 - 1))


def record_ids(small: bool) -> st.SearchStrategy[RecordIdentifier]:
    """Small ranges make ties and near-sorted runs likely; full ranges probe the comparison at the extremes."""
    if small:
        return st.builds(RecordIdentifier, st.integers(0, 3), st.integers(0, 2), st.integers(0, 5))
    return st.builds(RecordIdentifier, INT64, INT32, INT64)


ID_LISTS = st.one_of(
    st.lists(record_ids(True), max_size=30),
    st.lists(record_ids(False), max_size=10),
    # ascending runs, so that sequences get past their first record and fail late (or never)
    st.lists(record_ids(True), max_size=30).map(sorted),
    st.lists(record_ids(False), max_size=10, unique=True).map(sorted),
)


def first_violation(ids: list[RecordIdentifier]) -> int | None:
    """The model: the index of the first record not strictly greater than its predecessor."""
    for i in range(1, len(ids)):
        if not ids[i] > ids[i - 1]:
            return i
    return None


def as_arrays(
    ids: list[RecordIdentifier],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    return (
        np.array([r.write_id for r in ids], dtype=np.int64),
        np.array([r.bucket_id for r in ids], dtype=np.int32),
        np.array([r.row_id for r in ids], dtype=np.int64),
    )


@given(ID_LISTS, st.lists(st.integers(1, 8), min_size=1, max_size=30))
def test_check_and_check_batch_agree_with_the_sorted_order_model(
    ids: list[RecordIdentifier], cuts: list[int]
) -> None:
    bad = first_violation(ids)

    one = SequenceValidator()
    failed_at = None
    for i, rid in enumerate(ids):
        try:
            one.check(rid, "g")
        except RecordSequenceException as exc:
            failed_at = i
            assert f"ROW__ID {rid} follows {ids[i - 1]}" in str(exc)
            break
    assert failed_at == bad
    expected_last = ids[(len(ids) if bad is None else bad) - 1] if ids else None
    assert one.last == expected_last  # a refused record changes nothing

    # the same records in batches of the given sizes: the batch holding the first violation raises, naming it
    batched = SequenceValidator()
    start, failed_batch = 0, None
    for size in [*cuts, len(ids)]:
        chunk = ids[start : start + size]
        last_before = batched.last
        try:
            batched.check_batch(*as_arrays(chunk), "g")
        except RecordSequenceException as exc:
            failed_batch = (start, start + len(chunk))
            assert bad is not None
            assert f"ROW__ID {ids[bad]} follows {ids[bad - 1]}" in str(exc)
            assert batched.last == last_before  # a refused batch changes nothing
            break
        start += len(chunk)
        if start >= len(ids):
            break
    if bad is None:
        assert failed_batch is None and batched.last == expected_last
    else:
        assert failed_batch is not None and failed_batch[0] <= bad < failed_batch[1]


@given(
    st.lists(record_ids(True), min_size=1, max_size=10), st.lists(record_ids(True), min_size=1, max_size=10)
)
def test_reset_starts_a_new_group(first: list[RecordIdentifier], second: list[RecordIdentifier]) -> None:
    first, second = sorted(set(first)), sorted(set(second))
    v = SequenceValidator()
    v.check_batch(*as_arrays(first), "g")
    v.reset()
    for rid in second:  # may be lower than the first group's records: a group's order is its own
        v.check(rid, "g")
    assert v.last == second[-1]


Group = tuple[tuple[str, ...], int]
GROUPS = st.tuples(st.sampled_from([(), ("a",), ("b",), ("a", "x")]), st.integers(0, 3))


@given(st.lists(GROUPS, max_size=40))
def test_grouping_validator_against_a_model(visits: list[Group]) -> None:
    v = GroupingValidator()
    visited: set[Group] = set()
    current: Group | None = None
    for partition, bucket in visits:
        group = (partition, bucket)
        if group == current:
            assert v.enter(list(partition), bucket) is False
        elif group in visited:
            with pytest.raises(GroupRevisitedException) as info:
                v.enter(list(partition), bucket)
            assert f"partition {list(partition)} bucket {bucket} was left earlier" in str(info.value)
            assert current is not None
            assert f"now in partition {list(current[0])} bucket {current[1]}" in str(info.value)
            return
        else:
            assert v.enter(list(partition), bucket) is True
            visited.add(group)
            current = group
    assert v.groups == len(visited)
