"""The transactional metastore: catalog, transactions, write ids, locks, heartbeats, compaction queue, events."""
