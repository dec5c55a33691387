"""``python -m acidstream.spark.tokenwatch PID``: cancel the delegation tokens a Spark Python worker got for its
job once process ``PID`` has ended.

A planner (the Python worker that resolves a read's or write's options on the driver's machine) gets tokens the
job's executors use for as long as the application runs, but no Python code runs when a SparkSession stops: Spark
ends its Python workers then (its Python daemon sends them SIGHUP), and kills idle ones on its own schedule, so
neither the worker's exit nor ``atexit`` says when the job is over. ``PID`` is the worker's parent, Spark's
Python daemon, which lives as long as the application's SparkContext (or, without a daemon, the driver's JVM).
The worker pickles each token's cancellation (:func:`acidstream.spark.tokens.cancel_elsewhere`) to this
process's standard input; this process runs in a session of its own, so the signal that ends the workers does
not end it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

#: Seconds between two looks at the watched process.
POLL = 1.0
#: Seconds the cancellations sent just before the watched process ended have to arrive.
LAST_WORDS = 5.0


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (an identity that a later process reusing ``pid`` does not share), or None
    once it has ended (gone, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    except OSError:  # no /proc: alive is all that can be told
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "alive"
    return None if fields[0] in ("Z", "X") else fields[19]


def _read(stream: BinaryIO, pending: list[Callable[[], None]]) -> None:
    with contextlib.suppress(EOFError, pickle.UnpicklingError, OSError):
        while True:
            pending.append(pickle.load(stream))


def watch(pid: int, stream: BinaryIO) -> list[Callable[[], None]]:
    """Collect the cancellations pickled to ``stream`` until process ``pid`` ends; then run each (a server
    that cannot be reached then lets its token expire). The cancellations run."""
    born = start_time(pid)
    pending: list[Callable[[], None]] = []
    reader = threading.Thread(target=_read, args=(stream, pending), name="acidstream-tokenwatch", daemon=True)
    reader.start()
    while born is not None and start_time(pid) == born:
        time.sleep(POLL)
    reader.join(timeout=LAST_WORDS)
    ran = list(pending)
    for cancel in ran:
        with contextlib.suppress(Exception):
            cancel()
    return ran


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.stdin.buffer)
