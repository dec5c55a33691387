"""Table snapshots derived from one ``ValidTxnList``: readers of several tables see one point in time.

Hive's ``getValidWriteIds(txnList, table)``: the table's write-id high-water mark is the largest write id of a
txn at or below the txn list's high-water mark; below it, a write id is invalid when its txn is an exception
of the list (open or aborted then) or was opened after it (a later txn may hold a smaller write id).
"""

from __future__ import annotations

from sqlalchemy import Connection, select

from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList, write_id_list_from_states
from acidstream.metastore.sql import catalog
from acidstream.metastore.sql import schema as s

T2W = s.txn_to_write_id.c
IN_CHUNK = 1000  # ids per IN (...) list


def valid_write_ids_at(conn: Connection, db: str, table: str, txns: ValidTxnList) -> ValidWriteIdList:
    """The table's ValidWriteIdList at the point in time ``txns`` describes.

    Every query walks an index from its selective end (``(db, table, writeid)`` backwards for the high-water
    mark, ``txnid`` for the exceptions and the later txns), so the cost does not grow with the table's history.
    """
    catalog.require_table_id(conn, db, table)
    mine = (T2W.t2w_database == db, T2W.t2w_table == table)
    hwm = conn.execute(
        select(T2W.t2w_writeid)
        .where(*mine, T2W.t2w_txnid <= txns.high_watermark)
        .order_by(T2W.t2w_writeid.desc())
        .limit(1)
    ).scalar()
    if hwm is None:
        return write_id_list_from_states(f"{db}.{table}", 0, (), ())
    exceptions = list(txns.exceptions)
    selections = [T2W.t2w_txnid > txns.high_watermark] + [
        T2W.t2w_txnid.in_(exceptions[i : i + IN_CHUNK]) for i in range(0, len(exceptions), IN_CHUNK)
    ]
    opened: list[int] = []
    aborted: list[int] = []
    for selected in selections:
        rows = conn.execute(
            select(T2W.t2w_txnid, T2W.t2w_writeid).where(selected, *mine, T2W.t2w_writeid <= hwm)
        )
        for txn_id, write_id in rows:
            (aborted if txns.is_txn_aborted(txn_id) else opened).append(write_id)
    return write_id_list_from_states(f"{db}.{table}", hwm, opened, aborted)
