"""A TCP proxy on loopback that an S3 server can vanish behind and come back from, its data intact.

:meth:`CutProxy.cut` does to a client what the death of the server's process does: every open connection is
reset mid-request and new connections are refused, until :meth:`CutProxy.restore` listens again on the same
port. Killing an in-memory S3 server (moto) would lose the committed data the tests check afterwards; a real
S3 keeps it, and so does the server behind this proxy. :meth:`CutProxy.cut_at` arms the cut for the moment a
request line matches a pattern, so that it lands in the middle of the operation under test.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class CutProxy:
    """Forwards connections from a loopback port to ``target`` (host, port)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._pattern: re.Pattern[bytes] | None = None
        self._held: socket.socket | None = None  # the port, bound but not listening, while cut
        self.cuts = 0
        self._listener: socket.socket | None = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._serve()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._listener is None

    def cut_at(self, pattern: bytes) -> None:
        """Cut when a request whose line (``PUT /bucket/key?query HTTP/1.1``) matches ``pattern`` starts: that
        request reaches the server only in part, as the ones already sent did whole."""
        with self._lock:
            self._pattern = re.compile(pattern)

    def cut(self) -> None:
        """Reset every connection (RST, as a dead peer's kernel answers) and refuse new ones."""
        with self._lock:
            self._pattern = None
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
            self.cuts += 1
        if listener is not None:
            # shut down first: closed only, it would go on listening while _accept's thread waits in accept()
            # on it, until a connection came, and restore() could not listen on the port meanwhile
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
            self._held = _hold(self.port)
        for sock in conns:
            _reset(sock)

    def restore(self) -> None:
        """Listen again, on the same port."""
        with self._lock:
            if self._listener is not None:
                return
            if self._held is not None:
                self._held.close()
                self._held = None
            self._listener = socket.create_server(("127.0.0.1", self.port))
        self._serve()

    def close(self) -> None:
        self.cut()
        if self._held is not None:
            self._held.close()

    def _serve(self) -> None:
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    _reset(client)
                    _reset(server)
                    continue
                self._conns |= {client, server}
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        """Client to server, watching request lines for the armed pattern (one may span two reads)."""
        tail = b""
        while data := _recv(client):
            with self._lock:
                pattern = self._pattern
            if pattern is not None and (hit := pattern.search(tail + data)) is not None:
                with contextlib.suppress(OSError):
                    server.sendall(
                        data[: max(0, hit.end() - len(tail))]
                    )  # the request begins; the server dies
                self.cut()
                return
            tail = data[-512:]
            try:
                server.sendall(data)
            except OSError:
                break
        self._drop(client, server)

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        while data := _recv(source):
            try:
                sink.sendall(data)
            except OSError:
                break
        self._drop(source, sink)

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            self._conns -= set(socks)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _hold(port: int) -> socket.socket:
    """A socket bound to ``port`` that does not listen: connections to the port are refused, as with none,
    and no other socket takes the port meanwhile (a connection from this machine elsewhere given it as its own
    end, a server binding port 0), which would leave :meth:`CutProxy.restore` unable to listen on it again."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def _reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN (SO_LINGER 0), as the kernel answers for a killed process's socket."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@contextmanager
def cut_proxy(endpoint: str) -> Iterator[CutProxy]:
    """A proxy in front of the S3 server at ``endpoint`` (``http://host:port``)."""
    host, port = endpoint.removeprefix("http://").rsplit(":", 1)
    proxy = CutProxy((host, int(port)))
    try:
        yield proxy
    finally:
        proxy.close()
