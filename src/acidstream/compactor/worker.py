"""The worker: claim a request, compact its table/partition, publish the output (Hive's ``Worker``).

Order of events for one request, and what a crash at each point leaves:

1. claim (working, compactor txn opened and heartbeated) and record the ``_tmp`` directory — crash: the txn
   times out, recovery deletes ``_tmp`` and re-queues the request (up to ``max_attempts`` claims);
2. merge every bucket into ``_tmp`` — same;
3. ``begin_publish`` (inputs and outputs recorded) — from here the request only goes forward: recovery
   completes the renames;
4. rename the outputs into the partition, ``mark_compacted`` (ready for cleaning), remove ``_tmp``.

Readers that list the partition during step 4 ignore the outputs and read the inputs, which stay until the
cleaner runs; nothing a reader sees ever changes its rows.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import pyarrow.fs as pafs

from acidstream.acid.partitions import parse_part_name
from acidstream.acid.selection import AcidDir, AcidState, get_acid_state
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.compactor.config import CompactorConfig
from acidstream.compactor.jobs import BucketJob, BucketResult, run_bucket_job
from acidstream.compactor.plan import (
    PartitionPlan,
    after_runs,
    check_recorded,
    delta_runs,
    needs_cleaning,
    nothing_to_compact,
    plan_partition,
    top_level_names,
)
from acidstream.compactor.publish import (
    IN_PLACE,
    check_free,
    describe_outputs,
    discard,
    discard_in_place,
    finish_outputs,
    move_into_place,
    new_tmp_dir,
)
from acidstream.errors import AcidStreamError, InvalidObjectException, NoSuchObjectException
from acidstream.metastore.backend import Capability
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import CompactionInfo, TableDefinition
from acidstream.read.listing import each_listed_once
from acidstream.runtime import completed_future
from acidstream.storage import capabilities, sync, sync_files, table_filesystem
from acidstream.txn.heartbeat import Heartbeater, heartbeat_interval

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)

#: Comma-separated stages (``written``, ``published``, ``moved``) at which a worker stops and waits to be killed:
#: lets crash tests kill -9 a worker at a chosen point. Each pause is announced on stderr.
PAUSE_ENV = "ACIDSTREAM_COMPACTOR_PAUSE"

#: Runs bucket jobs (in threads here, as Spark tasks in ``acidstream.spark.compact``); results in job order.
JobRunner = Callable[[Sequence[BucketJob]], list[BucketResult]]

_worker_numbers = itertools.count(1)

P = ParamSpec("P")
T = TypeVar("T")


def new_worker_id() -> str:
    """``host-pid-n``: Hive's worker ids name the host, the SHOW COMPACTIONS "Worker host" column shows it."""
    _, host = client_identity()
    return f"{host}-{os.getpid()}-{next(_worker_numbers)}"


def threaded_runner(parallelism: int) -> JobRunner:
    """``parallelism`` jobs at once; once fewer remain, their stripes are encoded by threads of a shared pool
    (pyarrow releases the GIL) while they merge the next, so the cores stay busy (:class:`SpareCores`)."""

    def run(jobs: Sequence[BucketJob]) -> list[BucketResult]:
        if parallelism <= 1 or not jobs:
            return [run_bucket_job(j) for j in jobs]
        with (
            ThreadPoolExecutor(parallelism, thread_name_prefix="acidstream-compact-encode") as pool,
            ThreadPoolExecutor(
                min(parallelism, len(jobs)), thread_name_prefix="acidstream-compact"
            ) as jobs_pool,
        ):
            encoder = SpareCores(pool, parallelism)

            def one(job: BucketJob) -> BucketResult:
                with encoder.running():
                    return run_bucket_job(job, encoder)

            return list(jobs_pool.map(one, jobs))

    return run


class SpareCores(Executor):
    """Runs work in ``pool`` while fewer jobs than ``cores`` are running (the last jobs of a request), in the
    calling job's thread otherwise: more busy threads than cores only take turns on them, and each turn costs
    (caches refilled): with other work on the machine, a compaction took 6% more CPU time when every stripe
    went to the pool."""

    def __init__(self, pool: Executor, cores: int) -> None:
        self._pool, self._cores = pool, cores
        self._jobs = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Count a job as running for the duration."""
        with self._lock:
            self._jobs += 1
        try:
            yield
        finally:
            with self._lock:
                self._jobs -= 1

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        if self._jobs < self._cores:
            return self._pool.submit(fn, *args, **kwargs)
        return completed_future(fn, *args, **kwargs)


@dataclass(frozen=True)
class Target:
    """Where a request's files live."""

    table: TableDefinition
    location: str  # as the metastore stores it
    fs: pafs.FileSystem
    path: str  # inside ``fs``


def resolve_target(ms: MetastoreFacade, ci: CompactionInfo) -> Target:
    table = ms.table(ci.table_name)
    location = table.location
    if ci.partition is not None:
        spec = parse_part_name(ci.partition)
        values = [spec[k.name] for k in table.partition_keys]
        partition = ms.get_partition(ci.table_name, values)
        if partition is None:
            raise NoSuchObjectException(f"Partition {ci.partition} of {ci.table_name} no longer exists")
        location = partition.location
    fs, path = table_filesystem(location)
    return Target(table, location, fs, path)


@dataclass(frozen=True)
class Outcome:
    """What a worker did with one request."""

    info: CompactionInfo
    results: tuple[BucketResult, ...] = ()

    @property
    def rows_written(self) -> int:
        return sum(r.rows_written for r in self.results)


class Claimed:
    """One claimed request, heartbeated while in use (``with``): plan it, have its jobs run, publish or fail.

    The in-process worker and the Spark driver (``acidstream.spark.compact``) drive it the same way; only
    where the bucket jobs run differs.
    """

    def __init__(self, ms: MetastoreFacade, ci: CompactionInfo, config: CompactorConfig) -> None:
        assert ci.txn_id is not None, "a claimed request has a compactor txn"
        self.ms, self.ci, self.config = ms, ci, config
        self.txn_id: int = ci.txn_id
        self._beat = Heartbeater(
            heartbeat_interval(ms.txn_timeout), lambda: ms.heartbeat(self.txn_id), f"compactor-{ci.id}"
        )
        self._target: Target | None = None
        self._meta: dict[str, str] = {}

    def __enter__(self) -> Claimed:
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._beat.stop()

    def plan(self, run_jobs: JobRunner) -> PartitionPlan | None:
        """The bucket jobs to run; None when the request is already finished (refused, or published with
        nothing to merge because only the cleaner has work). ``run_jobs`` runs the pre-pass's jobs, if any."""
        ci, ms, txn_id = self.ci, self.ms, self.txn_id
        target = self._target = resolve_target(ms, ci)
        write_ids = ms.get_valid_write_ids(ci.table_name).for_compactor()
        tmp = new_tmp_dir(target.path)
        self._meta = {"location": target.location, "tmp": tmp}
        # in place where directories do not rename atomically, and where the metastore's own cleaner and
        # readers know a compaction's output only by its txn (Hive's: they would not see a rename under way)
        if not capabilities(target.fs).can_rename_directories or not ms.supports(
            Capability.COMPACTION_RENAMES
        ):
            self._meta[IN_PLACE] = "1"
        ms.update_compaction(ci.id, txn_id, highest_write_id=write_ids.high_watermark, meta=self._meta)
        if target.fs.get_file_info(target.path).type != pafs.FileType.Directory:
            ms.mark_refused(ci.id, nothing_to_compact(ci.kind, target.path), txn_id)
            return None
        # the txn list hides other compactions' outputs published in place and not committed (or aborted)
        state = get_acid_state(target.fs, target.path, write_ids, ms.snapshot())
        listing = each_listed_once(target.fs)  # the deltas' listings serve the check, then the plan
        if state.deltas:
            low = min(d.min_write_id for d in state.deltas)
            high = max(d.max_write_id for d in state.deltas)
            recorded = ms.recorded_lengths(ci.table_name, ci.partition, low, high)
            check_recorded(listing, state.deltas, recorded)
        state = self._pre_pass(state, write_ids, tmp, run_jobs)
        in_place = IN_PLACE in self._meta
        plan = plan_partition(
            listing,
            target.location,
            target.path,
            target.path if in_place else tmp,
            ci.kind,
            state,
            write_ids,
            target.table,
            self.config,
            visibility_txn_id=txn_id if in_place else 0,
            scratch=tmp,
        )
        if plan is None:
            if needs_cleaning(state):  # nothing to merge, but the cleaner has work: publish nothing
                obsolete = top_level_names(target.path, state.obsolete)
                ms.begin_publish(ci.id, txn_id, {**self._meta, "outputs": [], "inputs": list(obsolete)})
                ms.mark_compacted(ci.id, txn_id)
            else:
                ms.mark_refused(ci.id, nothing_to_compact(ci.kind, target.path, state), txn_id)
        return plan

    def _pre_pass(
        self, state: AcidState, write_ids: ValidWriteIdList, tmp: str, run_jobs: JobRunner
    ) -> AcidState:
        """Minor-compact each run of :func:`plan.delta_runs` into ``tmp/run_<i>`` (its outputs then stand in
        for its deltas in the returned state); ``state`` as it is when there are not that many deltas."""
        target = self._target
        assert target is not None
        done: list[list[AcidDir]] = []
        outputs: list[tuple[str, list[str]]] = []
        for i, run in enumerate(delta_runs(state, self.config.max_num_delta)):
            where = f"{tmp}/run_{i}"
            plan = plan_partition(
                target.fs,
                target.location,
                target.path,
                where,
                "minor",
                AcidState(None, deltas=run),
                write_ids,
                target.table,
                self.config,
            )
            if plan is None:  # one range's insert and delete deltas: nothing a minor compaction merges
                continue
            run_jobs(plan.jobs)
            done.append(run)
            outputs.append((where, finish_outputs(target.fs, where, plan.outputs)))
        if done:
            log.info(
                "compaction %d: %d deltas, first merged in %d runs of at most %d",
                self.ci.id,
                len(state.deltas),
                len(done),
                self.config.max_num_delta,
            )
        return after_runs(state, done, outputs) if done else state

    def publish(self, plan: PartitionPlan) -> None:
        """Once every job of ``plan`` has written its files: steps 3 and 4."""
        _pause("written")
        assert self._target is not None
        publish(self.ms, self.ci, self.txn_id, self._target, plan, self._meta)

    def fail(self, exc: BaseException) -> None:
        """Record a failure (removing ``_tmp``), or complete a publication that had begun."""
        log.error(
            "compaction %d of %s failed: %s", self.ci.id, self.ci.full_partition_name, exc, exc_info=exc
        )
        ci, ms, txn_id = self.ci, self.ms, self.txn_id
        message = f"{type(exc).__name__}: {exc}"
        try:
            try:
                info = ms.get_compaction(ci.id)
            except NoSuchObjectException:  # the table was dropped, and its queue entries with it
                ms.abort_txn(txn_id)
                return
            if info.state != "working" or info.txn_id != txn_id:
                return  # recovered (reverted or rolled forward) by someone else meanwhile
            if info.publish_id is not None:
                recover(ms, info, self.config)  # published in part: complete it
                return
            try:
                discard_unpublished(info)
            except OSError:  # the storage failed too (what failed the compaction, often): the cleaner removes
                log.exception("could not remove what compaction %d wrote", ci.id)  # what is left, later
            ms.mark_failed(ci.id, message, txn_id)
        except AcidStreamError:
            # The metastore is out of reach: the txn stops being heartbeated, times out, and recovery
            # (any compactor's) reverts or completes the request.
            log.exception("could not record the failure of compaction %d", ci.id)

    def outcome(self, results: Sequence[BucketResult] = ()) -> Outcome:
        return Outcome(self.ms.get_compaction(self.ci.id), tuple(results))


class Worker:
    """Claims and runs compaction requests; ``run_jobs`` executes the bucket jobs (threads by default)."""

    def __init__(
        self,
        ms: MetastoreFacade,
        config: CompactorConfig | None = None,
        *,
        worker_id: str | None = None,
        run_jobs: JobRunner | None = None,
    ) -> None:
        self.ms = ms
        self.config = config or CompactorConfig()
        self.worker_id = worker_id or new_worker_id()
        self.run_jobs = run_jobs or threaded_runner(self.config.parallelism)

    def run_next(self, compaction_id: int | None = None) -> Outcome | None:
        """Claim the oldest initiated request (or ``compaction_id``, see :meth:`claim`) and run it; None when
        there is none (or another worker has ``compaction_id``)."""
        if compaction_id is None:
            ci = self.ms.find_next_compaction(self.worker_id)
        else:
            ci = self.claim(compaction_id)
        return None if ci is None else self.run(ci)

    def claim(self, compaction_id: int) -> CompactionInfo | None:
        """Claim request ``compaction_id``; None once it is not initiated or nothing is ahead of it that this
        worker can take (another worker has it, or it is done: the caller waits for it). A metastore that hands
        requests out in queue order only (Hive's ``find_next_compact2``) will not give it while older ones wait:
        those are claimed and run here first, oldest first, as Hive's own worker would run them; else, with no
        worker of Hive's running, the caller would wait for it without end."""
        wanted = compaction_id
        while True:
            ci = self.ms.find_next_compaction(self.worker_id, wanted)
            if ci is not None and ci.id == compaction_id:
                return ci
            if ci is not None:  # Hive's queue gave the next one (ahead of ours, or ours was taken meanwhile)
                log.info(
                    "compaction %d: first running compaction %d, ahead in the queue", compaction_id, ci.id
                )
                self.run(ci)
            initiated = [c.id for c in self.ms.show_compactions() if c.state == "initiated"]
            ahead = [i for i in initiated if i < compaction_id]
            if compaction_id not in initiated:
                return None
            if ci is None and (min(ahead) if ahead else compaction_id) == wanted:
                return None  # nothing ahead that this worker may take (Hive's pools): whoever may, will
            wanted = min(ahead) if ahead else compaction_id

    def run(self, ci: CompactionInfo) -> Outcome:
        """Run a claimed request to ready-for-cleaning, refused or failed; errors are recorded, not raised."""
        with Claimed(self.ms, ci, self.config) as claimed:
            results: tuple[BucketResult, ...] = ()
            try:
                plan = claimed.plan(self.run_jobs)
                if plan is not None:
                    results = tuple(self.run_jobs(plan.jobs))
                    claimed.publish(plan)
            except Exception as exc:
                claimed.fail(exc)
                results = ()
            return claimed.outcome(results)


def publish(
    ms: MetastoreFacade,
    ci: CompactionInfo,
    txn_id: int,
    target: Target,
    plan: PartitionPlan,
    meta: dict[str, str],
) -> None:
    """Steps 3 and 4: record the publication, rename the outputs into place, mark compacted, drop ``_tmp``.

    Where directories do not rename atomically (object stores), the outputs were written in place instead,
    under names with the compactor txn's visibility suffix (``base_N_vT``, as Hive 4 does): readers use them
    once ``mark_compacted`` commits txn T, and never see them half-written.
    """
    tmp = meta["tmp"]
    in_place = IN_PLACE in meta
    written = target.path if in_place else tmp
    outputs = finish_outputs(target.fs, written, plan.outputs)
    if not in_place:
        check_free(target.fs, target.path, outputs)
    files = describe_outputs(target.fs, written, outputs)  # for replicas, in the COMPACTED event
    if target.table.fsync:  # durable before the metastore records them, and renamed before the cleaner runs
        paths = [f"{written}/{name}/{f['path']}" for name in outputs for f in files[name]]
        sync_files(target.fs, paths, target.path)
    ms.begin_publish(ci.id, txn_id, {**meta, "outputs": outputs, "inputs": list(plan.inputs), "files": files})
    _pause("published")
    for name in [] if in_place else outputs:
        move_into_place(target.fs, tmp, target.path, [name])
        _pause("moved")
    if target.table.fsync:
        sync(target.fs, [target.path])
    try:
        ms.mark_compacted(ci.id, txn_id)
    except InvalidObjectException:
        if ms.get_compaction(ci.id).state == "working":
            raise
        # rolled forward by recovery while this worker was renaming: the same outcome
    discard(target.fs, tmp)


def _pause(stage: str) -> None:
    if stage in os.environ.get(PAUSE_ENV, "").split(","):
        print(f"acidstream-compactor-paused {stage}", file=sys.stderr, flush=True)
        threading.Event().wait()


def discard_unpublished(ci: CompactionInfo) -> None:
    """What a compaction that published nothing wrote: its ``_tmp`` and, written in place, its outputs."""
    location = ci.meta.get("location")
    if not location:
        return
    fs, path = table_filesystem(location)
    discard(fs, ci.meta.get("tmp"))
    if IN_PLACE in ci.meta and ci.txn_id is not None:
        discard_in_place(fs, path, ci.txn_id)


def recover(ms: MetastoreFacade, ci: CompactionInfo, config: CompactorConfig) -> str:
    """Finish a request whose worker is gone: revert it (removing ``_tmp``) if nothing was published, else
    complete the publication. Returns the request's new state."""
    location = ci.meta.get("location")
    tmp = ci.meta.get("tmp")
    fs, path = table_filesystem(location) if location else (None, None)
    if ci.publish_id is None:
        discard_unpublished(ci)
        return ms.revert_compaction(ci.id, "worker died before publishing its output", config.max_attempts)
    assert fs is not None and path is not None and tmp is not None
    if IN_PLACE not in ci.meta:
        move_into_place(fs, tmp, path, ci.meta.get("outputs", ()))
    with contextlib.suppress(InvalidObjectException):  # completed by its worker or another recovery meanwhile
        ms.mark_compacted(ci.id)
    discard(fs, tmp)
    return ms.get_compaction(ci.id).state


def recover_abandoned(ms: MetastoreFacade, config: CompactorConfig) -> list[tuple[int, str]]:
    """Recover every request whose worker is gone (Hive's ``revokeTimedoutWorkers``): (id, new state)."""
    out = []
    for ci in ms.find_abandoned_compactions():
        try:
            out.append((ci.id, recover(ms, ci, config)))
        except InvalidObjectException:
            continue  # another compactor recovered it first
    return out
