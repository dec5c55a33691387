"""A txn's state by the metastore's URL, for processes that hold no ``Metastore`` (forked merge workers).

One connection per process and URL, opened on first use: a worker asks between its buckets, cheaply.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from acidstream.metastore.location import is_hive
from acidstream.metastore.models import TxnStatus


def txn_state(url: str, wait_timeout: float, txn_id: int) -> TxnStatus:
    """``txn_id``'s state in the metastore at ``url`` (any backend), waiting at most ``wait_timeout`` s."""
    return _prober(url, wait_timeout)(txn_id)


@functools.cache
def _prober(url: str, wait_timeout: float) -> Callable[[int], TxnStatus]:
    if is_hive(url):
        from acidstream.metastore.hive.client import HiveMetastoreClient

        return HiveMetastoreClient(url, connect_timeout=wait_timeout).get_txn_state
    from acidstream.metastore.sql import txns
    from acidstream.metastore.sql.engine import Database

    database = Database(url, wait_timeout)
    return lambda txn_id: database.read(lambda c: txns.get_txn_state(c, txn_id))
