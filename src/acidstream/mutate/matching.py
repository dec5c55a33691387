"""Matching a change set with the target's rows by key, and handing the resulting mutations to a coordinator:
the steps a merge shares whether it runs in one process (:mod:`acidstream.mutate.merge`) or split by bucket
(:mod:`acidstream.mutate.bucket_merge`: forked workers, Spark tasks)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.runs import runs
from acidstream.mutate.apply import apply_mutations
from acidstream.mutate.changes import PART, PartitionValues, duplicate_key, duplicate_match
from acidstream.mutate.coordinator import MutatorCoordinator

#: Told each step of a mutation as it starts ("reading db.t", "writing ...", "committing"), for a progress display.
Progress = Callable[[str], None]


def partition_coded(
    pairs: Iterable[tuple[PartitionValues, pa.RecordBatch]], schema: pa.Schema
) -> tuple[pa.Table, list[PartitionValues]]:
    """Batches tagged with their partition's values as one table with ``__part``: the index of each row's
    partition in the returned list (what :class:`Changes` takes)."""
    parts: dict[PartitionValues, int] = {}
    batches = []
    for values, batch in pairs:
        code = parts.setdefault(values, len(parts))
        batches.append(batch.append_column(PART, pa.array(np.full(batch.num_rows, code, dtype=np.int32))))
    return pa.Table.from_batches(batches, schema=schema.append(pa.field(PART, pa.int32()))), list(parts)


def write_changes(
    coordinator: MutatorCoordinator,
    pieces: Sequence[pa.Table],
    parts: list[PartitionValues],
    progress: Progress | None = None,
) -> None:
    """Mutations (:class:`Changes`' pieces, ``__part`` codes into ``parts``) through ``coordinator``,
    partition by partition, each partition's in the Mutation API's order."""
    if not pieces:
        return
    schema = pieces[0].schema
    mutations = pa.concat_tables([p.cast(schema) for p in pieces])
    codes = mutations.column(PART).to_numpy()
    order = np.argsort(codes, kind="stable")
    mutations, codes = mutations.take(pa.array(order)).drop_columns([PART]), codes[order]
    for start, end in runs(codes):
        if progress is not None:
            progress(f"writing changes: {start:,} of {len(codes):,}")
        apply_mutations(coordinator, parts[int(codes[start])], mutations.slice(start, end - start))


def match_keys(
    target: pa.Table, source: pa.Table, on: Sequence[str]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(target index, source index) of every matching pair, by target index; null keys never match. A key
    held by two source rows is an error naming the rows and the key, whether it matches a target row or not
    (a key with a null part is no key: such rows match nothing)."""
    keys = [k.lower() for k in on]
    if len(keys) == 1:
        return _match_one(target.column(keys[0]), source.column(keys[0]), keys[0])

    def keyed(table: pa.Table, index: str) -> pa.Table:
        t = pa.table({**{k: table.column(k) for k in keys}, index: pa.array(np.arange(table.num_rows))})
        valid = None
        for k in keys:
            ok = pc.is_valid(t.column(k))
            valid = ok if valid is None else pc.and_(valid, ok)
        return t.filter(valid) if valid is not None else t

    keyed_source = keyed(source, "__s")
    joined = keyed(target, "__t").join(keyed_source, keys=keys, join_type="inner", use_threads=True)
    t_idx = joined.column("__t").to_numpy()
    s_idx = joined.column("__s").to_numpy()
    counts = np.bincount(t_idx, minlength=target.num_rows) if len(t_idx) else np.zeros(0, dtype=np.int64)
    if len(counts) and counts.max() > 1:
        row = int(np.argmax(counts > 1))
        rows = sorted(s_idx[t_idx == row].tolist())[:2]
        key = {k: target.column(k)[row].as_py() for k in keys}
        raise duplicate_match(f"source rows {rows[0]} and {rows[1]}", key)
    grouped = keyed_source.group_by(keys).aggregate([("__s", "list"), ("__s", "count")])
    repeated = grouped.filter(pc.greater(grouped.column("__s_count"), 1))
    if repeated.num_rows:
        first = min(repeated.to_pylist(), key=lambda g: min(g["__s_list"]))
        rows = sorted(first["__s_list"])[:2]
        raise duplicate_key(f"source rows {rows[0]} and {rows[1]}", {k: first[k] for k in keys})
    order = np.argsort(t_idx, kind="stable")
    return t_idx[order], s_idx[order]


def _match_one(
    target: pa.ChunkedArray, source: pa.ChunkedArray, name: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """:func:`match_keys` on one key column: a hash lookup of the target's keys in the source's (the usual change
    set is the small side), without the cost of starting a join engine."""
    position = pc.index_in(target, value_set=source.combine_chunks(), skip_nulls=True)
    t_idx = np.flatnonzero(pc.is_valid(position).to_numpy(zero_copy_only=False))
    s_idx = pc.drop_null(position).to_numpy().astype(np.int64)
    counts = pc.value_counts(pc.drop_null(source))
    repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(repeated):
        hit = pc.is_in(target.take(pa.array(t_idx)), value_set=repeated).to_numpy(zero_copy_only=False)
        matched = hit.any()
        value = target[int(t_idx[np.argmax(hit)])] if matched else repeated[0]
        rows = np.flatnonzero(pc.equal(source, value).to_numpy(zero_copy_only=False))[:2].tolist()
        refusal = duplicate_match if matched else duplicate_key
        raise refusal(f"source rows {rows[0]} and {rows[1]}", {name: value.as_py()})
    return t_idx.astype(np.int64), s_idx


def rows_at(table: pa.Table, ascending: npt.NDArray[np.int64]) -> pa.Table:
    """``table.take(ascending)`` batch by batch: a take from a table of many chunks (a scan's batches) would
    first concatenate every column whole, costing more than the rows taken."""
    batches = table.to_batches()
    ends = np.cumsum([b.num_rows for b in batches])
    stops = np.searchsorted(ascending, ends)
    taken, start = [], 0
    for batch, end, stop in zip(batches, ends.tolist(), stops.tolist(), strict=True):
        if stop > start:
            taken.append(batch.take(pa.array(ascending[start:stop] - (end - batch.num_rows))))
        start = stop
    return pa.Table.from_batches(taken, schema=table.schema)
