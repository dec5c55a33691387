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


def tree_peak_rss_mib() -> float:
    """Sum of the peak RSS of this process and every descendant still running (a JVM and its Python workers):
    an upper bound of the tree's peak, since pages shared between forked workers count in each."""
    parents: dict[int, int] = {}
    peaks: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        parents[int(entry)] = int(fields.get("PPid", "0").strip())
        if "VmHWM" in fields:
            peaks[int(entry)] = int(fields["VmHWM"].split()[0]) / 1024
    tree = {os.getpid()}
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    return sum(peaks.get(pid, 0.0) for pid in tree)
