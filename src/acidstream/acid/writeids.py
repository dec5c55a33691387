"""Snapshots as Hive expresses them: ``ValidTxnList`` and ``ValidWriteIdList`` with Hive's string forms.

A reader takes one ``ValidWriteIdList`` per table from the metastore and decides, per directory and per row,
what is visible. The string forms are byte-for-byte Hive's (``ValidReadTxnList`` /
``ValidReaderWriteIdList.writeToString``), so they can be handed to Hive's own classes and compared in tests.
Hive 4 writes runs of consecutive txn ids as ``first-last``; ``ValidTxnList.parse`` reads both forms.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from acidstream.errors import AcidFormatError

LONG_MAX = 9223372036854775807


class RangeResponse(enum.Enum):
    """Answer to "how many ids of this range are valid/aborted" (Hive's ``ValidTxnList.RangeResponse``)."""

    NONE = "NONE"
    SOME = "SOME"
    ALL = "ALL"


def _ids(text: str, what: str, source: str) -> list[int]:
    if not text:
        return []
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise AcidFormatError(f"malformed {what} list {text!r} in {source!r}") from None


def _txn_ids(text: str, what: str, source: str) -> list[int]:
    """A txn id list as Hive 4's ``ValidReadTxnList`` writes it: runs of consecutive ids as ``first-last``."""
    out: list[int] = []
    for item in text.split(",") if text else ():
        first, dash, last = item.partition("-")
        if not dash:
            out += _ids(item, what, source)
            continue
        [lo, hi] = _ids(f"{first},{last}", what, source)
        if lo > hi:
            raise AcidFormatError(f"malformed {what} list {text!r} in {source!r}")
        out += range(lo, hi + 1)
    return out


def _split_java(source: str) -> list[str]:
    """``String.split(":")`` as Java does it: trailing empty strings are dropped."""
    parts = source.split(":")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class _ExceptionList:
    """Sorted exception ids (open or aborted) at or below a high-water mark, Hive's shared representation."""

    high_watermark: int
    open_ids: tuple[int, ...] = ()
    aborted_ids: tuple[int, ...] = ()
    exceptions: tuple[int, ...] = field(init=False, repr=False)
    _aborted: frozenset[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "exceptions", tuple(sorted(set(self.open_ids) | set(self.aborted_ids))))
        object.__setattr__(self, "_aborted", frozenset(self.aborted_ids))
        object.__setattr__(self, "open_ids", tuple(sorted(self.open_ids)))
        object.__setattr__(self, "aborted_ids", tuple(sorted(self.aborted_ids)))

    def _in_exceptions(self, i: int) -> bool:
        pos = bisect.bisect_left(self.exceptions, i)
        return pos < len(self.exceptions) and self.exceptions[pos] == i

    def _range_valid(self, lo: int, hi: int) -> RangeResponse:
        if lo > self.high_watermark:
            return RangeResponse.NONE
        if self.exceptions and self.exceptions[0] > hi:
            return RangeResponse.ALL
        count = max(0, hi - self.high_watermark)
        left = bisect.bisect_left(self.exceptions, lo)
        right = bisect.bisect_right(self.exceptions, hi)
        count += right - left
        if count == 0:
            return RangeResponse.ALL
        if count == hi - lo + 1:
            return RangeResponse.NONE
        return RangeResponse.SOME

    def _range_aborted(self, lo: int, hi: int) -> RangeResponse:
        if self.high_watermark < lo:
            return RangeResponse.NONE
        left = bisect.bisect_left(self.aborted_ids, lo)
        right = bisect.bisect_right(self.aborted_ids, hi)
        count = right - left
        if count == 0:
            return RangeResponse.NONE
        if count == hi - lo + 1:
            return RangeResponse.ALL
        return RangeResponse.SOME

    def _lists_str(self) -> str:
        return f"{','.join(map(str, self.open_ids))}:{','.join(map(str, self.aborted_ids))}"


@dataclass(frozen=True)
class ValidTxnList(_ExceptionList):
    """Hive's ``ValidReadTxnList``: txns ≤ ``high_watermark`` are committed unless open or aborted."""

    min_open_txn: int = LONG_MAX

    def is_txn_valid(self, txn: int) -> bool:
        return txn <= self.high_watermark and not self._in_exceptions(txn)

    def is_txn_aborted(self, txn: int) -> bool:
        return txn in self._aborted

    def is_txn_range_valid(self, lo: int, hi: int) -> RangeResponse:
        return self._range_valid(lo, hi)

    def __str__(self) -> str:
        return f"{self.high_watermark}:{self.min_open_txn}:{self._lists_str()}"

    @classmethod
    def parse(cls, source: str) -> ValidTxnList:
        parts = _split_java(source)
        if len(parts) < 2:
            raise AcidFormatError(f"malformed ValidTxnList {source!r}")
        try:
            hwm, min_open = int(parts[0]), int(parts[1])
        except ValueError:
            raise AcidFormatError(f"malformed ValidTxnList {source!r}") from None
        open_ids = _txn_ids(parts[2], "open txn", source) if len(parts) > 2 else []
        aborted = _txn_ids(parts[3], "aborted txn", source) if len(parts) > 3 else []
        return cls(hwm, tuple(open_ids), tuple(aborted), min_open_txn=min_open)


@dataclass(frozen=True)
class ValidWriteIdList(_ExceptionList):
    """Hive's ``ValidReaderWriteIdList`` for one table: ``db.t:hwm:minOpen:open:aborted``."""

    table: str | None = None
    min_open_write_id: int = LONG_MAX

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.exceptions:  # Hive only keeps minOpenWriteId when there are exceptions
            object.__setattr__(self, "min_open_write_id", LONG_MAX)

    def is_write_id_valid(self, write_id: int) -> bool:
        return write_id <= self.high_watermark and not self._in_exceptions(write_id)

    def is_valid_base(self, write_id: int) -> bool:
        return write_id < self.min_open_write_id and write_id <= self.high_watermark

    def is_write_id_aborted(self, write_id: int) -> bool:
        return write_id in self._aborted

    def is_write_id_range_valid(self, lo: int, hi: int) -> RangeResponse:
        return self._range_valid(lo, hi)

    def is_write_id_range_aborted(self, lo: int, hi: int) -> RangeResponse:
        return self._range_aborted(lo, hi)

    def invalid_write_ids(self) -> tuple[int, ...]:
        return self.exceptions

    def __str__(self) -> str:
        name = self.table if self.table is not None else "null"
        return f"{name}:{self.high_watermark}:{self.min_open_write_id}:{self._lists_str()}"

    @classmethod
    def parse(cls, source: str) -> ValidWriteIdList:
        parts = _split_java(source)
        if len(parts) < 3:
            raise AcidFormatError(f"malformed ValidWriteIdList {source!r}")
        table = None if parts[0].lower() == "null" else parts[0]
        try:
            hwm, min_open = int(parts[1]), int(parts[2])
        except ValueError:
            raise AcidFormatError(f"malformed ValidWriteIdList {source!r}") from None
        open_ids = _ids(parts[3], "open write id", source) if len(parts) > 3 else []
        aborted = _ids(parts[4], "aborted write id", source) if len(parts) > 4 else []
        parsed = cls(hwm, tuple(open_ids), tuple(aborted), table=table, min_open_write_id=min_open)
        # Hive's readFromString keeps minOpenWriteId as written even without exceptions (only the
        # constructor drops it), and isValidBase depends on it: keep it too.
        object.__setattr__(parsed, "min_open_write_id", min_open)
        return parsed

    def for_compactor(self) -> ValidCompactorWriteIdList:
        """The compactor's view (``TxnUtils.createValidCompactWriteIdList``): nothing at/after the first open id."""
        hwm = self.high_watermark
        if self.open_ids:
            hwm = self.open_ids[0] - 1
        aborted = tuple(a for a in self.aborted_ids if a <= hwm)
        min_open = self.open_ids[0] if self.open_ids else LONG_MAX
        return ValidCompactorWriteIdList(hwm, (), aborted, table=self.table, min_open_write_id=min_open)


@dataclass(frozen=True)
class ValidCompactorWriteIdList(ValidWriteIdList):
    """Hive's ``ValidCompactorWriteIdList``: a delta is compactable only if its whole range is resolved."""

    def is_write_id_range_valid(self, lo: int, hi: int) -> RangeResponse:
        if self.high_watermark < lo:
            return RangeResponse.NONE
        return RangeResponse.ALL if self.high_watermark >= hi else RangeResponse.NONE


@dataclass(frozen=True)
class ValidTxnWriteIdList:
    """Hive's ``ValidTxnWriteIdList``: the per-table lists of one snapshot, ``txn$list1$list2``."""

    txn_id: int
    tables: dict[str, ValidWriteIdList]

    def __str__(self) -> str:
        return "$".join([str(self.txn_id), *(str(v) for v in self.tables.values())])

    @classmethod
    def parse(cls, source: str) -> ValidTxnWriteIdList:
        head, *rest = source.split("$")
        lists = [ValidWriteIdList.parse(r) for r in rest if r]
        return cls(int(head), {str(w.table): w for w in lists})

    def for_table(self, full_name: str) -> ValidWriteIdList:
        try:
            return self.tables[full_name]
        except KeyError:
            raise AcidFormatError(f"no write-id list for {full_name} in snapshot") from None


def write_id_list_from_states(
    table: str, high_watermark: int, open_ids: Iterable[int], aborted_ids: Iterable[int]
) -> ValidWriteIdList:
    """Build a list the way the metastore does: ``minOpenWriteId`` is the smallest open id."""
    opened = tuple(sorted(open_ids))
    return ValidWriteIdList(
        high_watermark,
        opened,
        tuple(sorted(aborted_ids)),
        table=table,
        min_open_write_id=opened[0] if opened else LONG_MAX,
    )
