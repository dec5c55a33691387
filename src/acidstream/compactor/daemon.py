"""``CompactorDaemon``: the compactor's threads in one process — initiator, N workers, cleaner, housekeeper (txn
timeouts, recovery of dead workers' requests, history purge, and the sweep of ended txns' task attempts).

Several daemons (on several hosts, sharing a PostgreSQL metastore) may run at once: claims are exclusive, so no
request is compacted twice, and any daemon's housekeeper recovers the requests of a daemon that died.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from acidstream.compactor.config import CompactorConfig
from acidstream.compactor.service import Compactor, Summary
from acidstream.compactor.worker import JobRunner
from acidstream.errors import AcidStreamError
from acidstream.metastore.backend import Capability

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)

#: Housekeeping (timeouts, recovery, history purge) runs at least this often.
MAX_HOUSEKEEPING_INTERVAL = 60.0


class CompactorDaemon:
    """Runs until :meth:`stop`; ``workers`` requests are compacted at once, ``poll_interval`` s apart when the
    queue is empty. Workers finish the request they hold before the daemon stops."""

    def __init__(
        self,
        ms: MetastoreFacade,
        config: CompactorConfig | None = None,
        *,
        workers: int = 1,
        run_jobs: JobRunner | None = None,
        on_event: Callable[[str], None] | None = None,
        poll_interval: float = 5.0,
    ) -> None:
        self.compactor = Compactor(ms, config, run_jobs=run_jobs, on_event=on_event)
        self.workers = max(1, workers)
        self.poll_interval = poll_interval
        self.housekeeping_interval = min(ms.txn_timeout / 4, MAX_HOUSEKEEPING_INTERVAL)
        self.summary = Summary()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    @property
    def config(self) -> CompactorConfig:
        return self.compactor.config

    def run_once(self) -> Summary:
        """One pass of everything (``--once``), with the workers in parallel."""
        self._timeouts()
        summary = self.compact_once()
        if self.compactor.services_here:
            self.compactor.ms.purge_compaction_history()
            self._sweep_attempts()
        return summary

    def compact_once(self) -> Summary:
        """One compactor pass (recovery, initiator, workers in parallel, cleaner), without the housekeeper's
        timeouts and history purge: for a process that keeps its own tables compacted while it writes."""
        summary = self.compactor.run_once(self.workers)
        self._record(summary)
        return summary

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> Summary:
        """Run the loops until :meth:`stop`; returns what they did."""
        loops: list[tuple[str, Callable[[], Summary], float]] = [
            ("housekeeper", self._housekeep, self.housekeeping_interval),
            ("initiator", lambda: Summary(requested=self.compactor.initiate()), self.config.check_interval),
            ("cleaner", lambda: Summary(cleaned=self.compactor.clean()), self.config.cleaner_interval),
        ]
        threads = [
            threading.Thread(
                target=self._loop, args=(name, step, every), name=f"compactor-{name}", daemon=True
            )
            for name, step, every in loops
        ]
        threads += [
            threading.Thread(target=self._work, name=f"compactor-worker-{i}", daemon=True)
            for i in range(self.workers)
        ]
        for t in threads:
            t.start()
        try:
            while not self._stop.wait(0.5):
                pass
        finally:
            self._stop.set()
            for t in threads:
                t.join()
        return self.summary

    def _record(self, summary: Summary) -> None:
        with self._lock:
            self.summary.add(summary)

    def _housekeep(self) -> Summary:
        aborted = self._timeouts()
        if aborted:
            self.compactor.event(f"housekeeper aborted timed-out txns {aborted}")
        summary = Summary(recovered=self.compactor.recover())
        if self.compactor.services_here:
            self.compactor.ms.purge_compaction_history()
            self._sweep_attempts()
        return summary

    def _sweep_attempts(self) -> None:
        """Delete the task attempts that ended txns left in tables no compaction is cleaning (a killed Spark
        driver's: :meth:`~acidstream.compactor.cleaner.Cleaner.sweep_attempts`), at the housekeeper's pace."""
        removed = self.compactor.cleaner.sweep_attempts()
        if removed:
            self.compactor.event(f"housekeeper removed {len(removed)} task attempts of ended txns")

    def _timeouts(self) -> list[int]:
        """Abort timed-out txns, unless the metastore server does it itself (Hive's)."""
        ms = self.compactor.ms
        return ms.perform_timeouts() if ms.supports(Capability.HOUSEKEEPING) else []

    def _loop(self, name: str, step: Callable[[], Summary], every: float) -> None:
        while not self._stop.is_set():
            try:
                self._record(step())
            except (AcidStreamError, OSError):
                log.exception("compactor %s pass failed; retrying in %.1f s", name, every)
            if self._stop.wait(every):
                return

    def _work(self) -> None:
        worker = self.compactor.worker()
        while not self._stop.is_set():
            try:
                outcome = worker.run_next()
            except (AcidStreamError, OSError):
                log.exception("compactor worker could not claim a request")
                outcome = None
            if outcome is None:
                self._stop.wait(self.poll_interval)
                continue
            self.compactor.report(outcome)
            self._record(Summary(compacted=[outcome]))
