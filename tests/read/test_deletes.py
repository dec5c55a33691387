"""DeleteSet against a plain set of keys: several delete files (overlapping, duplicate keys, write ids valid or
not), insert batches whose rowIds are runs, gaps or shuffles, one or many (write id, bucket) pairs."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream.acid.codec import BucketCodec
from acidstream.acid.orc import AcidWriter, WriterOptions
from acidstream.acid.types import parse_columns
from acidstream.acid.writeids import ValidWriteIdList
from acidstream.read.deletes import DeleteSet
from acidstream.read.planning import FileSlice

COLUMNS = parse_columns("id int")
BUCKETS = [BucketCodec.V1.encode(0), BucketCodec.V1.encode(0, 1)]  # same writer, statements 0 and 1
_dirs = itertools.count()

key_st = st.tuples(st.integers(1, 3), st.sampled_from(BUCKETS), st.integers(0, 40))
files_st = st.lists(st.tuples(st.integers(4, 6), st.lists(key_st, max_size=15)), max_size=4)
batch_st = st.lists(key_st, min_size=1, max_size=60)


def write_file(path: Path, write_id: int, keys: list[tuple[int, int, int]]) -> FileSlice:
    writer = AcidWriter(pafs.LocalFileSystem(), str(path), COLUMNS, options=WriterOptions(), side_file=False)
    ordered = sorted(set(keys))
    writer.delete(
        write_id,
        pa.table(
            {
                "originalTransaction": pa.array([k[0] for k in ordered], pa.int64()),
                "bucket": pa.array([k[1] for k in ordered], pa.int32()),
                "rowId": pa.array([k[2] for k in ordered], pa.int64()),
            }
        ),
    )
    writer.close()
    return FileSlice(str(path), path.stat().st_size, 0, write_id, write_id, None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=files_st, batch=batch_st, run=st.booleans())
def test_alive_matches_a_set_model(
    tmp_path: Path,
    files: list[tuple[int, list[tuple[int, int, int]]]],
    batch: list[tuple[int, int, int]],
    run: bool,
) -> None:
    write_ids = ValidWriteIdList(6, aborted_ids=(5,), table="db.t")  # deletes of write id 5 never apply
    root = tmp_path / str(next(_dirs))
    slices, applied = [], set()
    for i, (write_id, keys) in enumerate(files):
        if not keys:
            continue
        slices.append(write_file(root / f"d{i}" / "bucket_00000", write_id, keys))
        if write_ids.is_write_id_valid(write_id):
            applied |= set(keys)
    if run:  # one write id of one writer with consecutive rowIds: the common streaming shape
        o, b, r0 = batch[0]
        batch = [(o, b, r0 + i) for i in range(len(batch))]
    deletes = DeleteSet.load(pafs.LocalFileSystem(), slices, write_ids)
    if deletes is None:
        assert not applied
        return
    original, bucket, row_id = (
        np.array([k[i] for k in batch], dtype=t) for i, t in enumerate((np.int64, np.int32, np.int64))
    )
    alive = deletes.alive(original, bucket, row_id)
    expected = [k not in applied for k in batch]
    assert (alive.tolist() if alive is not None else [True] * len(batch)) == expected
    for o, _ in deletes.groups:
        assert deletes.may_hit(o, o)
    assert not deletes.may_hit(7, 9)
