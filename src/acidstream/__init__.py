"""acidstream: Hive 3 full-ACID tables from Python and PySpark — streaming ingest, mutation, compaction, replication."""

from __future__ import annotations

from acidstream.errors import StreamingException

__all__ = ["StreamingException"]
