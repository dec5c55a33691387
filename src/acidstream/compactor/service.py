"""``Compactor``: the initiator, the workers and the cleaner over one metastore, one pass at a time."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acidstream.compactor.cleaner import Cleaner, CleanOutcome
from acidstream.compactor.config import CompactorConfig
from acidstream.compactor.initiator import Decision, Initiator
from acidstream.compactor.worker import JobRunner, Outcome, Worker, recover_abandoned
from acidstream.metastore.backend import Capability

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)


@dataclass
class Summary:
    """What passes did: requests queued, compactions by final state, cleanings, recoveries."""

    requested: list[Decision] = field(default_factory=list)
    compacted: list[Outcome] = field(default_factory=list)
    cleaned: list[CleanOutcome] = field(default_factory=list)
    recovered: list[tuple[int, str]] = field(default_factory=list)

    def add(self, other: Summary) -> None:
        self.requested += other.requested
        self.compacted += other.compacted
        self.cleaned += other.cleaned
        self.recovered += other.recovered

    def counts(self) -> dict[str, int]:
        states: dict[str, int] = {}
        for o in self.compacted:
            states[o.info.state] = states.get(o.info.state, 0) + 1
        return {
            "requested": sum(d.kind is not None for d in self.requested),
            "compacted": states.get("ready for cleaning", 0) + states.get("succeeded", 0),
            "refused": states.get("refused", 0),
            "failed": states.get("failed", 0),
            "requeued": states.get("initiated", 0),
            "cleaned": sum(c.state == "succeeded" for c in self.cleaned),
            "clean_failed": sum(c.state == "failed" for c in self.cleaned),
            "recovered": len(self.recovered),
            "rows_written": sum(o.rows_written for o in self.compacted),
        }

    def __str__(self) -> str:
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.counts().items())


class Compactor:
    """``Compactor(ms).run_once()``: recover dead workers' requests, one initiator pass, the workers on what is
    queued, one cleaner pass. ``run_jobs`` runs bucket jobs elsewhere (``acidstream.spark.compact``)."""

    def __init__(
        self,
        ms: MetastoreFacade,
        config: CompactorConfig | None = None,
        *,
        run_jobs: JobRunner | None = None,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self.ms = ms
        self.config = config or CompactorConfig()
        self.run_jobs = run_jobs
        self.initiator = Initiator(ms, self.config)
        self.cleaner = Cleaner(ms, self.config)
        self._on_event = on_event

    def event(self, message: str) -> None:
        log.info(message)
        if self._on_event is not None:
            self._on_event(message)

    def worker(self) -> Worker:
        return Worker(self.ms, self.config, run_jobs=self.run_jobs)

    @property
    def services_here(self) -> bool:
        """Whether recovery, the initiator and the cleaner run here: not over a metastore that runs its own
        (Hive's), whose queue this compactor works only as a remote worker."""
        return self.ms.supports(Capability.COMPACTION_SERVICES)

    def recover(self) -> list[tuple[int, str]]:
        if not self.services_here:
            return []
        recovered = recover_abandoned(self.ms, self.config)
        for cq, state in recovered:
            self.event(f"recovered compaction {cq} of a dead worker: {state}")
        return recovered

    def initiate(self) -> list[Decision]:
        if not self.services_here:
            return []
        decisions = self.initiator.run_once()
        for d in decisions:
            if d.kind is not None:
                where = f"{d.db}.{d.table}" + (f"/{d.partition}" if d.partition else "")
                self.event(f"requested {d.kind} compaction {d.compaction_id} of {where}: {d.reason}")
        return decisions

    def work(self, workers: int = 1) -> list[Outcome]:
        """Run queued requests until none is left, ``workers`` at a time."""

        def drain() -> list[Outcome]:
            worker, done = self.worker(), []
            while (outcome := worker.run_next()) is not None:
                self.report(outcome)
                done.append(outcome)
            return done

        if workers <= 1:
            return drain()
        with ThreadPoolExecutor(workers, thread_name_prefix="acidstream-worker") as pool:
            return [o for part in pool.map(lambda _: drain(), range(workers)) for o in part]

    def report(self, outcome: Outcome) -> None:
        info = outcome.info
        detail = f" ({info.error_message})" if info.error_message else ""
        rows = f", {outcome.rows_written} events written" if outcome.results else ""
        self.event(
            f"compaction {info.id} ({info.kind} {info.full_partition_name}): {info.state}{rows}{detail}"
        )

    def clean(self) -> list[CleanOutcome]:
        if not self.services_here:
            return []
        outcomes = self.cleaner.run_once()
        for c in outcomes:
            what = f"removed {len(c.removed)}" + (
                f", forgot aborted write ids {list(c.forgotten_write_ids)}" if c.forgotten_write_ids else ""
            )
            self.event(
                f"cleaned after compaction {c.compaction_id}: {c.state}, {what}"
                + (f" ({c.error})" if c.error else "")
            )
        return outcomes

    def run_once(self, workers: int = 1) -> Summary:
        return Summary(
            recovered=self.recover(),
            requested=self.initiate(),
            compacted=self.work(workers),
            cleaned=self.clean(),
        )

    def compact(
        self, table_name: str, partition: str | Mapping[str, Any] | None = None, kind: str = "major"
    ) -> Outcome:
        """Queue a request and run it in this process now (``ALTER TABLE ... COMPACT ... AND WAIT``). When a
        daemon's worker took it first, wait for that worker instead."""
        cq = self.ms.compact(table_name, partition, kind)
        outcome = self.worker().run_next(cq)
        if outcome is not None:
            self.report(outcome)
            return outcome
        return Outcome(self.ms.wait_for_compaction(cq))
