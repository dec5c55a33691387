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


class ThriftConnection:
    """A ``ThriftHiveMetastore.Client`` over a plain socket that reopens itself after a dropped connection."""

    def __init__(self, url: str, *, connect_timeout: float = 10.0, socket_timeout: float = 600.0) -> None:
        self.endpoint = Endpoint.parse(url)
        self.connect_timeout = connect_timeout
        self.socket_timeout = socket_timeout
        self._lock = threading.RLock()
        self._socket: TSocket | None = None
        self._client: Client | None = None
        self._answered = False  # a call was ever answered: a closed first call then is not SASL

    @property
    def url(self) -> str:
        return self.endpoint.url

    def _open(self) -> Client:
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
        transport = TBufferedTransport(sock)
        self._socket = sock
        self._client = Client(TBinaryProtocol(transport))
        return self._client

    def close(self) -> None:
        """Close the socket (idempotent); the next call opens a new one."""
        with self._lock:
            if self._socket is not None:
                self._socket.close()
            self._socket = self._client = None

    def call(self, name: str, fn: Callable[[Client], T], *, idempotent: bool) -> T:
        """Run ``fn`` on the client, its thrift exceptions as acidstream's; after a dropped socket reconnect,
        and repeat ``fn`` once if ``idempotent``, else raise :class:`MetastoreUnavailable` (whether the
        metastore did it is unknown)."""
        with self._lock:
            for attempt in (1, 2):
                client = self._client or self._open()
                try:
                    result = fn(client)
                except DROPPED as exc:
                    self.close()
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
                    raise MetaException(f"{name} at the Hive Metastore {self.url}: {exc.message}") from exc
                except TException as exc:  # the metastore's answer: an exception the IDL declares
                    self._answered = True
                    raise translate(exc, name, self.url) from exc
                self._answered = True
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
