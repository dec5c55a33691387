"""Runs of equal adjacent values: how grouped rows are cut into per-partition, per-bucket or per-operation calls."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def runs(values: npt.NDArray[np.generic]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of equal adjacent values, in order (none for an empty array)."""
    if not len(values):
        return []
    starts = np.concatenate([[0], np.flatnonzero(values[1:] != values[:-1]) + 1, [len(values)]])
    return list(zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True))
