"""Mutation: large insert/update/delete sets applied atomically in one long transaction, across several tables,
with writers scaled out over workers (Hive's Streaming Mutation API), plus merge, update and delete by key: the
merge engine (:class:`TableMutation` over one table's txn, :class:`BucketMerge` for one bucket's rows,
:class:`MergeActions`, :class:`Changes`) that ``Table.merge``, SQL ``MERGE``/``UPDATE``/``DELETE`` and Spark's
merges run on."""

from acidstream.mutate.bucket_id import BucketIdResolver
from acidstream.mutate.bucket_merge import BucketMerge
from acidstream.mutate.changes import Changes, MergeActions
from acidstream.mutate.client import MutatorClient, MutatorClientBuilder, Transaction
from acidstream.mutate.coordinator import MutatorCoordinator, MutatorCoordinatorBuilder
from acidstream.mutate.merge import TableMutation
from acidstream.mutate.ordering import GroupingValidator, SequenceValidator
from acidstream.mutate.record_id import ROW_ID, RecordIdentifier
from acidstream.mutate.table import AcidTable, MutationSummary, PartitionMutations, TableType

__all__ = [
    "ROW_ID",
    "AcidTable",
    "BucketIdResolver",
    "BucketMerge",
    "Changes",
    "GroupingValidator",
    "MergeActions",
    "MutationSummary",
    "MutatorClient",
    "MutatorClientBuilder",
    "MutatorCoordinator",
    "MutatorCoordinatorBuilder",
    "PartitionMutations",
    "RecordIdentifier",
    "SequenceValidator",
    "TableMutation",
    "TableType",
    "Transaction",
]
