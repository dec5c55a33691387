from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid.writeids import (
    LONG_MAX,
    RangeResponse,
    ValidTxnList,
    ValidTxnWriteIdList,
    ValidWriteIdList,
    write_id_list_from_states,
)
from acidstream.errors import AcidFormatError

MAX = 12


@dataclass(frozen=True)
class Model:
    """Brute force: the state of each id 1..hwm, everything above hwm is "not yet" (invalid, not aborted)."""

    hwm: int
    open_ids: frozenset[int]
    aborted: frozenset[int]

    def valid(self, i: int) -> bool:
        return i <= self.hwm and i not in self.open_ids and i not in self.aborted

    def range_valid(self, lo: int, hi: int) -> RangeResponse:
        n = sum(self.valid(i) for i in range(lo, hi + 1))
        return RangeResponse.ALL if n == hi - lo + 1 else RangeResponse.NONE if n == 0 else RangeResponse.SOME

    def range_aborted(self, lo: int, hi: int) -> RangeResponse:
        n = sum(i in self.aborted for i in range(lo, hi + 1))
        return RangeResponse.ALL if n == hi - lo + 1 else RangeResponse.NONE if n == 0 else RangeResponse.SOME

    def valid_base(self, w: int) -> bool:
        """A compacted base_w is usable iff nothing at or below w is still open."""
        return w <= self.hwm and all(o > w for o in self.open_ids)


@st.composite
def models(draw: st.DrawFn) -> Model:
    hwm = draw(st.integers(0, MAX))
    ids = list(range(1, hwm + 1))
    states = draw(st.lists(st.sampled_from("coa"), min_size=len(ids), max_size=len(ids)))
    return Model(
        hwm,
        frozenset(i for i, s in zip(ids, states, strict=True) if s == "o"),
        frozenset(i for i, s in zip(ids, states, strict=True) if s == "a"),
    )


def to_list(m: Model, table: str | None = "db.t") -> ValidWriteIdList:
    """The list the metastore would hand out for this state (minOpenWriteId = smallest open id)."""
    if table is not None:
        return write_id_list_from_states(table, m.hwm, m.open_ids, m.aborted)
    low = min(m.open_ids, default=LONG_MAX)
    return ValidWriteIdList(m.hwm, tuple(m.open_ids), tuple(m.aborted), table=None, min_open_write_id=low)


ranges = st.tuples(st.integers(1, MAX + 3), st.integers(0, 4)).map(lambda t: (t[0], t[0] + t[1]))


@given(models(), st.sampled_from(["db.t", None]))
def test_string_round_trip(m: Model, table: str | None) -> None:
    wl = to_list(m, table)
    assert ValidWriteIdList.parse(str(wl)) == wl
    assert str(ValidWriteIdList.parse(str(wl))) == str(wl)


@given(models(), ranges)
def test_against_brute_force(m: Model, rng: tuple[int, int]) -> None:
    wl = to_list(m)
    lo, hi = rng
    assert wl.is_write_id_range_valid(lo, hi) == m.range_valid(lo, hi)
    assert wl.is_write_id_range_aborted(lo, hi) == m.range_aborted(lo, hi)
    for i in range(lo, hi + 1):
        assert wl.is_write_id_valid(i) == m.valid(i)
        assert wl.is_write_id_aborted(i) == (i in m.aborted)
        assert wl.is_valid_base(i) == m.valid_base(i)


@given(models(), ranges)
def test_txn_list_against_brute_force(m: Model, rng: tuple[int, int]) -> None:
    tl = ValidTxnList(
        m.hwm, tuple(m.open_ids), tuple(m.aborted), min_open_txn=min(m.open_ids, default=LONG_MAX)
    )
    assert ValidTxnList.parse(str(tl)) == tl
    lo, hi = rng
    assert tl.is_txn_range_valid(lo, hi) == m.range_valid(lo, hi)
    for i in range(lo, hi + 1):
        assert tl.is_txn_valid(i) == m.valid(i)
        assert tl.is_txn_aborted(i) == (i in m.aborted)


@given(models(), ranges)
def test_compactor_list(m: Model, rng: tuple[int, int]) -> None:
    """The compactor sees only ids below the first open one; a range is ALL or NONE, never SOME."""
    cl = to_list(m).for_compactor()
    horizon = min(m.open_ids, default=m.hwm + 1) - 1
    assert cl.high_watermark == horizon
    assert set(cl.aborted_ids) == {a for a in m.aborted if a <= horizon}
    lo, hi = rng
    assert cl.is_write_id_range_valid(lo, hi) == (RangeResponse.ALL if hi <= horizon else RangeResponse.NONE)


def test_java_split_quirk_and_examples() -> None:
    wl = ValidWriteIdList.parse("t:5:9223372036854775807::")
    assert (wl.table, wl.high_watermark, wl.exceptions) == ("t", 5, ())
    assert str(wl) == "t:5:9223372036854775807::"
    wl = ValidWriteIdList.parse("default.t:5:3:3:4")
    assert wl.open_ids == (3,) and wl.aborted_ids == (4,) and wl.min_open_write_id == 3
    assert ValidWriteIdList.parse("null:7:9223372036854775807:").table is None
    only_open = ValidWriteIdList.parse("t:10:7:7")
    assert only_open.open_ids == (7,) and not only_open.is_write_id_aborted(7)
    tl = ValidTxnList.parse("5:9223372036854775807::")
    assert tl.high_watermark == 5 and not tl.exceptions


def test_txn_list_ranges_of_hive_4() -> None:
    """Hive 4's ValidReadTxnList.writeToString writes runs of consecutive ids as ``first-last`` (open and
    aborted alike); the string below is Hive 4.0.1's own output."""
    tl = ValidTxnList.parse("30:7:8,9,10,14,15,16,20:2-7,12,13")
    assert tl.open_ids == (8, 9, 10, 14, 15, 16, 20)
    assert tl.aborted_ids == (2, 3, 4, 5, 6, 7, 12, 13)
    assert tl.is_txn_aborted(4) and not tl.is_txn_valid(6) and tl.is_txn_valid(11)
    assert ValidTxnList.parse("14:4:4,6-14:2").open_ids == (4, *range(6, 15))
    for bad in ("9:1:1-:", "9:1:3-1:", "9:1:-3:", "9:1:1-2-3:"):
        with pytest.raises(AcidFormatError):
            ValidTxnList.parse(bad)


def test_parse_keeps_written_min_open_like_hive() -> None:
    """Hive's readFromString keeps minOpenWriteId even without exceptions, and isValidBase uses it."""
    wl = ValidWriteIdList.parse("t:5:3::")
    assert str(wl) == "t:5:3::"
    assert not wl.is_valid_base(4)


@pytest.mark.parametrize("bad", ["", "t:5", "t:x:1::", "t:5:9223372036854775807:1,a:", "t:5:1:1:z"])
def test_malformed_write_id_lists(bad: str) -> None:
    with pytest.raises(AcidFormatError):
        ValidWriteIdList.parse(bad)


def test_txn_write_id_list() -> None:
    s = "42$db.a:5:9223372036854775807::$db.b:7:6:6:"
    twl = ValidTxnWriteIdList.parse(s)
    assert str(twl) == s
    assert twl.for_table("db.b").open_ids == (6,)
    with pytest.raises(AcidFormatError):
        twl.for_table("db.c")
