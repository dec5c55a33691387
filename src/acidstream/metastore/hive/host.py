"""What the Hive backend's mixins (catalog, readers, compaction queue) use of the class they are mixed into:
the transactions protocol and the thrift plumbing of :class:`~acidstream.metastore.hive.client.HiveMetastoreClient`.

The mixins subclass :data:`HiveHost` for the type checker only; at run time they are plain classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from acidstream.metastore.backend import Transactions

if TYPE_CHECKING:
    from collections.abc import Callable

    from hive_metastore import ttypes
    from hive_metastore.ThriftHiveMetastore import Client

    from acidstream.metastore.hive.transport import ThriftConnection
    from acidstream.metastore.models import TableDefinition


class _Host(Transactions, Protocol):
    connection: ThriftConnection

    @property
    def url(self) -> str: ...

    def _call(self, name: str, *args: Any, idempotent: bool = True) -> Any: ...

    def _opened(self, request: ttypes.OpenTxnRequest) -> list[int]: ...

    def _persist(self, name: str, *args: Any, fn: Callable[[Client], Any] | None = None) -> Any: ...

    def get_table(self, table_name: str) -> TableDefinition: ...


if TYPE_CHECKING:
    HiveHost = _Host
else:
    HiveHost = object
