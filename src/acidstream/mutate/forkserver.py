"""The process merge workers are forked from: a fresh interpreter without threads, forking on request.

Forking the merging process itself would copy a threaded process (the txn's heartbeat, the encode and file
pools, the metastore's connection pool): a lock another thread holds at the fork stays held in the child, which
can then wait on it forever. Instead each process that merges starts one :class:`ForkServer` and keeps it:
``subprocess`` forks and execs it (nothing of the parent runs in between), it imports what a worker needs
(:data:`PRELOAD`, with OpenBLAS and jemalloc told to start no thread) and then only forks, one worker per
request, so workers start warm. The preloaded objects are frozen out of the garbage collector's sight
(``gc.freeze``): a worker's collections would otherwise touch, and so copy, every page of them (a worker's first
unpickling took 60 ms of CPU instead of 8). Python's own forkserver would do the same but for one thing: its
children import the parent's ``__main__`` again, which runs a script that lacks an ``if __name__ == "__main__"``
guard.

A worker gets its task (a picklable function and arguments) through a pipe, and hands back the pickled result
or exception through another; the server adds the worker's exit status once it has reaped it. A worker never
outlives its merge: it holds the read end of a pipe only the merging process writes to, and a thread of it
exits the process at once when that pipe ends (the merging process died, or gave up on it); the kernel also
kills it when the server ends (``runtime.die_with_parent``), and the server ends when the merging process
does (its end of the control socket closes).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import json
import logging
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from acidstream import faults
from acidstream.errors import WorkerException
from acidstream.runtime import configure, die_with_parent

log = logging.getLogger(__name__)

#: What the server imports before it forks anything: every worker starts with these loaded. pandas among them:
#: pyarrow imports it on first converting a Python or numpy object (``pa.array``): 0.3 s of a worker's CPU.
PRELOAD = (
    "acidstream.mutate.forked",
    "acidstream.metastore.sql.engine",
    "acidstream.metastore.sql.txns",
    "sqlalchemy.dialects.postgresql.psycopg",
    "pandas",
    "pyarrow.pandas_compat",
    "botocore.session",  # a worker reading S3 makes a botocore client (acidstream.s3objects): 0.4 s of import
)
#: Extras among them: where one is missing, nothing imports it.
OPTIONAL = frozenset({"pandas", "botocore.session"})
#: Added to the server's environment: no thread in it (OpenBLAS starts a pool when numpy is imported, jemalloc a
#: background thread when pyarrow is), so that what it forks is a process of one thread.
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
#: A worker's exit status when its merging process ended or let it go.
ORPHANED = 75

_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[2]); "
    "from acidstream.mutate.forkserver import serve; serve(int(sys.argv[1]))"
)
_READY = b"R"
_PID = struct.Struct("q")
_RESULT, _STATUS = b"P", b"S"
_LENGTH, _CODE = struct.Struct("q"), struct.Struct("i")


class ForkServer:
    """This process's server (get it with :func:`fork_server`); thread-safe."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), json.dumps(sys.path)],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={**os.environ, **ONE_THREAD},
                start_new_session=True,  # a terminal's Ctrl-C is for the merging process, which stops its workers
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._control = ours
        self._lock = threading.Lock()
        self._ready = False

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def ready(self, *, wait: bool) -> bool:
        """Whether the server has imported :data:`PRELOAD` and takes requests. ``wait``: until it does, raising
        WorkerException if it cannot start; without, a server that could not start is logged and not ready."""
        with self._lock:
            try:
                return self._await_ready(wait)
            except WorkerException as exc:
                if wait:
                    raise
                log.warning("%s: merging in one process", exc)
                return False

    def _await_ready(self, wait: bool) -> bool:
        if not self._ready:
            if not wait and not select.select([self._control], [], [], 0)[0]:
                return False
            try:
                got = self._control.recv(1)
            except OSError:  # reset: it ended
                got = b""
            if got != _READY:
                raise WorkerException(f"the merge workers' server failed to start ({self._ended()})")
            self._ready = True
        return True

    def start(self, fn: Callable[..., Any], *args: Any) -> ForkedWorker:
        """A worker computing ``fn(*args)`` (both pickled) in a fork of the server; waits for the server to be
        ready. The worker takes its faults (:mod:`acidstream.faults`) from this process's environment now."""
        task_r, task_w = os.pipe()
        results_r, results_w = os.pipe()
        alive_r, alive_w = os.pipe()
        try:
            with self._lock:
                self._await_ready(True)
                try:
                    socket.send_fds(self._control, [b"F"], [task_r, results_w, alive_r])
                    reply = self._control.recv(_PID.size, socket.MSG_WAITALL)
                except OSError:  # a broken pipe or a reset: it ended
                    reply = b""
            if len(reply) != _PID.size:
                raise WorkerException(f"the merge workers' server ended ({self._ended()})")
        except BaseException:
            for fd in (results_r, alive_w, task_w):
                os.close(fd)
            raise
        finally:
            for fd in (task_r, results_w, alive_r):
                os.close(fd)
        worker = ForkedWorker(_PID.unpack(reply)[0], results_r, alive_w)
        try:
            with os.fdopen(task_w, "wb") as task:
                pickle.dump((fn, args, os.environ.get(faults.FAULTS_ENV, "")), task)
        except BrokenPipeError:
            pass  # it died before it read its task: its exit status says how
        return worker

    def _ended(self) -> str:
        try:
            return _describe_code(self._process.wait(timeout=1))
        except subprocess.TimeoutExpired:
            return "still running"


class ForkedWorker:
    """One task in a forked process: :meth:`result` waits for it; :meth:`stop` ends it, whatever its state."""

    def __init__(self, pid: int, results: int, alive: int) -> None:
        self.pid = pid
        self._results = results  # read end: the pickled outcome, then the exit status from the server
        self._alive = alive  # write end: closing it ends the worker
        self._outcome: tuple[bytes | None, int | None] | None = None

    def result(self) -> Any:
        """What the task returned; raises what it raised, or WorkerException if the worker ended without an
        outcome."""
        payload, status = self._read()
        if payload is None:
            why = _describe(status) if status is not None else "its server ended"
            raise WorkerException(f"merge worker {self.pid} ended without a result ({why})")
        ok, value = pickle.loads(payload)
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        """End the worker if it still runs (its files are then the aborting txn's) and wait until it has."""
        if self._alive >= 0:
            os.close(self._alive)
            self._alive = -1
        if self._outcome is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)  # not yet reaped: the server reports its status first
        self._read()

    def _read(self) -> tuple[bytes | None, int | None]:
        """(pickled outcome, exit status), read to the pipe's end once: the server closes it after the status."""
        if self._outcome is None:
            with os.fdopen(self._results, "rb") as pipe:
                data = pipe.read()
            self._results = -1
            self._outcome = _frames(data)
        return self._outcome


def _frames(data: bytes) -> tuple[bytes | None, int | None]:
    """(pickled outcome, exit status) from a worker's results; None for what is missing or cut short."""
    payload = status = None
    at = 0
    while at < len(data):
        kind, at = data[at : at + 1], at + 1
        if kind == _RESULT and at + _LENGTH.size <= len(data):
            (size,) = _LENGTH.unpack_from(data, at)
            at += _LENGTH.size
            payload, at = (data[at : at + size] if at + size <= len(data) else None), at + size
        elif kind == _STATUS and at + _CODE.size <= len(data):
            (status,) = _CODE.unpack_from(data, at)
            at += _CODE.size
        else:
            break  # cut short: the worker died while writing
    return payload, status


_server: ForkServer | None = None
_server_lock = threading.Lock()


def fork_server() -> ForkServer:
    """This process's server, started on first use (and again if it ended)."""
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            _server = ForkServer()
        return _server


def _forget_server() -> None:
    """A forked child starts a server of its own: the control socket it inherited is its parent's."""
    global _server, _server_lock
    _server, _server_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_server)


# --- the server --------------------------------------------------------------------------------------------


def serve(control_fd: int) -> None:
    """The server's loop: fork a worker per request, report each one's exit status; end with the control
    socket (the merging process ended: the kernel then kills the workers still running)."""
    configure()  # a process of acidstream's own, as Spark's Python workers: its workers inherit the settings
    for module in PRELOAD:
        if module in OPTIONAL and importlib.util.find_spec(module.split(".")[0]) is None:
            continue  # an extra: where it is missing, nothing imports it either
        importlib.import_module(module)
    gc.freeze()  # a worker's collections then leave the preloaded objects alone: no copy of their pages
    control = socket.socket(fileno=control_fd)
    running: dict[int, tuple[int, int]] = {}  # the end of a pipe a worker holds -> (its pid, its results)
    try:
        control.sendall(_READY)
        while True:
            readable, _, _ = select.select([control_fd, *running], [], [])
            for ready in readable:
                if ready != control_fd:
                    _report(ready, *running.pop(ready))
                elif not _fork(control, running):
                    return
    except (BrokenPipeError, ConnectionResetError):
        return  # the merging process ended (with what this server sent it unread)


def _fork(control: socket.socket, running: dict[int, tuple[int, int]]) -> bool:
    """Fork the worker a request on ``control`` asks for (False: the control socket ended)."""
    message, fds, _, _ = socket.recv_fds(control, 1, 3)
    if not message:
        return False
    server = os.getpid()
    ends_r, ends_w = os.pipe()  # the worker holds ends_w: its end is the worker's
    pid = os.fork()
    if pid == 0:
        control.close()
        for fd in (ends_r, *running, *(results for _, results in running.values())):
            os.close(fd)
        _work(server, *fds)
    task, results, alive = fds
    for fd in (task, alive, ends_w):
        os.close(fd)
    running[ends_r] = (pid, results)
    control.sendall(_PID.pack(pid))
    return True


def _report(ended: int, pid: int, results: int) -> None:
    """The worker ``pid`` ended: reap it and append its exit status to its results, which end there."""
    os.close(ended)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):  # nobody reads them any more
        os.write(results, _STATUS + _CODE.pack(status))
    os.close(results)


def _work(server: int, task: int, results: int, alive: int) -> None:
    """A worker, forked by ``server``: run the task, hand back its outcome, exit. Never returns."""
    die_with_parent()  # the server, which ends with the merging process
    if os.getppid() != server:  # the server ended before the line above
        os._exit(ORPHANED)
    threading.Thread(target=_watch, args=(alive,), name="acidstream-worker-watchdog", daemon=True).start()
    status = 1
    try:
        with os.fdopen(task, "rb") as pipe:
            fn, args, armed = pickle.load(pipe)
        faults.disarm()
        for name, fault in faults.parse_faults(armed).items():
            faults.arm(name, fault.action, at=fault.at, times=fault.times)
        payload = pickle.dumps((True, fn(*args)))
        status = 0
    except BaseException as exc:  # handed to the merging process, which raises it
        payload = pickle.dumps((False, _portable(exc)))
    try:
        with os.fdopen(results, "wb") as pipe:
            pipe.write(_RESULT + _LENGTH.pack(len(payload)) + payload)
    finally:
        os._exit(status)


def _watch(alive: int) -> None:
    """Exit the worker at once when the merging process's end of ``alive`` closes: it died or gave up."""
    while os.read(alive, 1):
        pass
    os._exit(ORPHANED)


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling as it is, else a WorkerException saying what it was."""
    try:
        back = pickle.loads(pickle.dumps(exc))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:
        pass
    return WorkerException(f"merge worker failed: {type(exc).__name__}: {exc}")


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


def _describe_code(code: int) -> str:
    """A ``Popen.returncode`` in words."""
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"
