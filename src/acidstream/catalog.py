"""The user-facing catalog: the metastore whose table handles can also be read.

Layers import only downward, so the metastore's own ``Table`` knows nothing of reading; this top-level module
joins them: ``Metastore.connect(...).table("db.t").scan()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pyarrow.compute as pc

from acidstream import metastore as _ms
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import StreamingConnectionError
from acidstream.read.scan import TableScan
from acidstream.runtime import prepare_process


class Table(_ms.TableHandle):
    """A table handle that can plan snapshot scans."""

    def scan(
        self,
        columns: Sequence[str] | None = None,
        partition_filter: Mapping[str, Any] | pc.Expression | None = None,
        filter: pc.Expression | None = None,
        with_row_id: bool = False,
        snapshot: ValidWriteIdList | ValidTxnList | str | None = None,
        read_threads: int | None = None,
        agent_info: str = "scan",
    ) -> TableScan:
        """Rows visible at ``snapshot`` (default: committed now); see :class:`TableScan`. ``agent_info``:
        what the scan's reader registration says of its reader (``SHOW``-able, and a handle to end it with
        :meth:`unregister_readers`)."""
        if self.metastore is None:
            raise StreamingConnectionError(
                f"{self.full_name}: this table handle has no metastore to take a snapshot from"
            )
        return TableScan(
            self.metastore,
            self,
            columns=columns,
            partition_filter=partition_filter,
            filter=filter,
            with_row_id=with_row_id,
            snapshot=snapshot,
            read_threads=read_threads,
            agent_info=agent_info,
        )

    def merge(
        self,
        source: Any,
        on: Sequence[str],
        *,
        when_matched: Literal["update", "delete"] | None = "update",
        when_not_matched: Literal["insert"] | None = "insert",
        when_not_matched_by_source: Literal["delete"] | None = None,
        workers: int | None = None,
    ) -> dict[str, int]:
        """Apply an Arrow table / pandas frame by key in one txn (see :func:`acidstream.mutate.merge.merge`,
        which also says what ``workers`` does); returns ``{"inserted": n, "updated": n, "deleted": n}``."""
        from acidstream.mutate.merge import merge

        return merge(
            self._catalog(),
            self.full_name,
            source,
            on,
            when_matched=when_matched,
            when_not_matched=when_not_matched,
            when_not_matched_by_source=when_not_matched_by_source,
            workers=workers,
        )

    def delete(self, filter: pc.Expression | None = None) -> dict[str, int]:
        """Delete the rows matching ``filter`` (every row if None) in one txn."""
        from acidstream.mutate.merge import delete

        return delete(self._catalog(), self.full_name, filter)

    def update(self, filter: pc.Expression | None, set: Mapping[str, Any]) -> dict[str, int]:
        """Set columns (constants or Arrow expressions) of the rows matching ``filter`` in one txn."""
        from acidstream.mutate.merge import update

        return update(self._catalog(), self.full_name, filter, set)

    def _catalog(self) -> Metastore:
        if not isinstance(self.metastore, Metastore):
            raise StreamingConnectionError(
                f"{self.full_name}: this table handle has no catalog to mutate through"
            )
        return self.metastore


class Metastore(_ms.MetastoreFacade):
    """``acidstream.metastore.MetastoreFacade`` whose ``table()`` handles have ``scan()``, and which compacts in this
    process what it waits for (``compact(..., wait=True)``, ``ALTER TABLE ... COMPACT ... AND WAIT``)."""

    table_class = Table

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        prepare_process()  # an entry point: whatever the user does next may write ORC files
        super().__init__(*args, **kwargs)

    def table(self, table_name: str) -> Table:
        handle = super().table(table_name)
        assert isinstance(handle, Table)
        return handle

    def execute(self, sql: str) -> list[tuple[Any, ...]] | None:
        """Run one statement: Hive DDL as :meth:`acidstream.metastore.MetastoreFacade.execute` does, and ``DELETE``,
        ``UPDATE`` and ``MERGE INTO`` (:mod:`acidstream.sql`), each one txn returning one row
        ``(inserted, updated, deleted)``."""
        from acidstream.sql import is_dml

        if is_dml(sql):
            from acidstream.sql.dml import run

            return list(run(self, sql))
        return super().execute(sql)

    def wait_for_compaction(self, compaction_id: int, timeout: float | None = None) -> _ms.CompactionInfo:
        """Run request ``compaction_id`` here now; if a compactor daemon's worker took it first, wait for it."""
        from acidstream.compactor import Worker

        outcome = Worker(self).run_next(compaction_id)
        if outcome is not None:
            return outcome.info
        return super().wait_for_compaction(compaction_id, timeout)
