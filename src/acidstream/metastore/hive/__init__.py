"""A Hive Metastore (thrift) backend: acidstream's transactions against Hive's own metastore.

Needs the ``hive`` extra (Hive's thrift bindings). :class:`HiveMetastoreClient` implements
:class:`~acidstream.txn.manager.TxnManager` with the calls Hive's clients make; table definitions come from
``get_table_req``.
"""

from acidstream.metastore.hive.client import HiveMetastoreClient

__all__ = ["HiveMetastoreClient"]
