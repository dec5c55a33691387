"""Compaction: the initiator, minor and major workers and the cleaner (docs/format.md, Compaction).

``Compactor(ms).run_once()`` runs one pass of each in this process; ``CompactorDaemon`` keeps doing so (the
``acidstream compactor run`` command); ``acidstream.spark.compact`` runs a worker's bucket jobs on a cluster.
"""

from acidstream.compactor.cleaner import Cleaner, CleanOutcome
from acidstream.compactor.config import CompactorConfig
from acidstream.compactor.daemon import CompactorDaemon
from acidstream.compactor.initiator import Decision, Initiator
from acidstream.compactor.service import Compactor, Summary
from acidstream.compactor.worker import Outcome, Worker

__all__ = [
    "CleanOutcome",
    "Cleaner",
    "Compactor",
    "CompactorConfig",
    "CompactorDaemon",
    "Decision",
    "Initiator",
    "Outcome",
    "Summary",
    "Worker",
]
