"""A bootstrap dump's files copied in parallel as a Spark job (``acidstream repl dump --spark``).

One task per group of files, balanced by bytes; each executor reads the source through pyarrow.fs and writes
the dump's blob. Incremental replication stays in one process: its events are small and ordered.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from acidstream.repl.copy import LiveSource
from acidstream.repl.dump import FileCopyJob, copy_prefix

#: Files per task at most; fewer when they are large (tasks of roughly equal bytes).
MAX_FILES_PER_TASK = 64


def _copy_all(jobs: Iterator[tuple[str, str, int]]) -> Iterator[int]:
    live = LiveSource()
    yield sum(copy_prefix(live, source, destination, length) for source, destination, length in jobs)


def spark_file_copier(spark: Any, parallelism: int | None = None) -> FileCopyJob:
    """A :data:`FileCopyJob` that copies on ``spark``'s executors."""

    def run(jobs: Sequence[tuple[str, str, int]]) -> int:
        if not jobs:
            return 0
        slots = parallelism or spark.sparkContext.defaultParallelism
        tasks = max(1, min(len(jobs), max(slots, len(jobs) // MAX_FILES_PER_TASK)))
        ordered = sorted(jobs, key=lambda j: -j[2])
        bins: list[list[tuple[str, str, int]]] = [[] for _ in range(tasks)]
        loads = [0] * tasks
        for job in ordered:  # largest first into the lightest task
            i = loads.index(min(loads))
            bins[i].append(job)
            loads[i] += job[2]
        rdd = spark.sparkContext.parallelize(bins, tasks).flatMap(lambda b: b)
        return int(sum(rdd.mapPartitions(_copy_all).collect()))

    return run
