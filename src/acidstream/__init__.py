"""acidstream: Hive 3 full-ACID tables from Python and PySpark — streaming ingest, mutation, compaction, replication.

Names are loaded lazily so that ``import acidstream`` stays cheap in Spark's Python workers.
"""

from __future__ import annotations

import importlib
from typing import Any

from acidstream.errors import AcidStreamError, StreamingException

_LAZY = {
    "Metastore": "acidstream.catalog",
    "Table": "acidstream.catalog",
    "TableScan": "acidstream.read.scan",
    "StreamingConnection": "acidstream.streaming.connection",
    "StrictCsvWriter": "acidstream.streaming.writers",
    "StrictDelimitedInputWriter": "acidstream.streaming.writers",
    "StrictJsonWriter": "acidstream.streaming.writers",
    "StrictRegexWriter": "acidstream.streaming.writers",
    "TxnState": "acidstream.txn.state",
}

__all__ = ["AcidStreamError", "StreamingException", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'acidstream' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
