"""A Spark driver of its own for the cluster tests, run with the venv's Python: it reads a JSON job on stdin,
configures itself as a user's job would (the Spark configuration it is given, ``configure_stores`` for its own
process), runs the job on the cluster and prints what it saw as JSON on stdout.

Job keys: ``conf`` (Spark settings), ``stores`` (``configure_stores``'s arguments), ``options`` (the data
source's), ``table``, ``append`` (rows of the table's columns, written in ``slices`` tasks), ``read`` (read the
table back), ``explain`` (the read's and the write's plan strings), ``probe`` (each task's process facts).
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


def main() -> None:
    job = json.load(sys.stdin)
    from acidstream.spark import register
    from acidstream.spark.session import session
    from acidstream.storage import configure_stores

    configure_stores(**job.get("stores", {}))
    spark = session("acidstream-cluster-test", master=job["conf"]["spark.master"], extra_conf=job["conf"])
    register(spark)
    out: dict[str, Any] = {}
    try:
        if job.get("probe"):
            rows = spark.sparkContext.parallelize(range(4), 4).mapPartitions(task_facts).collect()
            out["tasks"] = [list(r) for r in rows]
            out["driver"] = [os.getpid(), os.getcwd()]
        options = job.get("options", {})
        if job.get("append") is not None:
            df = spark.createDataFrame(job["append"], job["schema"]).repartition(job.get("slices", 2))
            writer = df.write.format("acidstream").options(**options).mode("append")
            writer.save(job["table"])
        if job.get("read"):
            df = spark.read.format("acidstream").options(**options).load(job["table"])
            if job.get("explain"):
                out["explain"] = df._jdf.queryExecution().toString()
            out["rows"] = [list(r) for r in df.collect()]
    finally:
        spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
