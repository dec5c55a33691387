"""Peak memory of the current process, as the benchmarks report it."""

from __future__ import annotations

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
