"""Runs of equal adjacent values, against a plain Python grouping."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.runs import runs


@given(st.lists(st.integers(-3, 3), max_size=60))
def test_runs_are_the_groups_of_equal_adjacent_values(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    expected, start = [], 0
    for _, group in itertools.groupby(values):
        n = len(list(group))
        expected.append((start, start + n))
        start += n
    assert runs(array) == expected


def test_runs_of_strings_and_of_nothing() -> None:
    assert runs(np.array(["a", "a", "b", "a"])) == [(0, 2), (2, 3), (3, 4)]
    assert runs(np.array([], dtype=np.int32)) == []
