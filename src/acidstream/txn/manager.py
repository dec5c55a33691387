"""``TxnManager``: what a transaction needs of a metastore — the metastore backends' transactions protocol.

Both backends implement it (acidstream's SQL metastore and a Hive Metastore over thrift), so streaming and
mutation transactions run unchanged on either.
"""

from __future__ import annotations

from acidstream.metastore.backend import Transactions as TxnManager

__all__ = ["TxnManager"]
