"""Run several iterators in threads and hand out their items in order: the scan's bucket readers, side by side.

A bucket reader spends most of its time in pyarrow decoding stripes with the GIL released, so on several cores
two buckets decode in about the time of one. The caller still sees the batches in plan order: bucket ``i``'s
batches all come before bucket ``i + 1``'s, exactly as a sequential read yields them. Memory stays bounded:
at most ``threads`` iterators run at once (the next starts only when the caller has finished with an earlier
one), each at most ``readahead`` items ahead of the caller.
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
    """Every item of ``sources[0]()``, then of ``sources[1]()``..., each source iterated in its own thread
    (each item produced inside ``section``), up to ``threads`` at once. An error a source raises is raised here, as it is, when
    the caller reaches that source's items. Closing the iterator early stops the threads and waits for them."""
    workers: list[tuple[threading.Thread, _Channel[T]]] = []

    def start(index: int) -> None:
        channel: _Channel[T] = _Channel(readahead)
        thread = threading.Thread(
            target=_produce,
            args=(sources[index], channel, section or ShortSwitchInterval(None)),
            name=f"acidstream-bucket-read-{index}",
            daemon=True,
        )
        thread.start()
        workers.append((thread, channel))

    try:
        for index in range(min(threads, len(sources))):
            start(index)
        for index in range(len(sources)):
            channel = workers[index][1]
            while True:
                item = channel.get()
                if item is _END:
                    break
                if isinstance(item, _Failed):
                    raise item.error
                yield cast(T, item)
            if index + threads < len(sources):
                start(index + threads)
    finally:
        for _, channel in workers:
            channel.cancel()
        for thread, _ in workers:
            thread.join()
