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


def encode_sharded(items: Sequence[tuple[AcidWriter, TakenEvents]]) -> list[EncodedEvents]:
    """``encode_together(items)``, in the items' order, encoded in up to ``ENCODE_THREADS`` shards."""
    shards = _shards(items, ENCODE_THREADS)
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
