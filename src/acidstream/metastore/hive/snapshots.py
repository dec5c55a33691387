"""Hive's snapshot answers as acidstream's ``ValidTxnList``/``ValidWriteIdList``, built as Hive's clients build them.

``get_open_txns`` answers with the txn high-water mark, the open and aborted txns below it and a Java
``BitSet`` (``abortedBits``, little-endian bytes) marking which of them are aborted;
``TxnCommonUtils.createValidReadTxnList`` turns that into the ``ValidReadTxnList`` string every Hive reader is
handed. We write that string the same way and parse it with :meth:`ValidTxnList.parse`, so what a reader gets
from us is byte for byte what it would get from Hive.
"""

from __future__ import annotations

from collections.abc import Sequence

from hive_metastore import ttypes

from acidstream.acid.writeids import LONG_MAX, ValidTxnList, ValidWriteIdList

#: Hive 4's ``ValidReadTxnList.MIN_RANGE_LENGTH``: shorter runs are written id by id.
MIN_RANGE_LENGTH = 5


def _bits(data: bytes | None, n: int) -> list[bool]:
    """The first ``n`` bits of a serialised Java ``BitSet`` (``BitSet.valueOf(byte[])``: bit i is bit i%8 of
    byte i//8)."""
    data = data or b""
    return [i // 8 < len(data) and bool(data[i // 8] >> (i % 8) & 1) for i in range(n)]


def read_txn_list_string(response: ttypes.GetOpenTxnsResponse, current_txn: int = 0) -> str:
    """``TxnCommonUtils.createValidReadTxnList(response, currentTxn).writeToString()``: with ``current_txn``
    the snapshot of that txn (its own id and later ones are not exceptions, the mark is at most its id)."""
    hwm = response.txn_high_water_mark
    if current_txn > 0:
        hwm = min(current_txn, hwm)
    open_txns: Sequence[int] = response.open_txns or []
    aborted = _bits(response.abortedBits, len(open_txns))
    opened: list[int] = []
    aborted_ids: list[int] = []
    for txn, is_aborted in sorted(zip(open_txns, aborted, strict=True)):  # in order, however Hive answers
        if current_txn > 0 and txn >= current_txn:
            break
        (aborted_ids if is_aborted else opened).append(txn)
    min_open = opened[0] if opened else LONG_MAX  # Hive's "none open"
    return f"{hwm}:{min_open}:{_runs(opened)}:{_runs(aborted_ids)}"


def _runs(ids: Sequence[int]) -> str:
    """Hive 4's ``ValidReadTxnList.writeTxnRange``: runs of at least 5 consecutive ids as ``first-last``."""
    out: list[str] = []
    start = 0
    for end in range(1, len(ids) + 1):
        if end < len(ids) and ids[end] == ids[end - 1] + 1:
            continue
        first, last = ids[start], ids[end - 1]
        out.append(
            f"{first}-{last}" if last - first + 1 >= MIN_RANGE_LENGTH else ",".join(map(str, ids[start:end]))
        )
        start = end
    return ",".join(out)


def valid_txn_list(response: ttypes.GetOpenTxnsResponse, current_txn: int = 0) -> ValidTxnList:
    return ValidTxnList.parse(read_txn_list_string(response, current_txn))


def valid_write_id_list(ids: ttypes.TableValidWriteIds) -> ValidWriteIdList:
    """``TxnCommonUtils.createValidReaderWriteIdList``: invalid write ids split into open and aborted."""
    invalid: Sequence[int] = ids.invalidWriteIds or []
    # in order, however answered
    marked = sorted(zip(invalid, _bits(ids.abortedBits, len(invalid)), strict=True))
    return ValidWriteIdList(
        ids.writeIdHighWaterMark,
        tuple(w for w, aborted in marked if not aborted),
        tuple(w for w, aborted in marked if aborted),
        table=ids.fullTableName,
        min_open_write_id=ids.minOpenWriteId if ids.minOpenWriteId is not None else LONG_MAX,
    )
