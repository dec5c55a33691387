"""Work around pyarrow's ORC writer mis-encoding null structs nested in other columns.

Measured with pyarrow 26 (ORC C++ 2.2.2), confirmed by orc-core Java reading the file the same way: when a
struct that is *not* a top-level column (e.g. ``row.st``, ``array<struct>``) has null entries whose child
values are not null, the child streams are written misaligned and every later row of that struct reads back
wrong. Making each child null wherever its parent struct is null (Arrow allows either) avoids it.
"""

from __future__ import annotations

import pyarrow as pa


def has_struct(t: pa.DataType) -> bool:
    """Whether a struct occurs anywhere in ``t`` (only those types need :func:`push_down_nulls`)."""
    if pa.types.is_struct(t):
        return True
    if pa.types.is_map(t):
        return has_struct(t.key_type) or has_struct(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_struct(t.value_type)
    return False


def push_down_nulls(arr: pa.Array) -> pa.Array:
    """``arr`` with every struct's children null where the struct is null, recursively."""
    t = arr.type
    if not has_struct(t):
        return arr
    mask = arr.is_null() if arr.null_count else None
    if not pa.types.is_struct(t):
        offsets = pa.array(
            arr.offsets.to_numpy()
        )  # an unsliced copy: from_arrays rejects sliced offsets with a mask
    if pa.types.is_struct(t):
        children = [push_down_nulls(c) for c in arr.flatten()]  # flatten() ANDs the parent validity in
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(
            offsets, push_down_nulls(arr.keys), push_down_nulls(arr.items), type=t, mask=mask
        )
    values = push_down_nulls(arr.values)
    return type(arr).from_arrays(offsets, values, type=t, mask=mask)
