"""Counters a streaming connection keeps, so agents can report throughput and spot trouble."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ConnectionStats:
    """Cumulative over the connection's life; ``snapshot()`` copies them for reporting."""

    records_written: int = 0
    bytes_written: int = 0
    records_rejected: int = 0
    #: records with fewer fields than the table's columns: the missing values are NULL (Hive's LazySimpleSerDe)
    records_short: int = 0
    committed_txns: int = 0
    aborted_txns: int = 0
    auto_flushes: int = 0
    metastore_calls: int = 0
    batches_opened: int = 0
    files_written: set[str] = field(default_factory=set)

    def snapshot(self) -> dict[str, int]:
        return {
            "records_written": self.records_written,
            "bytes_written": self.bytes_written,
            "records_rejected": self.records_rejected,
            "records_short": self.records_short,
            "committed_txns": self.committed_txns,
            "aborted_txns": self.aborted_txns,
            "auto_flushes": self.auto_flushes,
            "metastore_calls": self.metastore_calls,
            "batches_opened": self.batches_opened,
            "files_written": len(self.files_written),
        }
