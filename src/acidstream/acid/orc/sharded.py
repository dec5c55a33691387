"""Encode the pending events of many files side by side: shards of about equal rows, one per encoding thread.

pyarrow releases the GIL while it encodes, so the shards handed to the encode pool (``runtime.encode_pool``) run
beside the one the calling thread takes; a shard no worker has started yet runs in the calling thread too, from
the back of the queue (it would only wait). A streaming commit flushes its batch's files this way, and a
mutation coordinator closes its groups' files so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import pyarrow as pa

from acidstream.acid.orc.stripes import EncodedEvents
from acidstream.acid.orc.writer import AcidWriter, TakenEvents, encode_together
from acidstream.runtime import ENCODE_THREADS, completed_future, encode_pool

#: Below this many rows a file on average, encoding is mostly Python (splicing, per-file headers) holding the
#: GIL: a second thread would only take turns with the first (and on a busy machine wait for it to be
#: scheduled), so such commits encode in the calling thread. 50 partitions x 5 buckets of 40 rows: 12% less
#: CPU in one thread than in two.
SHARD_MIN_ROWS_PER_FILE = 1024


def encode_sharded(items: Sequence[tuple[AcidWriter, TakenEvents]]) -> list[EncodedEvents]:
    """``encode_together(items)``, in the items' order, encoded in up to ``ENCODE_THREADS`` shards (one for
    files of a few rows each, see :data:`SHARD_MIN_ROWS_PER_FILE`)."""
    shards = _shards(items, shard_count(items))
    encodings = [
        _Encoding(partial(encode_together, [items[i] for i in shard]), in_pool=len(shards) > 1)
        for shard in shards
    ]
    for encoding in reversed(encodings):
        encoding.run_here_unless_started()
    encoded: dict[int, EncodedEvents] = {}
    for shard, encoding in zip(shards, encodings, strict=True):
        encoded.update(zip(shard, encoding.result(), strict=True))
    return [encoded[i] for i in range(len(items))]


class _Encoding:
    """One encode, in the encode pool or done at once; the thread that needs it takes it back if no worker has
    started it."""

    __slots__ = ("_encode", "_future")

    def __init__(self, encode: Callable[[], list[EncodedEvents]], *, in_pool: bool) -> None:
        self._encode = encode
        self._future = encode_pool().submit(encode) if in_pool else completed_future(encode)

    def run_here_unless_started(self) -> None:
        if self._future.cancel():
            self._future = completed_future(self._encode)

    def result(self) -> list[EncodedEvents]:
        return self._future.result()


def shard_count(items: Sequence[tuple[AcidWriter, TakenEvents]]) -> int:
    """``ENCODE_THREADS``, or 1 for files of fewer than ``SHARD_MIN_ROWS_PER_FILE`` rows on average."""
    rows = sum(_rows(taken) for _, taken in items)
    return ENCODE_THREADS if rows >= SHARD_MIN_ROWS_PER_FILE * len(items) else 1


def _shards(items: Sequence[tuple[AcidWriter, TakenEvents]], n: int) -> list[list[int]]:
    """At most ``n`` shards (item indexes) of about equal rows (largest first into the emptiest), each in the
    given order."""
    bins: list[list[int]] = [[] for _ in range(min(n, len(items)))]
    load = [0] * len(bins)
    for i in sorted(range(len(items)), key=lambda i: -_rows(items[i][1])):
        emptiest = load.index(min(load))
        bins[emptiest].append(i)
        load[emptiest] += _rows(items[i][1])
    return [sorted(b) for b in bins]


def _rows(taken: TakenEvents) -> int:
    return taken.num_rows if isinstance(taken, pa.Table) else taken.rows.num_rows
