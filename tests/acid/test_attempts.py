"""Whose task attempt directories are over: a write's by its write id, a compaction's in-place output's by its
compactor txn; names it cannot tell stay."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.attempts import attempt_over, output_attempt, write_attempt
from acidstream.acid.names import base_dir, delete_delta_dir, delta_dir
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList

#: Write ids 1..9 of the table: 4 open, 6 aborted, the rest committed; txns 1..19: 12 open, 13 aborted.
WRITE_IDS = ValidWriteIdList(9, (4,), (6,), table="db.t", min_open_write_id=4)
TXNS = ValidTxnList(19, (12,), (13,), min_open_txn=12)
#: The output directories a compaction writes in place, named with its txn.
OUTPUTS = [
    lambda w, t: base_dir(w, t),
    lambda w, t: delta_dir(1, w, None, t),
    lambda w, t: delete_delta_dir(1, w, None, t),
]


@given(st.integers(1, 12), st.integers(0, 4095), st.sampled_from(["t0", "t17", "a1"]))
def test_a_write_attempt_is_over_once_its_write_id_is_committed_or_aborted(
    write_id: int, statement: int, attempt: str
) -> None:
    over = write_id <= 9 and write_id != 4
    assert attempt_over(write_attempt(write_id, statement, attempt), WRITE_IDS, TXNS) is over


@given(st.integers(1, 22), st.integers(1, 9), st.sampled_from(OUTPUTS))
def test_an_in_place_output_attempt_is_over_once_its_compactor_txn_is(
    txn: int, write_id: int, output: Callable[[int, int], str]
) -> None:
    name = output(write_id, txn)
    over = txn <= 19 and txn != 12
    assert attempt_over(output_attempt(name, "t5"), WRITE_IDS, TXNS) is over


def test_names_it_cannot_tell_stay() -> None:
    for name in (
        output_attempt(base_dir(3), "t5"),
        "base_x.t5",
        "whatever",
        "w_s1_t2",
        "delta_0000001_0000001",
    ):
        assert not attempt_over(name, WRITE_IDS, TXNS)
