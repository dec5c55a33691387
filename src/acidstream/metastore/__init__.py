"""The transactional metastore: catalog, transactions, write ids, locks, heartbeats, compaction queue, events.

``MetastoreFacade`` (and with it SQLAlchemy) loads on first use: Spark's Python workers and the command line's
``--help`` import the models without paying for the database layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acidstream.metastore.models import (
    CompactionInfo,
    CompletedComponent,
    HeartbeatTxnRangeResponse,
    LockComponent,
    LockInfo,
    LockLevel,
    LockResponse,
    LockState,
    LockType,
    NotificationEvent,
    OperationType,
    Partition,
    TableWrite,
    TxnInfo,
    TxnStatus,
    WrittenFile,
)

if TYPE_CHECKING:
    from acidstream.metastore.facade import MetastoreFacade, TableHandle

__all__ = [
    "CompactionInfo",
    "CompletedComponent",
    "HeartbeatTxnRangeResponse",
    "LockComponent",
    "LockInfo",
    "LockLevel",
    "LockResponse",
    "LockState",
    "LockType",
    "MetastoreFacade",
    "NotificationEvent",
    "OperationType",
    "Partition",
    "TableHandle",
    "TableWrite",
    "TxnInfo",
    "TxnStatus",
    "WrittenFile",
]


def __getattr__(name: str) -> Any:
    if name in ("MetastoreFacade", "TableHandle"):  # the handle: a table's definition and its metastore
        from acidstream.metastore import facade

        return getattr(facade, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
