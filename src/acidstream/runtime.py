"""Every process-wide setting acidstream makes, in one module: the interpreter's switch interval, malloc's
thresholds, the open-files limit, the thread pools shared by all connections, and the parent-death signal of
the processes acidstream starts to work for another.

A library does not retune the process it is imported into: none of these settings is made unless asked for, by
:func:`configure` (the ``acidstream`` command, Spark's Python workers and the benchmarks call it; an application
may) or by ``ACIDSTREAM_PROCESS_TUNING=1`` in the environment; ``ACIDSTREAM_PROCESS_TUNING=0`` keeps them all off
even then. Once asked for, the entry points (``acidstream.Metastore``, ``StreamingConnection``, ``TableScan``)
apply the one-off settings (:func:`prepare_process`), and work that releases the GIL many times runs inside a
:class:`ShortSwitchInterval` section. The thread pools are acidstream's own and always there.

**Switch interval.** Every pyarrow/numpy kernel and SQLite statement releases the GIL, and taking it back from a
thread that is running Python can take the interpreter's whole switch interval (5 ms by default): a streaming
commit makes a couple of hundred such calls, so beside one CPU-busy Python thread it took a second instead of
11 ms (the "GIL convoy", ``bench/bench_streaming_contention.py``). While at least one :class:`ShortSwitchInterval`
section runs anywhere in the process, the interval is lowered, so other threads hand the GIL back sooner; the
last section to leave restores the interval it found, unless somebody else changed it meanwhile (theirs is then
left alone).

**malloc.** pyarrow's ORC writer (ORC C++) allocates a few MB of stream and zlib buffers per file and frees them
at close. With glibc's default trim threshold (128 KiB, adaptive) the freed heap top is returned to the kernel
and the next file faults every page in again: measured here, encoding 2,000 events cost ~4 ms instead of
~0.5 ms, and streaming encodes one small file per (partition, bucket) per commit. Raising the trim and mmap
thresholds keeps up to ``TRIM_THRESHOLD`` bytes of free heap for reuse (glibc only).

**Open files.** A streaming batch keeps one file open per (partition, bucket), and thousands of dynamic
partitions must not fail with EMFILE: the soft limit is lifted to the hard one.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import resource
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import ParamSpec, TypeVar

#: ``ACIDSTREAM_PROCESS_TUNING=1`` asks for the settings without :func:`configure`; ``=0`` refuses them.
OPT_OUT_VARIABLE = "ACIDSTREAM_PROCESS_TUNING"

_configured = False  # configure() was called


@functools.cache
def _environment() -> str | None:
    """The environment's word on the settings, read once, at the first use."""
    return os.environ.get(OPT_OUT_VARIABLE)


def tuning_enabled() -> bool:
    """Whether the process-wide settings are in force: asked for (:func:`configure` or the environment) and
    not refused by the environment."""
    word = _environment()
    return word != "0" and (_configured or word == "1")


def configure() -> bool:
    """Let acidstream tune this process for throughput (``docs/benchmarks.md`` says what each setting is
    worth): the interpreter's switch interval is shortened while acidstream works, glibc's malloc keeps freed
    encoder buffers, the soft open-files limit is raised to the hard one. Call it once, early, in a program
    that mostly streams, merges or reads with acidstream; a library's import never does. Returns whether the
    settings are in force (``ACIDSTREAM_PROCESS_TUNING=0`` refuses them)."""
    global _configured
    _configured = True
    prepare_process()
    return tuning_enabled()


_prepare_lock = threading.Lock()
_prepared = False


def prepare_process() -> None:
    """Apply the one-off process-wide settings once per process, if they are asked for (entry points call it;
    it does nothing otherwise, and is cheap after the first time)."""
    global _prepared
    if _prepared or not tuning_enabled():
        return
    with _prepare_lock:
        if _prepared:
            return
        tune_malloc_for_encoding()
        raise_open_file_limit()
        _prepared = True


# --- switch interval ---------------------------------------------------------------------------------------

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

#: 50 µs: beside a busy thread, streaming ran ~15× faster than with the default 5 ms (1e-4: ~14×, 2e-5: ~17×,
#: each halving costs the other threads more hand-overs); alone it changes nothing.
DEFAULT_SWITCH_INTERVAL = 5e-5

_lock = threading.Lock()
_depth = 0  # sections running now, all threads
_restore: float | None = None  # the interval found by the first section, if it was lowered
_ours: float | None = None  # the interval set then (as the interpreter reports it back)


class ShortSwitchInterval:
    """A reusable, re-entrant context manager; ``seconds=None`` makes it do nothing."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float | None = DEFAULT_SWITCH_INTERVAL) -> None:
        if seconds is not None and seconds <= 0:
            raise ValueError(f"switch interval must be positive, got {seconds}")
        self.seconds = seconds

    def __enter__(self) -> None:
        global _depth, _restore, _ours
        if self.seconds is None or not tuning_enabled():
            return
        with _lock:
            _depth += 1
            current = sys.getswitchinterval()
            if current > self.seconds:  # never lengthen an interval somebody chose shorter
                if _restore is None:
                    _restore = current
                sys.setswitchinterval(self.seconds)
                _ours = sys.getswitchinterval()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _depth, _restore, _ours
        if self.seconds is None or not tuning_enabled():
            return
        with _lock:
            if _depth == 0:  # entered before a fork, in a parent process
                return
            _depth -= 1
            if _depth == 0 and _restore is not None:
                if sys.getswitchinterval() == _ours:
                    sys.setswitchinterval(_restore)
                _restore = _ours = None


def _after_fork_in_child() -> None:
    """Only the forking thread lives on in a child: the sections of the parent's other threads never end here
    (and one of them may have held the lock), so the child starts afresh with the interval the parent found."""
    global _lock, _depth, _restore, _ours
    _lock = threading.Lock()
    if _restore is not None and sys.getswitchinterval() == _ours:
        sys.setswitchinterval(_restore)
    _depth, _restore, _ours = 0, None, None


os.register_at_fork(after_in_child=_after_fork_in_child)


def each_in(section: ShortSwitchInterval, items: Iterator[T]) -> Iterator[T]:
    """``items``, each one produced inside ``section``; the consumer's code between them runs outside it."""
    while True:
        with section:
            try:
                item = next(items)
            except StopIteration:
                return
        yield item


# --- malloc ------------------------------------------------------------------------------------------------

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 128 << 20
MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2)


def tune_malloc_for_encoding() -> bool:
    """Raise glibc's trim and mmap thresholds; True when they are in force. ``ACIDSTREAM_MALLOC_TUNING=0``,
    the older malloc-only switch, is still honoured."""
    if os.environ.get("ACIDSTREAM_MALLOC_TUNING", "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


# --- open files --------------------------------------------------------------------------------------------


def raise_open_file_limit() -> int:
    """Lift the soft open-files limit to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


# --- parent death ------------------------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    """Have the kernel SIGKILL this process when its parent ends (Linux; False elsewhere). For a process that
    works for its parent only (a merge worker): killed with it, it must not live on and write files."""
    if sys.platform != "linux":
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0


# --- thread pools ------------------------------------------------------------------------------------------


class LazyPool:
    """A process-wide thread pool made on first use; a forked child (which inherits the object but not the
    threads) makes its own."""

    def __init__(self, name: str, workers: int) -> None:
        self._name, self._workers = name, workers
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def __call__(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=self._name)
            return self._pool

    def _forget(self) -> None:
        self._pool, self._lock = None, threading.Lock()


def completed_future(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
    """``fn(*args, **kwargs)`` run in this thread, as a finished future holding its result or what it raised
    (as a pool's future would): work a pool could have run, run by its caller instead."""
    future: Future[R] = Future()
    try:
        future.set_result(fn(*args, **kwargs))
    except BaseException as exc:  # raised again by result(), as from a pool
        future.set_exception(exc)
    return future


#: ORC encoding: pyarrow releases the GIL while it encodes, so a commit's files (one per partition and
#: bucket) encode side by side on several cores. One core is left to the flushing thread, which encodes what no
#: worker has started (on 2 cores, 1 worker + the caller ran 8% faster than 2 workers with the caller waiting).
ENCODE_WORKERS = max(1, min(8, (os.cpu_count() or 1) - 1))
ENCODE_THREADS = ENCODE_WORKERS + 1  # with the flushing thread
encode_pool = LazyPool("acidstream-encode", ENCODE_WORKERS)
#: Creating and closing files: a handful of filesystem calls each, which would otherwise queue in front of
#: the encodes (and wait for the GIL between calls while the routing thread runs).
file_pool = LazyPool("acidstream-files", 4)
