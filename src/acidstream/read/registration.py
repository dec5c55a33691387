"""A scan's registration as a snapshot reader, held for as long as it may read files it listed.

The compaction cleaner deletes the directories a compaction replaced only once every reader registered before
the compaction's output moved into place is gone (see ``metastore/sql/readers.py``). A held registration is
heartbeated by one background thread per metastore client; a *detached* one (a Spark scan, whose reads happen
in other processes) lives on as long as its readers heartbeat it, then expires.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, TypeVar

from acidstream.acid.writeids import ValidTxnList
from acidstream.metastore.models import ReaderRegistration

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)
T = TypeVar("T")


class _KeepAlive:
    """Heartbeats the held registrations of one metastore client every third of their lease."""

    def __init__(self, ms: MetastoreFacade) -> None:
        self._ms = weakref.ref(ms)
        self._interval = max(ms.reader_lease / 3, 0.05)
        self._ids: set[int] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, reader_id: int) -> None:
        with self._lock:
            self._ids.add(reader_id)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="acidstream-reader-heartbeat", daemon=True
                )
                self._thread.start()

    def drop(self, reader_id: int) -> None:
        with self._lock:
            self._ids.discard(reader_id)

    def _run(self) -> None:
        while not self._wake.wait(self._interval):
            with self._lock:
                ids = sorted(self._ids)
                if not ids:
                    self._thread = None
                    return
            ms = self._ms()
            if ms is None:
                return
            try:
                expired = ms.heartbeat_readers(ids)
            except Exception:  # a transient metastore error must not end the heartbeats
                log.exception("reader heartbeat failed; retrying in %.1f s", self._interval)
                continue
            if expired:
                log.warning("reader registrations %s expired before their scans ended", expired)
            del ms


_keepalives: weakref.WeakKeyDictionary[MetastoreFacade, _KeepAlive] = weakref.WeakKeyDictionary()
_keepalives_lock = threading.Lock()


def _keepalive(ms: MetastoreFacade) -> _KeepAlive:
    with _keepalives_lock:
        k = _keepalives.get(ms)
        if k is None:
            k = _keepalives[ms] = _KeepAlive(ms)
        return k


def _unregister(ms_ref: weakref.ref[MetastoreFacade], reader_id: int) -> None:
    ms = ms_ref()
    if ms is None:
        return
    _keepalive(ms).drop(reader_id)
    with contextlib.suppress(Exception):  # at exit or after the client closed: the registration expires
        ms.unregister_reader(reader_id)


class ScanRegistration:
    """Registers ``table_name``'s reader and takes its snapshot (one metastore round trip); held until
    :meth:`release`, :meth:`detach` or garbage collection."""

    def __init__(
        self,
        ms: MetastoreFacade,
        table_name: str,
        agent_info: str | None = None,
        *,
        snapshot: ValidTxnList | None = None,
    ) -> None:
        self._ms = ms
        self._table_name = table_name
        self.registration: ReaderRegistration = ms.register_reader(
            table_name, agent_info=agent_info, snapshot=snapshot
        )
        _keepalive(ms).hold(self.reader_id)
        self._finalizer = weakref.finalize(self, _unregister, weakref.ref(ms), self.reader_id)

    @property
    def reader_id(self) -> int:
        return self.registration.reader_id

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def release(self) -> None:
        """The scan reads no more of what it listed: the cleaner need not wait for it (idempotent)."""
        self._finalizer()

    def detach(self, lease: float | None = None) -> None:
        """Stop heartbeating here and leave the registration to whoever reads the listed files: it expires
        once they stop calling ``Metastore.heartbeat_readers`` for longer than its lease (``lease`` seconds
        from now on, if given: readers that heartbeat rarely or never need a longer one)."""
        if self._finalizer.detach() is not None:
            _keepalive(self._ms).drop(self.reader_id)
            if lease is not None:
                self._ms.heartbeat_readers([self.reader_id], lease=lease)

    def ignored_outputs(self, partitions: Collection[str]) -> dict[str, frozenset[str]]:
        """Per listed partition ("" for an unpartitioned table), the directories of compactions that may have
        been moving into place while the listing ran: the scan reads the directories they replace instead."""
        out: dict[str, set[str]] = {}
        for pub in self._ms.unfinished_publications(self._table_name, self.registration.baseline):
            name = pub.partition or ""
            if name in partitions and pub.outputs:
                out.setdefault(name, set()).update(pub.outputs)
        return {k: frozenset(v) for k, v in out.items()}


def heartbeating(ms: MetastoreFacade, reader_id: int | None, items: Iterator[T]) -> Iterator[T]:
    """``items``, heartbeating a detached registration first and then at most every third of its lease
    (the reads of a Spark task keep their scan's registration alive)."""
    if reader_id is None:
        yield from items
        return
    interval = ms.reader_lease / 3
    ms.heartbeat_readers([reader_id])
    due = time.monotonic() + interval
    for item in items:
        if time.monotonic() >= due:
            ms.heartbeat_readers([reader_id])
            due = time.monotonic() + interval
        yield item
