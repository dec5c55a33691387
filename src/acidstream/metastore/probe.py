"""A txn's state for processes that hold no ``Metastore`` (forked merge workers): how to reach the metastore.

One connection per process and :class:`MetastoreProbe`, opened on first use: a worker asks between its buckets,
cheaply. A kerberized Hive Metastore is reached the way the probe's maker reached it: the same Kerberos settings
(a keytab's holder logs in from it itself: a ticket kept in memory does not cross a fork) and the same ticket
cache and ``krb5.conf`` (``KRB5CCNAME`` and ``KRB5_CONFIG`` as the maker's process had them: a worker forked
from a server started earlier would otherwise look in the server's, and find no ticket).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acidstream.metastore.location import is_hive
from acidstream.metastore.models import TxnStatus

if TYPE_CHECKING:
    from acidstream.metastore.facade import MetastoreFacade

#: The environment that says where Kerberos finds its tickets and its realms.
KERBEROS_ENVIRONMENT = ("KRB5CCNAME", "KRB5_CONFIG")


@dataclass(frozen=True)
class MetastoreProbe:
    """How to reach a metastore from another process: its URL, its wait timeout and, for a Hive Metastore, its
    connection's options (Kerberos, the order of a list of metastores) and the maker's Kerberos environment.
    Picklable; its repr shows no ticket cache or keytab."""

    url: str
    wait_timeout: float
    options: tuple[tuple[str, Any], ...] = ()
    environment: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        return f"MetastoreProbe({self.url!r}, options={[k for k, _ in self.options]})"

    @classmethod
    def of(cls, metastore: MetastoreFacade) -> MetastoreProbe:
        """How this process reaches ``metastore`` (connected), for another process."""
        options: tuple[tuple[str, Any], ...] = ()
        environment: tuple[tuple[str, str], ...] = ()
        if is_hive(metastore.url):
            from acidstream.metastore.hive.client import HiveMetastoreClient

            backend = metastore.backend
            assert isinstance(backend, HiveMetastoreClient)
            options = tuple(sorted(backend.connection.reconnect_options().items()))
            environment = tuple((k, os.environ[k]) for k in KERBEROS_ENVIRONMENT if k in os.environ)
        return cls(metastore.url, metastore.db_wait_timeout, options, environment)

    def txn_state(self, txn_id: int) -> TxnStatus:
        """``txn_id``'s state in the metastore (any backend), waiting at most the wait timeout."""
        return _prober(self)(txn_id)


@functools.cache
def _prober(probe: MetastoreProbe) -> Callable[[int], TxnStatus]:
    if is_hive(probe.url):
        from acidstream.metastore.hive.client import HiveMetastoreClient

        os.environ.update(dict(probe.environment))  # this process works for the probe's maker
        client = HiveMetastoreClient(probe.url, connect_timeout=probe.wait_timeout, **dict(probe.options))
        return client.get_txn_state
    from acidstream.metastore.sql import txns
    from acidstream.metastore.sql.engine import Database

    database = Database(probe.url, probe.wait_timeout)
    return lambda txn_id: database.read(lambda c: txns.get_txn_state(c, txn_id))
