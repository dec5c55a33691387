"""How a commit's files are shared out among the encoding threads."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.orc import AcidWriter, WriterOptions
from acidstream.acid.orc.sharded import SHARD_MIN_ROWS_PER_FILE, encode_sharded, shard_count
from acidstream.acid.orc.writer import TakenEvents, encode_together
from acidstream.acid.types import Column, parse_type
from acidstream.runtime import ENCODE_THREADS

COLUMNS = [Column("id", parse_type("int"))]


def taken(tmp_path: Path, files: int, rows: int) -> list[tuple[AcidWriter, TakenEvents]]:
    items = []
    for i in range(files):
        writer = AcidWriter(
            pafs.LocalFileSystem(),
            str(tmp_path / f"f{files}_{rows}_{i}"),
            COLUMNS,
            options=WriterOptions(),
            side_file=False,
        )
        writer.insert(1, 536870912, pa.table({"id": pa.array(range(rows), pa.int32())}))
        events = writer.take_pending_events()
        assert events is not None
        items.append((writer, events))
    return items


def test_files_of_a_few_rows_encode_in_the_calling_thread_bigger_ones_side_by_side(tmp_path: Path) -> None:
    """Tiny files' encoding is mostly Python holding the GIL: a second thread would only take turns (and on a
    busy machine wait to be scheduled); the commit's result is the same either way."""
    tiny = taken(tmp_path, 50, 40)
    assert shard_count(tiny) == 1
    assert shard_count(taken(tmp_path, 4, SHARD_MIN_ROWS_PER_FILE)) == ENCODE_THREADS
    assert encode_sharded(tiny) == encode_together(tiny)
