"""The user-facing catalog: the metastore whose table handles can also be read.

Layers import only downward, so the metastore's own ``Table`` knows nothing of reading; this top-level module
joins them: ``Metastore.connect(...).table("db.t").scan()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow.compute as pc

from acidstream import metastore as _ms
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import ConnectionError
from acidstream.read.scan import TableScan


class Table(_ms.Table):
    """A table handle that can plan snapshot scans."""

    def scan(
        self,
        columns: Sequence[str] | None = None,
        partition_filter: Mapping[str, Any] | pc.Expression | None = None,
        filter: pc.Expression | None = None,
        with_row_id: bool = False,
        snapshot: ValidWriteIdList | ValidTxnList | str | None = None,
    ) -> TableScan:
        """Rows visible at ``snapshot`` (default: committed now); see :class:`TableScan`."""
        if self.metastore is None:
            raise ConnectionError(
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
        )


class Metastore(_ms.Metastore):
    """``acidstream.metastore.Metastore`` whose ``table()`` handles have ``scan()``, and which compacts in this
    process what it waits for (``compact(..., wait=True)``, ``ALTER TABLE ... COMPACT ... AND WAIT``)."""

    table_class = Table

    def table(self, table_name: str) -> Table:
        handle = super().table(table_name)
        assert isinstance(handle, Table)
        return handle

    def wait_for_compaction(self, compaction_id: int, timeout: float | None = None) -> _ms.CompactionInfo:
        """Run request ``compaction_id`` here now; if a compactor daemon's worker took it first, wait for it."""
        from acidstream.compactor import Worker

        outcome = Worker(self).run_next(compaction_id)
        if outcome is not None:
            return outcome.info
        return super().wait_for_compaction(compaction_id, timeout)
