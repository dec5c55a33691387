"""Hive Streaming Data Ingest V2 in Python: connections, transaction batches, heartbeats, record writers."""
