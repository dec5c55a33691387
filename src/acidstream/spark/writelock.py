"""The lock a Spark write takes for its txn before any row reaches disk, as Hive's own writers take it.

Beyond locking, the lock is how a Hive Metastore learns that the txn writes the table (its ``TXN_COMPONENTS``,
a table-level row for a dynamic-partition write). A txn that recorded no write and is then aborted is deleted by
Hive's txn cleaner (``AcidTxnCleanerService``), after which its write id reads as committed: the files a failed
job's tasks, or a killed driver's, left would then show rows that were never committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acidstream.metastore.models import LockComponent, LockLevel, LockType, OperationType, TableDefinition
from acidstream.txn.transaction import acquire

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade


def lock_for_write(ms: MetastoreFacade, table: TableDefinition, txn_id: int, agent_info: str) -> None:
    """A shared-read INSERT lock of ``txn_id`` on ``table`` (a dynamic-partition write when partitioned: the
    partitions are registered at commit), waiting up to the metastore's lock wait as Hive's inserts do;
    :class:`~acidstream.errors.TransactionError` if it is not granted."""
    component = LockComponent(
        LockType.SHARED_READ,
        LockLevel.TABLE,
        table.db,
        table.name,
        operation=OperationType.INSERT,
        is_dynamic_partition_write=bool(table.partition_keys),
    )
    acquire(ms, [component], txn_id, agent_info, f"Unable to acquire lock on {table.full_name}")
