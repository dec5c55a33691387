"""events.unsorted_at, the one key-order check of writers, merges and delete sets, against a Python loop."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.orc.events import unsorted_at

small = st.integers(-2, 2)
keys = st.lists(st.tuples(small, st.sampled_from([536870912, 536936448, -1]), small), max_size=12)


@given(keys=keys, presort=st.booleans())
def test_unsorted_at_finds_the_first_key_followed_by_a_smaller_one(
    keys: list[tuple[int, int, int]], presort: bool
) -> None:
    if presort:
        keys = sorted(keys)
    o = np.array([k[0] for k in keys], dtype=np.int64)
    b = np.array([k[1] for k in keys], dtype=np.int32)
    r = np.array([k[2] for k in keys], dtype=np.int64)
    expected = next((i for i in range(len(keys) - 1) if keys[i + 1] < keys[i]), -1)
    assert unsorted_at(o, b, r) == expected
