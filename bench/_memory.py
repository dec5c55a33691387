"""Peak memory of the current process, as the benchmarks report it."""

from __future__ import annotations

import os
import resource


def peak_rss_mib() -> float:
    """This process's peak RSS. Linux's ru_maxrss carries the parent's peak over fork+exec, VmHWM does not."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _tree(root: int | None = None) -> dict[int, dict[str, str]]:
    """/proc status fields of process ``root`` (default: this one) and every descendant still running."""
    parents: dict[int, int] = {}
    fields: dict[int, dict[str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                fields[int(entry)] = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        parents[int(entry)] = int(fields[int(entry)].get("PPid", "0").strip())
    tree = {os.getpid() if root is None else root}
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    return {pid: fields[pid] for pid in tree if pid in fields}


def tree_peak_rss_mib() -> float:
    """Sum of the peak RSS of this process and every descendant still running (a JVM and its Python workers):
    an upper bound of the tree's peak, since pages shared between forked workers count in each."""
    return sum(int(f["VmHWM"].split()[0]) / 1024 for f in _tree().values() if "VmHWM" in f)


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU time (user + system) used so far by process ``root`` (default: this one) and every descendant still
    running: the work of a Spark job spread over a JVM and Python workers, which the wall time of a busy machine
    hides."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / ticks


def process_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by process ``pid`` and its children that ended and were waited for:
    a fork server and the merge workers it forked."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime
