"""Transactions shared by streaming batches, mutations and Spark jobs: states, heartbeats, the metastore
protocol they need."""

from acidstream.txn.batch import TransactionBatch, TxnBatch, UnmanagedTransaction
from acidstream.txn.manager import TxnManager
from acidstream.txn.state import TxnState
from acidstream.txn.transaction import FailureListener, MetastoreTxn, TxnHeartbeat

__all__ = [
    "FailureListener",
    "MetastoreTxn",
    "TransactionBatch",
    "TxnBatch",
    "TxnHeartbeat",
    "TxnManager",
    "TxnState",
    "UnmanagedTransaction",
]
