"""One thrift connection to a Hive Metastore: the URL, the socket with its timeouts, reconnecting after a drop.

Each call runs on an open socket; a socket that fails mid-call is closed, so the next call reconnects. Whether
a call is repeated after a drop is the caller's decision (:meth:`ThriftConnection.call`'s ``idempotent``): a
repeated ``open_txns`` would open txns nobody owns, a lost ``commit_txn`` answer is settled by the client.

Every call is bounded: opening a socket by ``connect_timeout``, a call by ``socket_timeout`` (Hive's
``metastore.client.socket.timeout``, 600 s), and the version check that :meth:`HiveMetastoreClient.open
<acidstream.metastore.hive.client.HiveMetastoreClient.open>` makes by ``connect_timeout`` too, so a port that
accepts and never answers fails the connect as unreachable. Sockets are opened by the standard library, not by
thrift's ``TSocket.open``, which logs each failure (with a traceback for an unresolved host) on its logger.

A kerberized metastore (``kerberos`` settings) is reached over SASL/GSSAPI (:mod:`.sasl`): each new socket
authenticates within ``connect_timeout`` before its first call, so a refused credential fails the connect.

A URL may list several metastores, ``thrift://h1:9083,thrift://h2:9083``, as Hive's ``metastore.thrift.uris``
does, and they are tried as Hive's clients try them: a new socket goes to the first of the list that accepts
(and authenticates it), in an order shuffled once (``uri_selection="random"``, Hive's default) or as written
(``"sequential"``); after a dropped connection, ``random`` moves another metastore to the front, so clients
spread over the survivors. Kerberos's ``_HOST`` is each metastore's own host.
"""

from __future__ import annotations

import os
import random
import socket
import ssl
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from hive_metastore.ThriftHiveMetastore import Client
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TApplicationException, TException
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TTransportBase, TTransportException

from acidstream.errors import AuthenticationError, MetaException, MetastoreUnavailable, MetastoreUrlError
from acidstream.metastore.hive.digest import DelegationToken
from acidstream.metastore.hive.errors import translate
from acidstream.metastore.hive.sasl import (
    DigestSaslTransport,
    GssapiSaslTransport,
    KerberosLogin,
    KerberosSettings,
    NoCredentials,
    PlainSaslTransport,
    PlainSettings,
    SaslTransport,
)

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
        try:
            parts.hostname.encode("idna")  # what the resolver would refuse: an empty or overlong label
        except UnicodeError:
            raise MetastoreUrlError(f"bad host name in Hive Metastore URL {url!r}") from None
        return cls(url, parts.hostname, port)

    @classmethod
    def parse_list(cls, url: str) -> tuple[Endpoint, ...]:
        """The metastores of a comma-separated list of ``thrift://`` URLs (one URL is a list of one)."""
        urls = [part.strip() for part in url.split(",")]
        if not all(urls):
            raise MetastoreUrlError(f"an empty entry in the Hive Metastore URL list {url!r}")
        return tuple(cls.parse(part) for part in urls)


#: Hive's ``metastore.thrift.uri.selection`` values: the order a list of metastores is tried in.
URI_SELECTIONS = ("random", "sequential")


class SaslRequired(AuthenticationError):
    """The metastore answered the first call with a SASL frame: it speaks SASL (Kerberos), and the client was
    not given Kerberos settings."""


class MetastoreUnreachable(MetastoreUnavailable):
    """No connection to the metastore could be opened: the call was not sent, so it did not happen."""


class _Socket(TSocket):
    """thrift's socket, opened by the standard library (``TSocket.open`` logs every failure on thrift's logger,
    which prints on stderr unless the application configured logging) and keeping the first bytes it reads,
    which tell what answered a call that did not parse."""

    def __init__(self, endpoint: Endpoint, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(endpoint.host, endpoint.port)
        self.endpoint = endpoint
        self.tls = tls
        self.first_bytes = b""

    def open(self) -> None:
        handle = socket.create_connection((self.host, self.port), timeout=self._timeout)
        if self.tls is not None:
            try:
                handle = self.tls.wrap_socket(handle, server_hostname=self.host)
            except BaseException:
                handle.close()
                raise
        self.handle = handle

    def read(self, sz: int) -> bytes:
        data: bytes = super().read(sz)
        if len(self.first_bytes) < _SNIFFED:
            self.first_bytes += data[: _SNIFFED - len(self.first_bytes)]
        return data


#: Bytes of a connection's first answer kept to tell a SASL server or another kind of server from a metastore.
_SNIFFED = 64


TIMED_OUT = "timed out"
#: Sockets kept open between calls: one per thread that calls at once (a writer, its heartbeats, a lock ahead).
IDLE_SOCKETS = 4


class ThriftConnection:
    """``ThriftHiveMetastore.Client`` calls over plain sockets that reopen themselves after a drop.

    A call takes an idle socket or opens one: calls from several threads (a writer's, its heartbeat thread's, a
    lock requested ahead) run side by side on sockets of their own instead of queueing on one, as Hive's
    clients keep a connection per thread. At most :data:`IDLE_SOCKETS` stay open between calls.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        socket_timeout: float = 600.0,
        kerberos: KerberosSettings | None = None,
        uri_selection: str = "random",
        token: DelegationToken | None = None,
        ssl_enabled: bool = False,
        ssl_ca_file: str | None = None,
        plain: PlainSettings | None = None,
    ) -> None:
        if uri_selection not in URI_SELECTIONS:
            raise MetastoreUrlError(
                f"unknown uri_selection {uri_selection!r} for the Hive Metastore at {url} "
                f"(known: {', '.join(URI_SELECTIONS)})"
            )
        self.url = url
        self.endpoints = Endpoint.parse_list(url)
        self.uri_selection = uri_selection
        self._order = list(self.endpoints)  # the order a new socket tries them in
        if uri_selection == "random":
            random.shuffle(self._order)
        self.login = None if kerberos is None else KerberosLogin(kerberos)
        self.token = token
        self.ssl_ca_file = ssl_ca_file
        self.tls = _tls_context(url, ssl_ca_file) if ssl_enabled or ssl_ca_file else None
        if plain is not None and self.tls is None and not plain.allow_without_tls:
            raise MetastoreUrlError(
                f"SASL PLAIN to the Hive Metastore at {url} would send the password of {plain.user} in clear: "
                "connect over TLS (ssl_enabled or ssl_ca_file, the metastore's metastore.use.SSL), or set "
                "allow_plain_without_tls on a network you trust"
            )
        self.plain = plain
        self.connect_timeout = connect_timeout
        self.socket_timeout = socket_timeout
        self._lock = threading.Lock()
        self._idle: list[tuple[_Socket, Client]] = []
        self._generation = 0  # close() bumps it: a socket of an older generation is closed when handed back
        self._answered = False  # a call was ever answered: a closed first call then is not SASL
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forget_sockets(ref))

    def reconnect_options(self) -> dict[str, Any]:
        """The options that make another process's client connect as this one does (Kerberos, URI order)."""
        return {
            "kerberos": None if self.login is None else self.login.settings,
            "uri_selection": self.uri_selection,
            "token": self.token,
            "ssl_enabled": self.tls is not None,
            "ssl_ca_file": self.ssl_ca_file,
            "plain": self.plain,
        }

    def _open(self) -> tuple[_Socket, Client]:
        """A socket to the first metastore of the list that accepts and authenticates one. Credentials the
        client does not have fail at once; a metastore that is down or refuses them is skipped for the next,
        and when none is left the first refusal is raised, else :class:`MetastoreUnreachable` naming each."""
        with self._lock:
            order = list(self._order)
        failures: list[MetastoreUnreachable | AuthenticationError] = []
        for endpoint in order:
            try:
                return self._open_at(endpoint)
            except NoCredentials:
                raise  # the same for every metastore of the list
            except (MetastoreUnreachable, AuthenticationError) as exc:
                failures.append(exc)
        refusals = [exc for exc in failures if isinstance(exc, AuthenticationError)]
        if len(failures) == 1 or refusals:
            raise (refusals or failures)[0]
        raise MetastoreUnreachable(
            f"cannot reach any of the Hive Metastores at {self.url}: "
            + "; ".join(str(exc) for exc in failures)
        ) from failures[-1]

    def _open_at(self, endpoint: Endpoint) -> tuple[_Socket, Client]:
        sock = _Socket(endpoint, self.tls)
        sock.setTimeout(self.connect_timeout * 1000)
        try:
            sock.open()
        except ssl.SSLCertVerificationError as exc:
            raise AuthenticationError(
                f"the Hive Metastore at {endpoint.url} presented a TLS certificate this client does not trust: "
                f"{exc.verify_message}. Set ssl_ca_file to the CA file that signed the metastore's certificate, "
                "and name the metastore by a host name the certificate is for"
            ) from None
        except ssl.SSLError as exc:
            raise MetastoreUnreachable(
                f"no TLS connection to the Hive Metastore at {endpoint.url}: {exc.reason or exc}; is it configured "
                "for TLS (metastore.use.SSL)? Connect without ssl otherwise"
            ) from exc
        except DROPPED as exc:
            raise MetastoreUnreachable(
                f"cannot reach the Hive Metastore at {endpoint.url} within {self.connect_timeout:g}s: "
                f"{_cause(exc)}"
            ) from exc
        if self.token is not None:  # as Hive's clients: a token, where there is one, before Kerberos
            qop = None if self.login is None else self.login.settings.qop
            transport: TTransportBase = self._authenticated(
                sock, DigestSaslTransport(sock, self.token, endpoint.url, qop)
            )
        elif self.plain is not None:
            transport = self._authenticated(sock, PlainSaslTransport(sock, self.plain, endpoint.url))
        elif self.login is not None:
            credentials = self.login.credentials(endpoint.url)
            sasl = GssapiSaslTransport(sock, self.login.settings, credentials, endpoint.host, endpoint.url)
            transport = self._authenticated(sock, sasl)
        else:
            transport = TBufferedTransport(sock)
        sock.setTimeout(self.socket_timeout * 1000)
        return sock, Client(TBinaryProtocol(transport))

    def _authenticated(self, sock: _Socket, transport: SaslTransport) -> SaslTransport:
        """``transport`` over ``sock`` opened (SASL, within the connect timeout): :class:`AuthenticationError` if
        refused."""
        url = sock.endpoint.url
        try:
            transport.open()
        except DROPPED as exc:
            sock.close()
            if isinstance(transport, PlainSaslTransport):
                raise MetastoreUnreachable(
                    f"the Hive Metastore at {url} closed the connection during SASL PLAIN authentication "
                    f"({_cause(exc)}): it is restarting, or it takes no password (metastore.authentication), "
                    "then connect without plain_user and plain_password"
                ) from exc
            raise MetastoreUnreachable(
                f"the Hive Metastore at {url} closed the connection during Kerberos (SASL) authentication "
                f"({_cause(exc)}): it is restarting, or it is not kerberized (metastore.sasl.enabled), then "
                "connect without Kerberos settings"
            ) from exc
        return transport

    def _take(self) -> tuple[_Socket, Client, int]:
        """An idle socket the metastore has not closed meanwhile (a restart), or a new one; with the generation
        it belongs to. A call then fails before it is sent (:class:`MetastoreUnreachable`) when the metastore is down."""
        while True:
            with self._lock:
                generation = self._generation
                if not self._idle:
                    break
                sock, client = self._idle.pop()
            if sock.isOpen():  # a peek: the metastore's end closed reads as end of file
                return sock, client, generation
        return (*self._open(), generation)

    def _give_back(self, sock: _Socket, client: Client, generation: int) -> None:
        sock.setTimeout(self.socket_timeout * 1000)  # a call with a timeout of its own set it
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

    def _promote(self) -> None:
        """After a dropped connection, under ``random``: another metastore of the list first (as Hive's
        ``reconnect`` swaps a random one to the front: the one that dropped is likely the first)."""
        with self._lock:
            if self.uri_selection == "random" and len(self._order) > 1:
                index = random.randrange(1, len(self._order))
                self._order[0], self._order[index] = self._order[index], self._order[0]

    def call(
        self, name: str, fn: Callable[[Client], T], *, idempotent: bool, timeout: float | None = None
    ) -> T:
        """Run ``fn`` on the client, its thrift exceptions as acidstream's, within ``timeout`` seconds (the
        socket timeout unless given); after a dropped socket reconnect, and repeat ``fn`` once if
        ``idempotent``, else raise :class:`MetastoreUnavailable` (whether the metastore did it is unknown)."""
        for attempt in (1, 2):
            sock, client, generation = self._take()
            if timeout is not None:
                sock.setTimeout(timeout * 1000)
            try:
                result = fn(client)
            except DROPPED as exc:
                sock.close()
                self.close()  # the others are likely dropped too (a restarted metastore)
                self._promote()
                if not self._answered:
                    _check_first_answer(exc, sock.first_bytes, name, sock.endpoint.url)
                if idempotent and attempt == 1:
                    continue
                if _cause(exc) == TIMED_OUT:
                    waited = self.socket_timeout if timeout is None else timeout
                    raise MetastoreUnavailable(
                        f"the Hive Metastore at {self.url} did not answer {name} within {waited:g}s"
                    ) from exc
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


#: A SASL server's answer to a plain thrift call: a frame of status ``BAD`` or ``ERROR`` (``NegotiationStatus``),
#: a 4-byte length and the reason ("Invalid status -128", our call's first byte read as a status).
_SASL_REFUSALS = (3, 4)


def _forget_sockets(ref: weakref.ref[ThriftConnection]) -> None:
    """In a forked child: drop (never use, never close) the sockets inherited from the parent. Both processes
    calling on one socket would read each other's answers, and a SASL socket's security context (its message
    sequence numbers) cannot be shared at all; the child opens and authenticates its own."""
    connection = ref()
    if connection is not None:
        connection._idle, connection._lock = [], threading.Lock()


def _check_first_answer(exc: BaseException, first: bytes, name: str, url: str) -> None:
    """After the first call ever made to ``url`` failed on the wire: raise what the failure says of the server
    at ``url``, if anything. A SASL frame is :class:`SaslRequired`; other bytes that are no thrift answer (an
    HTTP port) a :class:`MetastoreUrlError`; the connection closed with no answer at all (a PostgreSQL port, or a
    proxy whose metastore is down) :class:`MetastoreUnavailable`, retryable, saying either. A timeout or a reset
    says nothing of the server: the caller reports the metastore unreachable."""
    hint = "check the URL's host and port (a Hive Metastore listens on 9083 unless configured otherwise)"
    if len(first) >= 5 and first[0] in _SASL_REFUSALS and int.from_bytes(first[1:5], "big") < 1 << 16:
        raise SaslRequired(
            f"the Hive Metastore at {url} refused the first call ({name}) as a SASL server does: it requires "
            "SASL/Kerberos (metastore.sasl.enabled); connect with Kerberos settings (kerberos=True, or "
            "kerberos_principal and kerberos_keytab; [hive] in acidstream.toml), or with auth_mode PLAIN where "
            "its metastore.authentication takes a password: "
            f"{first[5:].decode('utf-8', 'replace')}"
        ) from exc
    if first:
        raise MetastoreUrlError(
            f"the server at {url} did not answer the first call ({name}) as a Hive Metastore (its answer begins "
            f"{first[:24]!r}): {hint}"
        ) from exc
    if isinstance(exc, TTransportException) and exc.type == TTransportException.END_OF_FILE:
        raise MetastoreUnavailable(
            f"the server at {url} did not answer the first call ({name}) as a Hive Metastore (it closed the "
            f"connection without an answer): it is not one, or not serving yet, or it requires Kerberos (SASL, "
            "as Hive 4 closes a plain call), then connect with Kerberos settings (kerberos=True), or TLS or a "
            f"password (ssl_enabled, auth_mode PLAIN); {hint}"
        ) from exc


def _tls_context(url: str, ca_file: str | None) -> ssl.SSLContext:
    """A client TLS context that verifies the metastore's certificate and host name, against ``ca_file`` (PEM)
    or the system's CAs."""
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise MetastoreUrlError(f"ssl_ca_file {ca_file!r} for the Hive Metastore at {url}: {exc}") from None


def _cause(exc: BaseException) -> str:
    inner = getattr(exc, "inner", None)
    if isinstance(inner or exc, socket.timeout | TimeoutError):
        return TIMED_OUT
    text = str(inner or exc) or type(exc).__name__
    return text
