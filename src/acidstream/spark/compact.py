"""Compaction on a Spark cluster: one task per (partition, bucket), the driver claims the requests and commits.

The driver does what a worker does around the merge (claim, plan, heartbeat the compactor txns, publish or fail)
and Spark runs the bucket jobs (``acidstream.compactor.jobs``): a table too big for one machine compacts across
the cluster. A failed Spark job fails the requests whose jobs it held (nothing was published); ``acidstream
compactor run --spark`` uses the same runner.

Spark may run a bucket job twice at once (speculation) or again after losing an executor, so each task attempt
writes its files below a directory of its own beside the job's output directory
(``_acidstream_attempts/<output>.<attempt>``, hidden: :mod:`acidstream.acid.attempts`), and once the Spark job
is done the driver moves the files of the attempts Spark took to the job's output paths (in the request's
``_tmp`` directory, or in place) and deletes every attempt's directory: no other attempt's file is published.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from acidstream.acid.attempts import ATTEMPTS_DIR, output_attempt, remove_if_empty
from acidstream.compactor.config import CompactorConfig
from acidstream.compactor.jobs import BucketJob, BucketResult, run_bucket_job
from acidstream.compactor.plan import PartitionPlan
from acidstream.compactor.worker import Claimed, JobRunner, Outcome, Worker
from acidstream.spark.options import JobSettings, client, metastore_location, session_job
from acidstream.spark.task_write import attempt_name
from acidstream.storage import make_directories, table_filesystem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from acidstream.catalog import Metastore


@dataclass(frozen=True)
class ExecutorBucketJob:
    """A bucket job as a Spark task runs it: in a Python worker that knows only what the job carries, so the
    job's store settings are set first (picklable: Spark ships it to the executors)."""

    job: JobSettings

    def __call__(self, bucket_job: BucketJob) -> tuple[BucketResult, str]:
        """The job's result, its files below this attempt's own directories, and the attempt's name."""
        self.job.in_worker()
        own = attempt_name(0)
        staged = replace(
            bucket_job,
            insert_path=staged_output(bucket_job.insert_path, own),
            delete_path=None
            if bucket_job.delete_path is None
            else staged_output(bucket_job.delete_path, own),
        )
        return run_bucket_job(staged), own


def staged_output(path: str, attempt: str) -> str:
    """Where attempt ``attempt`` writes the file ``<directory>/<output>/<name>``:
    ``<directory>/_acidstream_attempts/<output>.<attempt>/<name>``."""
    directory, output, name = path.rsplit("/", 2)
    return f"{directory}/{ATTEMPTS_DIR}/{output_attempt(output, attempt)}/{name}"


def _publish(job: BucketJob, result: BucketResult, attempt: str) -> BucketResult:
    """Move the files of the attempt Spark took to the job's output paths; the result naming them there."""
    fs, _ = table_filesystem(job.location)
    moved = []
    for path in (job.insert_path, job.delete_path):
        if path is not None and staged_output(path, attempt) in result.files:
            make_directories(fs, path.rsplit("/", 1)[0])
            fs.move(staged_output(path, attempt), path)
            moved.append(path)
    return replace(result, files=tuple(moved))


def _remove_job_attempts(jobs: Sequence[BucketJob]) -> None:
    """Delete every attempt's directory of the jobs' outputs (those Spark did not take: killed, lost, losing
    copies), and the attempts' directory once empty."""
    outputs: dict[tuple[str, str], set[str]] = {}
    for job in jobs:
        for path in (job.insert_path, job.delete_path):
            if path is not None:
                directory, output, _ = path.rsplit("/", 2)
                outputs.setdefault((job.location, directory), set()).add(output)
    for (location, directory), names in outputs.items():
        fs, _ = table_filesystem(location)
        attempts = f"{directory}/{ATTEMPTS_DIR}"
        for info in fs.get_file_info(pafs.FileSelector(attempts, allow_not_found=True)):
            if info.base_name.split(".", 1)[0] in names:
                with contextlib.suppress(FileNotFoundError):
                    fs.delete_dir(info.path)
        remove_if_empty(fs, attempts)


def spark_runner(spark: SparkSession) -> JobRunner:
    """Run bucket jobs as the tasks of one Spark job (one partition of the RDD per job), with the session's
    store settings (:func:`session_job`, read now)."""
    task = ExecutorBucketJob(session_job(spark))

    def run(jobs: Sequence[BucketJob]) -> list[BucketResult]:
        if not jobs:
            return []
        rdd = spark.sparkContext.parallelize(list(jobs), len(jobs))
        try:
            ran: list[tuple[BucketResult, str]] = rdd.map(task).collect()
            return [_publish(job, *done) for job, done in zip(jobs, ran, strict=True)]
        finally:
            with contextlib.suppress(OSError):
                _remove_job_attempts(jobs)

    return run


def compact(
    spark: SparkSession,
    table: str,
    kind: str = "major",
    partition: str | Mapping[str, Any] | None = None,
    *,
    metastore: str | None = None,
    warehouse: str | None = None,
    config: CompactorConfig | None = None,
) -> list[Outcome]:
    """Compact ``table`` (``db.table``) now: one partition, or every partition of a partitioned table when
    ``partition`` is None. Requests a daemon's worker claimed first are waited for instead. Returns each
    request's outcome (``outcome.info.state``: ready for cleaning, refused or failed)."""
    options = {k: v for k, v in (("metastore", metastore), ("warehouse", warehouse)) if v is not None}
    ms = client(*metastore_location(options))
    handle = ms.table(table)
    targets: list[str | Mapping[str, Any] | None]
    if partition is None and handle.is_partitioned:
        targets = [p.name for p in ms.list_partitions(handle.full_name)]
    else:
        targets = [partition]
    requests = [ms.compact(handle.full_name, t, kind) for t in targets]
    return run_requests(ms, requests, spark_runner(spark), config or CompactorConfig())


def run_requests(
    ms: Metastore, requests: Sequence[int], run_jobs: JobRunner, config: CompactorConfig
) -> list[Outcome]:
    """Claim ``requests``, plan them, run all their bucket jobs together, then publish each."""
    worker = Worker(ms, config, run_jobs=run_jobs)  # runs the requests a queue hands out before ours
    outcomes: dict[int, Outcome] = {}
    with contextlib.ExitStack() as stack:
        claimed: list[Claimed] = []
        for cq in requests:
            ci = worker.claim(cq)
            if ci is None:
                outcomes[cq] = Outcome(ms.wait_for_compaction(cq))
            else:
                claimed.append(stack.enter_context(Claimed(ms, ci, config)))
        plans: list[tuple[Claimed, PartitionPlan]] = []
        for c in claimed:
            try:
                plan = c.plan(run_jobs)
            except Exception as exc:
                c.fail(exc)
                continue
            if plan is not None:
                plans.append((c, plan))
        jobs = [job for _, plan in plans for job in plan.jobs]
        try:
            results = run_jobs(jobs)
        except Exception as exc:
            for c, _ in plans:
                c.fail(exc)
            plans = []
            results = []
        offset = 0
        for c, plan in plans:
            mine = results[offset : offset + len(plan.jobs)]
            offset += len(plan.jobs)
            try:
                c.publish(plan)
            except Exception as exc:
                c.fail(exc)
            outcomes[c.ci.id] = c.outcome(mine)
        for c in claimed:
            outcomes.setdefault(c.ci.id, c.outcome())
    return [outcomes[cq] for cq in requests]
