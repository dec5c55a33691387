"""``--busy N``: N CPU-bound processes running beside both sides of a benchmark, as a Spark executor's other tasks
or a shared machine's other work would, so that a figure shows the speed users see when no core sits idle.

The burners spin on pure Python arithmetic (no I/O, no syscalls), at the default priority, started before the
first round and stopped after the last; every case of every round runs beside the same ones.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import multiprocessing
import os
import time
from collections.abc import Iterator

from acidstream.runtime import die_with_parent


def add_busy_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--busy", type=int, default=0, metavar="N", help="run N CPU-bound processes beside every case"
    )


def _burn() -> None:
    die_with_parent()
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


@contextlib.contextmanager
def busy(n: int) -> Iterator[None]:
    """N burners for the duration of the block (none for 0)."""
    procs = [multiprocessing.get_context("spawn").Process(target=_burn, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join()


def load_note(busy_n: int) -> str:
    """The machine's load average now, and the burners, for a result's header line."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}), {busy_n} CPU-bound processes beside"


def run_queue_seconds() -> float:
    """Seconds this process's live threads have waited runnable for a core (``/proc/.../schedstat``)."""
    total = 0
    for path in glob.glob("/proc/self/task/*/schedstat"):
        try:
            with open(path) as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended meanwhile
    return total / 1e9


class Clocks:
    """Wall, CPU (all threads) and run-queue seconds from its creation to :meth:`read`: where a timed part's
    time went beyond its own work (waiting for a core, or for I/O and locks: wall - CPU - run queue)."""

    def __init__(self) -> None:
        self._wall, self._cpu, self._queue = time.perf_counter(), time.process_time(), run_queue_seconds()

    def read(self) -> dict[str, float]:
        return {
            "wall_s": time.perf_counter() - self._wall,
            "cpu_s": time.process_time() - self._cpu,
            "run_queue_s": run_queue_seconds() - self._queue,
        }
