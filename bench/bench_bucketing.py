"""Time ``bucket_numbers`` on a million rows: int, ~20-char string and (string, int) keys, both versions.

Run: ``python bench/bench_bucketing.py``; prints a markdown table (best of 5 runs, milliseconds). Both wall
time and this process's CPU time are shown: on a shared, loaded machine the CPU time is the stable number.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from _tuning import tuned
from acidstream.acid.bucketing import bucket_numbers
from acidstream.acid.types import HiveType, parse_type

ROWS = 1_000_000
BUCKETS = 32


def best_ms(run: Callable[[], object], repeat: int = 5) -> tuple[float, float]:
    """Best wall-clock and best CPU milliseconds over ``repeat`` runs after a warm-up."""
    run()
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall) * 1000, min(cpu) * 1000


def main() -> None:
    rng = np.random.default_rng(1)
    ints = pa.array(rng.integers(-(2**31), 2**31 - 1, ROWS, dtype=np.int64).astype(np.int32))
    lengths = rng.integers(16, 25, ROWS)
    letters = rng.integers(97, 123, int(lengths.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    strings = pa.StringArray.from_buffers(ROWS, pa.py_buffer(offsets), pa.py_buffer(letters.tobytes()))
    int_t, str_t = parse_type("int"), parse_type("string")
    cases: list[tuple[str, list[pa.Array], list[HiveType]]] = [
        ("1M int", [ints], [int_t]),
        ("1M string (16-24 chars)", [strings], [str_t]),
        ("1M (string, int)", [strings, ints], [str_t, int_t]),
    ]
    print(f"| key ({BUCKETS} buckets) | v2 wall (ms) | v2 CPU (ms) | v1 wall (ms) | v1 CPU (ms) |")
    print("|---|---:|---:|---:|---:|")
    for label, arrays, types in cases:
        v2 = best_ms(lambda a=arrays, t=types: bucket_numbers(a, t, BUCKETS, 2))
        v1 = best_ms(lambda a=arrays, t=types: bucket_numbers(a, t, BUCKETS, 1))
        print(f"| {label} | {v2[0]:.1f} | {v2[1]:.1f} | {v1[0]:.1f} | {v1[1]:.1f} |")


if __name__ == "__main__":
    tuned()
    main()
