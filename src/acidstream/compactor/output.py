"""One compaction output file, written from merged events in stripes encoded while the merge goes on.

Encoding (pyarrow, GIL released) is most of a compaction's work, and a bucket's merge (reading, delete
filtering: mostly Python and small pyarrow calls) the rest. Done one after the other in each bucket job, two
cores would idle whenever fewer bucket jobs than cores remain (5 buckets on 2 cores: a third of the time).
So the merged events are cut into stripes (``CompactorConfig.stripe_bytes`` of Arrow data: about 250k rows of a
narrow table, a few MiB encoded, several per bucket of a million rows), each encoded by an executor shared by the
worker's jobs while the job merges the next one (``worker.SpareCores``: only while a core would idle, else in
the job's thread); the stripes are appended in order, and the file gets one tail at the end (no intermediate
footers: nobody reads it before it is published).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.orc import AcidWriter, EncodedEvents, WriterOptions
from acidstream.acid.types import Column
from acidstream.errors import StreamingIOFailure

#: Stripes of one file waiting for their encoding: bounds a job's memory to a few stripes.
IN_FLIGHT = 2


@dataclass(frozen=True)
class Written:
    events: int
    bytes: int
    path: str | None  # None: no event, no file


def write_output(
    fs: pafs.FileSystem,
    path: str,
    columns: Sequence[Column],
    options: WriterOptions,
    batches: Iterator[pa.RecordBatch],
    stripe_bytes: int,
    encoder: Executor | None = None,
) -> Written:
    """Events (sorted) into a new file at ``path``, created with the first event; stripes encoded in
    ``encoder`` (in this thread without one). A failure removes the partial file (the compaction's ``_tmp``
    directory, discarded with it, would anyway)."""
    writer: AcidWriter | None = None
    waiting: deque[Future[EncodedEvents]] = deque()
    stripe: list[pa.RecordBatch] = []
    size = events = 0

    def cut(writer: AcidWriter) -> None:
        nonlocal size
        writer.write_events(pa.Table.from_batches(stripe))  # validates (sorted keys, operations)
        stripe.clear()
        size = 0
        taken = writer.take_pending_events()
        assert taken is not None
        if encoder is None:
            writer.append_encoded(writer.encode_events(taken))
            return
        waiting.append(encoder.submit(writer.encode_events, taken))
        while len(waiting) > IN_FLIGHT:
            writer.append_encoded(waiting.popleft().result())

    try:
        for batch in batches:
            if writer is None:
                writer = AcidWriter(fs, path, columns, options=options, side_file=False)
            stripe.append(batch)
            size += batch.nbytes
            events += batch.num_rows
            if size >= stripe_bytes:
                cut(writer)
        if writer is None:
            return Written(0, 0, None)
        if stripe:
            cut(writer)
        while waiting:
            writer.append_encoded(waiting.popleft().result())
        writer.close()
    except BaseException:
        for future in waiting:  # let no encoding outlive the job, nor the file stay open
            future.cancel()
        if writer is not None:
            with contextlib.suppress(StreamingIOFailure):
                writer.abort_close()
        raise
    return Written(events, writer.bytes_written, path)
