"""``Metastore``: the metastore every other layer holds — :class:`MetastoreClient`'s calls plus what sits above
them: Hive DDL (:meth:`Metastore.execute`), table handles that know the metastore they came from, and removing a
dropped table's files through the storage boundary (only once the drop is committed: a failed drop keeps its
data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from acidstream.acid.types import Column
from acidstream.metastore import models
from acidstream.metastore.client import MetastoreClient
from acidstream.metastore.ddl import run
from acidstream.metastore.replication import ReplOp
from acidstream.storage import check_location, delete_locations


@dataclass(frozen=True)
class Table(models.Table):
    """A table handle: the definition and the metastore it came from; upper layers subclass it
    (``Metastore.table_class``) to add reading/writing methods."""

    metastore: Metastore | None = field(default=None, compare=False, repr=False)


class Metastore(MetastoreClient):
    """Catalog, transactions, write ids, locks, compaction queue and notification log over SQLite/PostgreSQL,
    with Hive DDL and table handles."""

    table_class: ClassVar[type[Table]] = Table

    def execute(self, sql: str) -> list[tuple[Any, ...]] | None:
        """Run one statement of the Hive DDL subset; SHOW/DESCRIBE return rows, others None."""
        return run(self, sql)

    def table(self, table_name: str) -> Table:
        return self.table_class(**self._table_fields(table_name), metastore=self)

    def create_table(self, db: str, name: str, columns: Sequence[Column], **kw: Any) -> Table:
        """Create the table (see ``MetastoreClient.create_table``) once the warehouse's storage answers."""
        check_location(self.warehouse)
        table = super().create_table(db, name, columns, **kw)
        assert isinstance(table, Table)  # MetastoreClient.create_table returns self.table(...)
        return table

    def drop_table(self, table_name: str, if_exists: bool = False) -> list[str]:
        """Drop the table and delete its files (as Hive does for managed tables)."""
        dropped = super().drop_table(table_name, if_exists)
        delete_locations(dropped)
        return dropped

    def drop_database(self, name: str, cascade: bool = False, if_exists: bool = False) -> list[str]:
        """Drop a database; with ``cascade`` its tables and their files too."""
        dropped = super().drop_database(name, cascade, if_exists)
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
        """On a replica: apply one source event (see :meth:`MetastoreClient.repl_apply`), then delete the files of
        the tables it dropped."""
        dropped = super().repl_apply(policy, source, event_id, event_time, ops, bootstrap=bootstrap)
        delete_locations(dropped)
        return dropped
