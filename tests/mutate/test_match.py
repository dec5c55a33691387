"""The merge's key matching against a plain-Python reference: one key (hash lookup) and several (join) alike.

A key two source rows hold is refused whether or not a target row has it, naming the first two rows of the
first such key (the error of a target row matched twice first)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acidstream.errors import InvalidObjectException
from acidstream.mutate.matching import match_keys

keys = st.lists(st.one_of(st.none(), st.integers(0, 6)), max_size=25)


def reference(
    target: list[tuple[int | None, ...]], source: list[tuple[int | None, ...]]
) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, t in enumerate(target)
        for j, s in enumerate(source)
        if None not in t and None not in s and t == s
    ]


def check(
    target: list[tuple[int | None, ...]], source: list[tuple[int | None, ...]], names: list[str]
) -> None:
    def table(rows: list[tuple[int | None, ...]]) -> pa.Table:
        return pa.table({n: pa.array([r[i] for r in rows], pa.int64()) for i, n in enumerate(names)})

    expected = reference(target, source)
    matched_twice = sorted({i for i, _ in expected if sum(1 for k, _ in expected if k == i) > 1})
    if matched_twice:
        row = matched_twice[0]
        first, second = sorted(j for i, j in expected if i == row)[:2]
        with pytest.raises(InvalidObjectException, match=f"source rows {first} and {second} both match"):
            match_keys(table(target), table(source), names)
        return
    keyed = [s for s in source if None not in s]
    repeated = [s for s in dict.fromkeys(keyed) if keyed.count(s) > 1]
    if repeated:
        first, second = [j for j, s in enumerate(source) if s == repeated[0]][:2]
        with pytest.raises(
            InvalidObjectException, match=f"source rows {first} and {second} both hold the key"
        ):
            match_keys(table(target), table(source), names)
        return
    t_idx, s_idx = match_keys(table(target), table(source), names)
    assert list(zip(t_idx.tolist(), s_idx.tolist(), strict=True)) == expected


@settings(max_examples=200, deadline=None)
@given(keys, keys)
def test_one_key(target: list[int | None], source: list[int | None]) -> None:
    check([(t,) for t in target], [(s,) for s in source], ["id"])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2))), max_size=15), st.data()
)
def test_two_keys(target: list[tuple[int, int | None]], data: st.DataObject) -> None:
    source = data.draw(
        st.lists(st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2))), max_size=15)
    )
    check(list(target), list(source), ["a", "b"])
