"""Ids as a Hive Metastore answers them, in any order: a snapshot built from them is the one built from them in
order, and a batch's ids pass only as as many consecutive ids as were asked for."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.deps import import_or_skip

ttypes = import_or_skip("hive_metastore.ttypes", reason="the hive extra (pyiceberg[hive]) is not installed")

from acidstream.errors import MetaException  # noqa: E402  (after the skip: it needs the hive extra)
from acidstream.metastore.hive.client import check_consecutive  # noqa: E402
from acidstream.metastore.hive.snapshots import read_txn_list_string, valid_write_id_list  # noqa: E402


def _bits(flags: list[bool]) -> bytes:
    """A Java ``BitSet`` as Hive serialises it: bit i is bit i%8 of byte i//8."""
    out = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        out[i // 8] |= flag << (i % 8)
    return bytes(out)


marked_ids = st.lists(st.tuples(st.integers(1, 200), st.booleans()), unique_by=lambda p: p[0], max_size=30)


@given(marked_ids, st.randoms())
def test_a_snapshot_does_not_depend_on_the_order_of_the_answer(
    pairs: list[tuple[int, bool]], rnd: random.Random
) -> None:
    shuffled = list(pairs)
    rnd.shuffle(shuffled)

    def answer(order: list[tuple[int, bool]]) -> str:
        response = ttypes.GetOpenTxnsResponse(
            txn_high_water_mark=250,
            open_txns=[t for t, _ in order],
            abortedBits=_bits([a for _, a in order]),
        )
        return read_txn_list_string(response)

    def write_ids(order: list[tuple[int, bool]]) -> str:
        ids = ttypes.TableValidWriteIds(
            fullTableName="d.t",
            writeIdHighWaterMark=250,
            invalidWriteIds=[t for t, _ in order],
            abortedBits=_bits([a for _, a in order]),
        )
        return str(valid_write_id_list(ids))

    assert answer(shuffled) == answer(sorted(pairs))
    assert write_ids(shuffled) == write_ids(sorted(pairs))


@given(st.integers(1, 10**6), st.integers(1, 20))
def test_consecutive_ids_pass(first: int, n: int) -> None:
    check_consecutive(list(range(first, first + n)), n, "open_txns", "thrift://hms:9083")


@pytest.mark.parametrize(
    ("ids", "n"),
    [([49, 50, 51, 52, 48], 5), ([48, 49, 51], 3), ([48, 49], 3), ([48, 48], 2), ([], 1)],
    ids=["unsorted", "a gap", "too few", "twice", "none"],
)
def test_other_answers_are_refused_naming_them(ids: list[int], n: int) -> None:
    with pytest.raises(
        MetaException, match=re.escape(f"thrift://hms:9083 answered {ids}: not {n} consecutive")
    ):
        check_consecutive(ids, n, "open_txns", "thrift://hms:9083")
