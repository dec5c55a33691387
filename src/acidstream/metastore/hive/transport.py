"""One thrift connection to a Hive Metastore: the URL, the socket with its timeouts, reconnecting after a drop.

Calls are serialised (a streaming connection's heartbeat thread shares the client with its writer) and each
runs on an open socket; a socket that fails mid-call is closed, so the next call reconnects. Whether a call is
repeated after a drop is the caller's decision (:meth:`ThriftConnection.call`'s ``idempotent``): a repeated
``open_txns`` would open txns nobody owns, a repeated ``commit_txn`` is answered by asking the txn's state.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from hive_metastore.ThriftHiveMetastore import Client
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TApplicationException, TException
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TTransportException

from acidstream.errors import MetaException, MetastoreUnavailable, MetastoreUrlError
from acidstream.metastore.hive.errors import translate

T = TypeVar("T")

DEFAULT_PORT = 9083
#: Errors that leave the connection unusable (gone, never up, or out of step), not the metastore's refusal.
DROPPED = (TTransportException, TProtocolException, OSError, EOFError)


@dataclass(frozen=True)
class Endpoint:
    """Where a metastore listens, parsed from ``thrift://host[:port]``."""

    url: str
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme != "thrift" or not parts.hostname:
            raise MetastoreUrlError(f"not a Hive Metastore URL (thrift://host[:port]): {url!r}")
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError as exc:
            raise MetastoreUrlError(f"bad port in Hive Metastore URL {url!r}: {exc}") from None
        return cls(url, parts.hostname, port)


class SaslRequired(MetaException):
    """The metastore closed a new connection at its first call: it speaks SASL (Kerberos or a password),
    which acidstream's Hive backend does not support: only unsecured binary thrift."""


#: Sockets kept open between calls: one per thread that calls at once (a writer, its heartbeats, a lock ahead).
IDLE_SOCKETS = 4


class ThriftConnection:
    """``ThriftHiveMetastore.Client`` calls over plain sockets that reopen themselves after a drop.

    A call takes an idle socket or opens one: calls from several threads (a writer's, its heartbeat thread's, a
    lock requested ahead) run side by side on sockets of their own instead of queueing on one, as Hive's
    clients keep a connection per thread. At most :data:`IDLE_SOCKETS` stay open between calls.
    """

    def __init__(self, url: str, *, connect_timeout: float = 10.0, socket_timeout: float = 600.0) -> None:
        self.endpoint = Endpoint.parse(url)
        self.connect_timeout = connect_timeout
        self.socket_timeout = socket_timeout
        self._lock = threading.Lock()
        self._idle: list[tuple[TSocket, Client]] = []
        self._generation = 0  # close() bumps it: a socket of an older generation is closed when handed back
        self._answered = False  # a call was ever answered: a closed first call then is not SASL

    @property
    def url(self) -> str:
        return self.endpoint.url

    def _open(self) -> tuple[TSocket, Client]:
        sock = TSocket(self.endpoint.host, self.endpoint.port)
        sock.setTimeout(self.connect_timeout * 1000)
        try:
            sock.open()
        except DROPPED as exc:
            raise MetastoreUnavailable(
                f"cannot reach the Hive Metastore at {self.url} within {self.connect_timeout:g}s: "
                f"{_cause(exc)}"
            ) from exc
        sock.setTimeout(self.socket_timeout * 1000)
        return sock, Client(TBinaryProtocol(TBufferedTransport(sock)))

    def _take(self) -> tuple[TSocket, Client, int]:
        """An idle socket, or a new one; with the generation it belongs to."""
        with self._lock:
            generation = self._generation
            if self._idle:
                return (*self._idle.pop(), generation)
        return (*self._open(), generation)

    def _give_back(self, sock: TSocket, client: Client, generation: int) -> None:
        with self._lock:
            if generation == self._generation and len(self._idle) < IDLE_SOCKETS:
                self._idle.append((sock, client))
                return
        sock.close()

    def close(self) -> None:
        """Close the sockets (idempotent; those in use when their call returns); the next call opens a new one."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for sock, _ in idle:
            sock.close()

    def call(self, name: str, fn: Callable[[Client], T], *, idempotent: bool) -> T:
        """Run ``fn`` on the client, its thrift exceptions as acidstream's; after a dropped socket reconnect,
        and repeat ``fn`` once if ``idempotent``, else raise :class:`MetastoreUnavailable` (whether the
        metastore did it is unknown)."""
        for attempt in (1, 2):
            sock, client, generation = self._take()
            try:
                result = fn(client)
            except DROPPED as exc:
                sock.close()
                self.close()  # the others are likely dropped too (a restarted metastore)
                if not self._answered and _refused(exc):
                    raise SaslRequired(
                        f"the Hive Metastore at {self.url} refused the first call ({name}) as a SASL server "
                        "does: it requires SASL/Kerberos (hive.metastore.sasl.enabled), which is out of "
                        f"scope for acidstream's Hive backend (unsecured thrift only): {_cause(exc)}"
                    ) from exc
                if idempotent and attempt == 1:
                    continue
                raise MetastoreUnavailable(
                    f"lost the connection to the Hive Metastore at {self.url} during {name}: {_cause(exc)}"
                ) from exc
            except TApplicationException as exc:  # an unknown method, a server-side failure
                self._give_back(sock, client, generation)
                raise MetaException(f"{name} at the Hive Metastore {self.url}: {exc.message}") from exc
            except TException as exc:  # the metastore's answer: an exception the IDL declares
                self._answered = True
                self._give_back(sock, client, generation)
                raise translate(exc, name, self.url) from exc
            except BaseException:  # interrupted half way: the socket's state is unknown
                sock.close()
                raise
            self._answered = True
            self._give_back(sock, client, generation)
            return result
        raise AssertionError("unreachable")


_NOT_THRIFT = (
    TTransportException.END_OF_FILE,
    TTransportException.SIZE_LIMIT,
    TTransportException.NEGATIVE_SIZE,
)


def _refused(exc: BaseException) -> bool:
    """What a SASL server (``TSaslServerTransport``) does with a plain thrift call: it answers a SASL error
    frame, which is no thrift message (its length field reads as an oversized string here), and closes the
    connection (end of file, or a reset when our call was not read to its end); not a timeout. Only the first call ever made counts: later
    these mean a dropped connection."""
    if isinstance(exc, TProtocolException):
        return True
    if isinstance(exc, TTransportException):
        return exc.type in _NOT_THRIFT or isinstance(exc.inner, ConnectionResetError)
    return isinstance(exc, ConnectionResetError)


def _cause(exc: BaseException) -> str:
    inner = getattr(exc, "inner", None)
    if isinstance(inner, socket.timeout | TimeoutError):
        return "timed out"
    text = str(inner or exc) or type(exc).__name__
    return text
