"""Refuse timestamps that pyarrow's ORC writer cannot encode for Java readers.

pyarrow 26's ORC adapter splits a ``timestamp[ns]`` value into seconds and nanoseconds with truncating
division, so a value before 1970 with a fractional second gets negative nanoseconds, which ORC C++ stores
in a form that orc-core Java reads as ``<invalid>`` and Hive's reader rejects ("nanos > 999999999 or < 0").
pyarrow reads its own encoding back, so the damage would only show in Hive; we fail loudly instead.
Whole-second values before 1970 and every value from 1970 on are encoded correctly (tested with orc-core).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_NANOS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def has_timestamp(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return True
    if pa.types.is_struct(t):
        return any(has_timestamp(f.type) for f in t)
    if pa.types.is_map(t):
        return has_timestamp(t.key_type) or has_timestamp(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_timestamp(t.value_type)
    return False


def check_writable(arr: pa.Array, name: str) -> None:
    """Raise ValueError if ``arr`` holds a pre-1970 timestamp with a fractional second (anywhere inside)."""
    t = arr.type
    if not has_timestamp(t):
        return
    if pa.types.is_timestamp(t):
        values = arr.cast(pa.int64()).fill_null(0).to_numpy()
        bad = (values < 0) & (values % _NANOS[t.unit] != 0)
        if bad.any():
            first = arr[int(np.argmax(bad))]
            raise ValueError(
                f"column {name}: timestamp {first} is before 1970 with a fractional second, which pyarrow's ORC "
                "writer encodes in a form Hive cannot read; round it to whole seconds"
            )
    elif pa.types.is_struct(t):
        for f, child in zip(t, arr.flatten(), strict=True):
            check_writable(child, f"{name}.{f.name}")
    elif pa.types.is_map(t):
        check_writable(arr.keys, f"{name}.key")
        check_writable(arr.items, f"{name}.value")
    else:
        check_writable(arr.flatten(), f"{name}[]")
