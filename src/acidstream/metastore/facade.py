"""``Metastore``: the façade every other layer holds, over one backend (:mod:`acidstream.metastore.backend`).

``Metastore.connect(url)`` picks the backend by the URL's scheme — ``sqlite://``/``postgresql://``: acidstream's
SQL metastore (:class:`~acidstream.metastore.sql.client.MetastoreClient`); ``thrift://``: a Hive Metastore
(:class:`~acidstream.metastore.hive.client.HiveMetastoreClient`, the ``hive`` extra) — and returns an object that
is both this façade and that backend, so every call of the backend protocols is the backend's own. The façade
adds what sits above the backend calls: Hive DDL (:meth:`Metastore.execute`), table handles that know their
metastore, the storage boundary (a location checked before a table is created, a dropped table's files deleted
once the drop is committed: a failed drop keeps its data) and the capabilities a backend declares it lacks.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

from acidstream.acid.types import Column
from acidstream.errors import LockTimeoutException, MetastoreUrlError
from acidstream.metastore import models
from acidstream.metastore.backend import Capability, unsupported
from acidstream.metastore.ddl import run
from acidstream.storage import check_location, delete_locations

if TYPE_CHECKING:
    from acidstream.metastore.backend import Backend
    from acidstream.metastore.backend import Backend as _Calls
    from acidstream.metastore.sql.replication import ReplOp
else:
    _Calls = object  # at run time the backend, later in the MRO, supplies every call


@dataclass(frozen=True)
class Table(models.Table):
    """A table handle: the definition and the metastore it came from; upper layers subclass it
    (``Metastore.table_class``) to add reading/writing methods."""

    metastore: Metastore | None = field(default=None, compare=False, repr=False)


class Metastore(_Calls):
    """Catalog, transactions, write ids, locks, compaction queue, readers and notifications over one backend,
    with Hive DDL and table handles. Build it with :meth:`connect`."""

    table_class: ClassVar[type[Table]] = Table

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        warehouse: str | os.PathLike[str] | None = None,
        txn_timeout: float | None = None,
        lock_wait_timeout: float = 10.0,
        **options: Any,
    ) -> Self:
        """Open the metastore at ``url``: ``sqlite:///path``, ``postgresql://...`` (acidstream's own; needs
        ``warehouse``, where new tables' files go) or ``thrift://host:9083`` (a Hive Metastore; its tables and
        databases carry their locations, ``warehouse`` defaults to its ``metastore.warehouse.dir``).

        ``txn_timeout``: for acidstream's metastore, how long this client's txns live without a heartbeat
        (default 300 s); for Hive's, the server's ``metastore.txn.timeout`` unless given. ``options`` go to the
        backend (``db_wait_timeout``; ``connect_timeout``, ``socket_timeout``).
        """
        backend = _backend_for(url)
        implementation = _implementation(cls, backend)
        return cast(
            Self,
            implementation.open(
                url,
                warehouse=None if warehouse is None else os.fspath(warehouse),
                txn_timeout=txn_timeout,
                lock_wait_timeout=lock_wait_timeout,
                **options,
            ),
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- capabilities ------------------------------------------------------------------------------------------

    def supports(self, capability: Capability) -> bool:
        return capability not in self.missing

    def require(self, capability: Capability, call: str) -> None:
        """Raise :class:`UnsupportedCapability` naming ``call``, the backend and the fallback if it lacks it."""
        if capability in self.missing:
            raise unsupported(capability, call, self.backend_name)

    # --- above the backend calls ----------------------------------------------------------------------------------

    def execute(self, sql: str) -> list[tuple[Any, ...]] | None:
        """Run one statement of the Hive DDL subset; SHOW/DESCRIBE return rows, others None."""
        return run(self, sql)

    def table(self, table_name: str) -> Table:
        definition = super().table(table_name)  # type: ignore[safe-super]
        return self.table_class(**definition.field_values(), metastore=self)

    def create_table(self, db: str, name: str, columns: Sequence[Column], **kw: Any) -> Table:
        """Create the table (see ``Catalog.create_table``) once the warehouse's storage answers."""
        check_location(self.warehouse)
        super().create_table(db, name, columns, **kw)  # type: ignore[safe-super]
        return self.table(f"{db}.{name}")

    def compact(
        self,
        table_name: str,
        partition: str | Mapping[str, Any] | None = None,
        kind: str = "major",
        *,
        wait: bool = False,
        initiator_id: str | None = None,
    ) -> int:
        """Queue a ``major``/``minor`` compaction of a table or (required for partitioned tables) one partition,
        given as ``"k=v/k2=v2"`` or ``{"k": v}``; returns the request id (an initiated or working request for
        the same target is returned instead of a second one). ``wait``: return once it is done (see
        :meth:`wait_for_compaction`)."""
        compaction_id: int = super().compact(  # type: ignore[safe-super]
            table_name, partition, kind, initiator_id=initiator_id
        )
        if wait:
            self.wait_for_compaction(compaction_id)
        return compaction_id

    def wait_for_compaction(self, compaction_id: int, timeout: float | None = None) -> models.CompactionInfo:
        """Poll until request ``compaction_id`` is no longer initiated or working (compactor workers do the
        work: ``acidstream.catalog.Metastore`` runs it in this process instead); raises
        :class:`LockTimeoutException` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.05
        while True:
            info = self.get_compaction(compaction_id)
            if info.state not in ("initiated", "working"):
                return info
            if deadline is not None and time.monotonic() >= deadline:
                raise LockTimeoutException(
                    f"compaction {compaction_id} still {info.state} after {timeout:g}s"
                )
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def drop_table(self, table_name: str, if_exists: bool = False) -> list[str]:
        """Drop the table and delete its files (as Hive does for managed tables)."""
        dropped: list[str] = super().drop_table(table_name, if_exists)  # type: ignore[safe-super]
        delete_locations(dropped)
        return dropped

    def drop_database(self, name: str, cascade: bool = False, if_exists: bool = False) -> list[str]:
        """Drop a database; with ``cascade`` its tables and their files too."""
        dropped: list[str] = super().drop_database(name, cascade, if_exists)  # type: ignore[safe-super]
        delete_locations(dropped)
        return dropped

    def repl_apply(
        self,
        policy: str,
        source: str,
        event_id: int,
        event_time: int,
        ops: Sequence[ReplOp],
        *,
        bootstrap: bool = False,
    ) -> list[str]:
        """On a replica: apply one source event (see ``ReplicaState.repl_apply``), then delete the files of
        the tables it dropped."""
        dropped: list[str] = super().repl_apply(  # type: ignore[safe-super]
            policy, source, event_id, event_time, ops, bootstrap=bootstrap
        )
        delete_locations(dropped)
        return dropped


def _backend_for(url: str) -> type[Backend]:
    """The backend class for ``url``'s scheme (imported on first use: each has its own dependencies)."""
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    if scheme in ("sqlite", "postgresql", "postgres"):
        from acidstream.metastore.sql.client import MetastoreClient

        return MetastoreClient
    if scheme == "thrift":
        try:
            from acidstream.metastore.hive.client import HiveMetastoreClient
        except ImportError as exc:
            raise MetastoreUrlError(
                f"{url}: a Hive Metastore needs the hive extra (pip install 'acidstream[hive]'): {exc}"
            ) from exc
        return HiveMetastoreClient
    raise MetastoreUrlError(
        f"unsupported metastore URL {url!r}: use sqlite:///path, postgresql://user@host/db or thrift://host:9083"
    )


@functools.cache
def _implementation(facade: type[Metastore], backend: type) -> Any:
    """The class that is ``facade`` over ``backend``: the façade's methods first, then the backend's calls."""
    return cast(Any, type(f"{facade.__name__}Over{backend.__name__}", (facade, backend), {}))
