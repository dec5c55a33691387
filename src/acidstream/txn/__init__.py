"""Transactions shared by streaming batches, mutations and Spark jobs: states, heartbeats, the metastore
protocol they need."""

from acidstream.txn.manager import TxnManager
from acidstream.txn.state import TxnState
from acidstream.txn.transaction import FailureListener, Transaction, TxnHeartbeat

__all__ = ["FailureListener", "Transaction", "TxnHeartbeat", "TxnManager", "TxnState"]
