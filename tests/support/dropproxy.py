"""A TCP proxy on loopback that can lose the answer to one message: the server gets the message, the client
never gets the answer, and the connection drops (as a network fault after a commit would have it)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy.engine import make_url


class DropProxy:
    """Forwards connections from a loopback port to ``target`` (host, port). :meth:`lose_answer_to` arms it:
    the next client message containing ``marker`` reaches the server, and then the connection is closed before
    any answer reaches the client."""

    def __init__(self, target: tuple[str, int], settle: float = 0.3) -> None:
        self.target, self.settle = target, settle
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._marker: bytes | None = None
        self._then: Callable[[], object] | None = None
        self._lock = threading.Lock()
        self._relayed: set[socket.socket] = set()
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str) -> str:
        """``url`` (a database URL) pointing at this proxy instead of its server."""
        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    def lose_answer_to(self, marker: bytes, then: Callable[[], object] | None = None) -> None:
        """Arm the proxy; ``then`` runs once the server had the message, before the connection drops (a kill
        of the server there: it acted on the message and died before answering)."""
        with self._lock:
            self._marker, self._then = marker, then

    def close(self) -> None:
        # shut down first: closed only, it goes on accepting while _accept's thread waits in accept() on it
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def cut(self) -> None:
        """The server out of reach from now on: no new connection, and every relayed one closed."""
        self.close()
        with self._lock:
            relayed, self._relayed = self._relayed, set()
        _close(*relayed)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:  # the server is down: so is this connection
                _close(client)
                continue
            with self._lock:
                self._relayed.update((client, server))
            dropping = threading.Event()
            threading.Thread(target=self._up, args=(client, server, dropping), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, dropping), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, dropping: threading.Event) -> None:
        while data := _recv(client):
            with self._lock:
                hit = self._marker is not None and self._marker in data
                then = self._then if hit else None
                if hit:
                    self._marker = self._then = None
            if hit:
                dropping.set()  # before forwarding: no byte of the answer may reach the client
            with contextlib.suppress(OSError):
                server.sendall(data)
            if hit:
                time.sleep(self.settle)  # the server acts on the message, then finds its client gone
                if then is not None:
                    then()
                self.dropped += 1
                break
        _close(client, server)

    @staticmethod
    def _down(server: socket.socket, client: socket.socket, dropping: threading.Event) -> None:
        while (data := _recv(server)) and not dropping.is_set():
            with contextlib.suppress(OSError):
                client.sendall(data)
        if not dropping.is_set():
            _close(client, server)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


@contextmanager
def drop_proxy(url: str) -> Iterator[DropProxy]:
    """A proxy in front of the server of database URL ``url``."""
    parsed = make_url(url)
    proxy = DropProxy((parsed.host or "127.0.0.1", parsed.port or 5432))
    try:
        yield proxy
    finally:
        proxy.close()
