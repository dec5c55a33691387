"""Run several iterators in threads and hand out their items in order: the parts of a scan's buckets, side by side.

A bucket reader spends most of its time in pyarrow decoding stripes with the GIL released, so on several cores
two parts decode in about the time of one. The caller still sees the batches in plan order: part ``i``'s
batches all come before part ``i + 1``'s, exactly as a sequential read yields them. Memory stays bounded:
at most ``threads`` iterators run at once, at most ``2 * threads`` are started ahead of the one the caller is
on, and each is at most ``readahead`` items ahead of the caller.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from acidstream.runtime import ShortSwitchInterval, each_in

T = TypeVar("T")


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_END = object()


class _Channel(Generic[T]):
    """A bounded hand-over from one producer thread to the consumer; ``cancel`` frees a waiting producer."""

    def __init__(self, capacity: int) -> None:
        self._items: deque[object] = deque()
        self._capacity = capacity
        self._cond = threading.Condition()
        self._cancelled = False

    def put(self, item: object, *, last: bool = False) -> bool:
        """False once cancelled (the producer stops). ``last`` items (end, failure) never wait for room."""
        with self._cond:
            while not last and len(self._items) >= self._capacity and not self._cancelled:
                self._cond.wait()
            if self._cancelled:
                return False
            self._items.append(item)
            self._cond.notify_all()
            return True

    def get(self) -> object:
        with self._cond:
            while not self._items:
                self._cond.wait()
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def cancel(self) -> None:
        with self._cond:
            self._cancelled = True
            self._items.clear()
            self._cond.notify_all()


def _produce(make: Callable[[], Iterator[T]], channel: _Channel[T], section: ShortSwitchInterval) -> None:
    items = make()
    try:
        for item in each_in(section, items):  # in the section while it works, not while it waits for room
            if not channel.put(item):
                return
        channel.put(_END, last=True)
    except BaseException as exc:  # handed to the consumer, which raises it as its own
        channel.put(_Failed(exc), last=True)
    finally:
        close = getattr(items, "close", None)
        if close is not None:  # a cancelled source's open files are closed by its own thread, now
            close()


def in_order(
    sources: Sequence[Callable[[], Iterator[T]]],
    threads: int,
    readahead: int = 2,
    section: ShortSwitchInterval | None = None,
) -> Iterator[T]:
    """Every item of ``sources[0]()``, then of ``sources[1]()``..., the sources iterated by ``threads`` worker
    threads (each item produced inside ``section``). A worker takes the next source as soon as it has handed
    over the last item of its previous one, so short sources keep every worker busy while the caller is still on
    an earlier one, up to ``2 * threads`` sources ahead of it (memory: that many times ``readahead`` items).
    The workers live as long as the iteration: what a worker's allocator holds is reused by its next source. An
    error a source raises is raised here, as it is, when the caller reaches that source's items. Closing the
    iterator early stops the workers and waits for them."""
    window = 2 * threads
    cond = threading.Condition()
    channels: list[_Channel[T]] = []
    reached = 0
    closed = False

    def work() -> None:
        while True:
            with cond:
                while not closed and len(channels) < len(sources) and len(channels) >= reached + window:
                    cond.wait()
                if closed or len(channels) == len(sources):
                    return
                index = len(channels)
                channel: _Channel[T] = _Channel(readahead)
                channels.append(channel)
                cond.notify_all()
            _produce(sources[index], channel, section or ShortSwitchInterval(None))

    workers = [
        threading.Thread(target=work, name=f"acidstream-bucket-read-{i}", daemon=True)
        for i in range(min(threads, len(sources)))
    ]
    try:
        for worker in workers:
            worker.start()
        for index in range(len(sources)):
            with cond:
                reached = index
                cond.notify_all()
                while len(channels) <= index:
                    cond.wait()
                channel = channels[index]
            while True:
                item = channel.get()
                if item is _END:
                    break
                if isinstance(item, _Failed):
                    raise item.error
                yield cast(T, item)
    finally:
        with cond:
            closed = True
            cond.notify_all()
            for channel in channels:
                channel.cancel()
        for worker in workers:
            if worker.ident is not None:
                worker.join()
