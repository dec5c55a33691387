"""Mutation: large insert/update/delete sets applied atomically in one long transaction, across several tables,
with writers scaled out over workers (Hive's Streaming Mutation API), plus merge, update and delete by key."""

from acidstream.mutate.bucket_id import BucketIdResolver
from acidstream.mutate.client import MutatorClient, MutatorClientBuilder, Transaction
from acidstream.mutate.coordinator import MutatorCoordinator, MutatorCoordinatorBuilder
from acidstream.mutate.ordering import GroupingValidator, SequenceValidator
from acidstream.mutate.record_id import ROW_ID, RecordIdentifier
from acidstream.mutate.table import AcidTable, MutationSummary, PartitionMutations, TableType

__all__ = [
    "ROW_ID",
    "AcidTable",
    "BucketIdResolver",
    "GroupingValidator",
    "MutationSummary",
    "MutatorClient",
    "MutatorClientBuilder",
    "MutatorCoordinator",
    "MutatorCoordinatorBuilder",
    "PartitionMutations",
    "RecordIdentifier",
    "SequenceValidator",
    "TableType",
    "Transaction",
]
