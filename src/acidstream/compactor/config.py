"""The compactor's settings, named and defaulted after Hive's (docs/format.md, Compaction)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

#: Table properties overriding the thresholds per table (``compactorthreshold.<hive setting>``).
THRESHOLD_PREFIX = "compactorthreshold."
NO_AUTO_COMPACTION = "no_auto_compaction"


@dataclass(frozen=True)
class CompactorConfig:
    """Initiator, worker and cleaner settings.

    * ``delta_num_threshold`` (``hive.compactor.delta.num.threshold``, 10): more current deltas than this asks
      for a compaction (minor if there is a base, major if not).
    * ``delta_pct_threshold`` (``hive.compactor.delta.pct.threshold``, 0.1): deltas larger than this fraction
      of the base ask for a major compaction.
    * ``aborted_txn_threshold`` (``hive.compactor.abortedtxn.threshold``, 1000): more aborted txns than this
      in a table/partition ask for a major compaction.
    * ``failed_compacts_threshold`` (``hive.compactor.initiator.failed.compacts.threshold``, 2) and
      ``failed_retry_time`` (``hive.compactor.initiator.failed.retry.time``, 7 days): after that many
      consecutive failures the initiator leaves the target alone until the retry time has passed.
    * ``check_interval`` (``hive.compactor.check.interval``, 300 s) and ``cleaner_interval``
      (``hive.compactor.cleaner.run.interval``, 5 s): daemon cadence.
    * ``retention`` (``hive.compactor.cleaner.retention.time``, 300 s): how long replaced files stay after a
      compaction is published, for readers that do not register (Hive's own, other engines).
    * ``max_num_delta`` (``hive.compactor.max.num.delta``, 500): more current deltas than this in a partition
      are first minor-compacted in runs of this many, which then feed the requested compaction.
    * ``max_attempts``: claims of one request before it fails (a killed worker's request is retried).
    * ``parallelism``: bucket jobs a worker runs at once in-process; ``batch_rows``: rows per merge batch;
      ``stripe_bytes``: Arrow bytes of events per output stripe (the unit encoded side by side, see
      ``compactor.output``).
    """

    delta_num_threshold: int = 10
    delta_pct_threshold: float = 0.1
    aborted_txn_threshold: int = 1000
    failed_compacts_threshold: int = 2
    failed_retry_time: float = 7 * 86400.0
    check_interval: float = 300.0
    cleaner_interval: float = 5.0
    retention: float = 300.0
    max_attempts: int = 2
    max_num_delta: int = 500
    parallelism: int = field(default_factory=lambda: min(4, os.cpu_count() or 1))
    batch_rows: int = 64 * 1024
    stripe_bytes: int = 16 << 20

    def for_table(self, properties: Mapping[str, str]) -> CompactorConfig:
        """These settings with a table's ``compactorthreshold.*`` overrides applied."""
        props = {k.lower(): v for k, v in properties.items()}
        pct = props.get(f"{THRESHOLD_PREFIX}hive.compactor.delta.pct.threshold")
        num = props.get(f"{THRESHOLD_PREFIX}hive.compactor.delta.num.threshold")
        return replace(
            self,
            delta_pct_threshold=self.delta_pct_threshold if pct is None else float(pct),
            delta_num_threshold=self.delta_num_threshold if num is None else int(num),
        )


def no_auto_compaction(properties: Mapping[str, str]) -> bool:
    """``NO_AUTO_COMPACTION``/``no_auto_compaction`` = true: the initiator never queues this table."""
    return any(k.lower() == NO_AUTO_COMPACTION and v.lower() == "true" for k, v in properties.items())
