"""The transactional metastore: catalog, transactions, write ids, locks, heartbeats, compaction queue, events."""

from acidstream.metastore.client import Metastore
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
    Table,
    TxnInfo,
    TxnState,
)

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
    "Metastore",
    "NotificationEvent",
    "OperationType",
    "Partition",
    "Table",
    "TxnInfo",
    "TxnState",
]
