"""A Spark driver of its own for the cluster tests, run with the venv's Python: it reads a JSON job on stdin,
configures itself as a user's job would (the Spark configuration it is given, ``configure_stores`` for its own
process), runs the job on the cluster and prints what it saw as JSON on stdout.

Job keys: ``conf`` (Spark settings), ``stores`` (``configure_stores``'s arguments), ``options`` (the data
source's), ``table``, ``append`` (rows of the table's columns, written in ``slices`` tasks), ``steps`` (Spark
merges, updates, deletes and compactions, in order, each answering its result), ``read`` (read the table
back), ``explain`` (the read's and the write's plan strings), ``probe`` (each task's process facts), ``stream``
(``{"input": dir, "checkpoint": dir}``: the JSON files in ``input``, one micro-batch per file, through the
exactly-once sink, until none is left), ``slow`` (the append's or the stream's task of partition 0 stalls on its
first attempt: :func:`slowed`), ``stall`` (a marker directory: the merge's and the compaction's writing task of
partition 0 stalls on its first attempt: :func:`stall_steps`), ``then`` (further jobs of these keys but
``conf``, ``stores`` and ``stall``, run after this one in the same session: one driver and one set of executors
for several checks; their answers in the answer's ``then``).

A step is ``{"merge": rows, "on": [...], ...merge's keyword arguments}``, ``{"update": condition, "set":
{...}}``, ``{"delete": condition}`` or ``{"compact": kind}``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def task_facts(_: Any) -> Any:
    """Where a task ran: its pid, working directory, and whether it sees the driver's AWS/acidstream variables."""
    import os

    leaked = sorted(k for k in os.environ if k.startswith(("AWS_", "ACIDSTREAM_")))
    yield (os.getpid(), os.getcwd(), ",".join(leaked))


def slowed(frame: Any, slow: dict[str, Any] | None) -> Any:
    """``frame`` whose task of Spark partition 0 stalls in each stage, the first attempt to get there (``slow``:
    ``{"marker": dir, "rows": n}``): after ``n`` rows it writes its Python worker's pid into
    ``marker``/``stalled-<stage>`` (for a test to kill it or its executor) and waits until another attempt of
    the task (a speculative copy, a retry, or the attempt of a stage run again) has passed the same row (a
    ``passed-<stage>`` file), then goes on, a losing attempt still writing; bounded, should none come."""
    if not slow:
        return frame
    from pyspark.sql import functions as F

    marker, stall_at = slow["marker"], slow["rows"]
    seen: dict[int, int] = {}

    def pass_through(value: Any) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None or context.partitionId() != 0:
            return value
        attempt = context.taskAttemptId()
        seen[attempt] = seen.get(attempt, 0) + 1
        if seen[attempt] == stall_at:
            stall(marker, context.stageId())
        return value

    first = frame.columns[0]
    udf = F.udf(pass_through, frame.schema[first].dataType)
    return frame.withColumn(first, udf(F.col(first)))


def stall(marker: str, stage: int) -> None:
    """The first attempt of a task to get here in ``stage`` writes its Python worker's pid into
    ``marker``/``stalled-<stage>`` and waits until another attempt gets here (and writes ``passed-<stage>``)."""
    import os
    import time

    stalled = os.path.join(marker, f"stalled-{stage}")
    passed = os.path.join(marker, f"passed-{stage}")
    try:
        first = os.open(stalled + ".tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:  # another attempt stalled here first
        open(passed, "w").close()
        return
    os.write(first, str(os.getpid()).encode())
    os.close(first)
    os.link(stalled + ".tmp", stalled)
    deadline = time.monotonic() + 120
    while not os.path.exists(passed) and time.monotonic() < deadline:
        time.sleep(0.2)


def stall_steps(marker: str) -> None:
    """The task of partition 0 of a Spark merge split by bucket and of a Spark compaction stalls once it has
    written its files, before it reports them, on its first attempt (:func:`stall`): their task classes,
    replaced on the driver by subclasses made here, which Spark ships to the executors by value."""
    import importlib
    import inspect

    from acidstream.spark.mutate import by_bucket

    compact = importlib.import_module("acidstream.spark.compact")  # the package's compact() hides the module

    def written(report: Any) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None and context.partitionId() == 0:
            stall(marker, context.stageId())
        return report

    def stalling(cls: type) -> type:
        def call(self: Any, arg: Any) -> Any:
            return written(cls.__call__(self, arg))

        def generate(self: Any, arg: Any) -> Any:
            for report in cls.__call__(self, arg):
                yield written(report)

        task = generate if inspect.isgeneratorfunction(cls.__call__) else call
        return type(f"Stalling{cls.__name__}", (cls,), {"__call__": task})

    by_bucket.BucketMergeStage = stalling(by_bucket.BucketMergeStage)
    compact.ExecutorBucketJob = stalling(compact.ExecutorBucketJob)


def run_step(spark: Any, job: dict[str, Any], step: dict[str, Any]) -> Any:
    """One mutation or compaction of the job's table, through acidstream's Spark entry points."""
    from acidstream.spark import compact, delete, merge, update

    location = {k: v for k, v in job.get("options", {}).items() if k in ("metastore", "warehouse")}
    step = dict(step)
    if "merge" in step:
        source = spark.createDataFrame(step.pop("merge"), job["schema"]).repartition(2)
        return merge(spark, job["table"], source, step.pop("on"), **step, **location)
    if "update" in step:
        return update(spark, job["table"], step["update"], step["set"], **location)
    if "delete" in step:
        return delete(spark, job["table"], step["delete"], **location)
    outcomes = compact(spark, job["table"], step["compact"], **location)
    return [o.info.state for o in outcomes]


def main() -> None:
    job = json.load(sys.stdin)
    from acidstream.spark import register
    from acidstream.spark.session import session
    from acidstream.storage import configure_stores

    configure_stores(**job.get("stores", {}))
    spark = session("acidstream-cluster-test", master=job["conf"]["spark.master"], extra_conf=job["conf"])
    register(spark)
    await_executors(spark, int(spark.conf.get("spark.cores.max")))  # one a core, each on its own worker
    if job.get("stall"):
        stall_steps(job["stall"])
    try:
        out = run(spark, job)
        if job.get("then"):
            out["then"] = [run(spark, part) for part in job["then"]]
    finally:
        spark.stop()
    print(json.dumps(out))


def await_executors(spark: Any, count: int, deadline: float = 300.0) -> None:
    """Wait until ``count`` executors have registered: Spark's ``minRegisteredResourcesRatio`` waits at most
    ``maxRegisteredResourcesWaitingTime`` (30 s), and a worker still releasing an earlier job's executor on a
    loaded machine can take longer, while a stalled task's speculative copy or retry needs the other executor."""
    import time

    tracker = spark.sparkContext._jsc.sc().statusTracker()
    end = time.monotonic() + deadline
    while len(tracker.getExecutorInfos()) - 1 < count:  # the driver is listed too
        if time.monotonic() > end:
            raise TimeoutError(f"{count} executors did not register within {deadline:.0f} s")
        time.sleep(0.2)


def probe(spark: Any, rounds: int = 10) -> list[list[Any]]:
    """Each task's facts (:func:`task_facts`), from rounds of four tasks until every executor has answered.
    Under ``spark.speculation`` an executor's first task, slow while its Python daemon starts, can lose to a
    copy on the other executor, so that one round's answers all come from one."""
    executors = int(spark.conf.get("spark.cores.max"))
    facts: list[list[Any]] = []
    for _ in range(rounds):
        facts += [
            list(r) for r in spark.sparkContext.parallelize(range(4), 4).mapPartitions(task_facts).collect()
        ]
        if len({cwd for _, cwd, _ in facts}) >= executors:
            break
    return facts


def run(spark: Any, job: dict[str, Any]) -> dict[str, Any]:
    """The job's work (a ``then`` part's, in the same session), and what it saw."""
    out: dict[str, Any] = {}
    if job.get("probe"):
        out["tasks"] = probe(spark)
        out["driver"] = [os.getpid(), os.getcwd()]
    options = job.get("options", {})
    if job.get("append") is not None:
        df = spark.createDataFrame(job["append"], job["schema"]).repartition(job.get("slices", 2))
        df = slowed(df, job.get("slow"))
        writer = df.write.format("acidstream").options(**options).mode("append")
        writer.save(job["table"])
    if job.get("stream"):
        stream = job["stream"]
        source = spark.readStream.schema(job["schema"]).option("maxFilesPerTrigger", 1)
        frame = slowed(source.json(stream["input"]).repartition(3), job.get("slow"))
        writer = frame.writeStream.format("acidstream").options(**options)
        query = writer.option("checkpointLocation", stream["checkpoint"]).trigger(availableNow=True)
        query.start(job["table"]).awaitTermination()
    for step in job.get("steps", []):
        out.setdefault("steps", []).append(run_step(spark, job, step))
    if job.get("read"):
        df = spark.read.format("acidstream").options(**options).load(job["table"])
        if job.get("explain"):
            out["explain"] = df._jdf.queryExecution().toString()
        out["rows"] = [list(r) for r in df.collect()]
    return out


if __name__ == "__main__":
    main()
