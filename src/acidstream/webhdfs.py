"""HDFS through its namenode's WebHDFS REST API, as a pyarrow filesystem (``pyarrow.fs.PyFileSystem`` of a
:class:`WebHdfsHandler`), on ``requests``: pyarrow's own HDFS filesystem needs libhdfs and a JVM on the client.

Written here rather than taken from fsspec's WebHDFS client, which has no request timeouts, returns a DataNode's
error answer to a read as the file's bytes, and sends a written file only when it is closed or a block's worth
is buffered, where streaming needs every flush readable at once (what ``hflush`` gives a JVM writer). Every
request here has a connect and a read timeout, every answer's status is checked (an error answer is an
``OSError``, never data), and idempotent requests (reads, listings) are tried again a bounded number of times.

On a kerberized cluster a client authenticates with SPNEGO (``requests-gssapi``, of the python-gssapi project)
from the caller's ticket cache or a keytab (:class:`SpnegoLogin`), or, in a process with no Kerberos
credentials of its own (a Spark executor), with an HDFS delegation token sent as ``delegation=`` on every
request. Either way the namenode hands its DataNodes' redirects a token of its own. A refusal of who the
caller is (no ticket, a wrong service principal, a cancelled or expired token) is an
:class:`~acidstream.errors.AuthenticationError`, never an ``OSError``: no retry makes it succeed. Tokens never
appear in messages.

Errors are the builtins pyarrow's filesystems raise: ``FileNotFoundError``, ``FileExistsError`` and
``PermissionError`` only when the namenode said so in its ``RemoteException``; anything else (a timeout, a
refused connection, an error status without that answer, a read shorter than the file) is a plain ``OSError``
(``TimeoutError``, ``ConnectionError``) naming the operation, the path and the namenode's URL.
"""

from __future__ import annotations

import io
import logging
import re
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import requests

from acidstream.errors import AuthenticationError
from acidstream.kerberos import KerberosCredentials, LoginFailed, describe_client, gss_text

#: Seconds to wait for a namenode or DataNode to accept a connection, and for each answer's next bytes.
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 60.0
#: Tries of a request that can be sent again without harm (a read, a listing), 0.2 s then 0.4 s apart.
IDEMPOTENT_TRIES = 3
#: A read asks for at least this much of the file at once (an ORC file's tail, then its stripes).
READ_AHEAD = 8 << 20

#: The namenode's ``RemoteException`` names that mean "the answer is no", not "the store failed".
_ANSWERS: dict[str, type[OSError]] = {
    "FileNotFoundException": FileNotFoundError,
    "FileAlreadyExistsException": FileExistsError,
    "AccessControlException": PermissionError,
}
#: The ``RemoteException`` names of a namenode or DataNode that did not accept who the caller is.
_REFUSALS = frozenset({"SecurityException", "InvalidToken", "AuthenticationException"})
#: Hadoop's own service principal for WebHDFS's SPNEGO, ``_HOST`` being the namenode's host as the URL names it.
DEFAULT_SERVICE_PRINCIPAL = "HTTP/_HOST"
_TOKEN = re.compile(r"((?:delegation|token)=)[^&\s'\"]+")


def hide_tokens(text: str) -> str:
    """``text`` with the value of every ``delegation=`` or ``token=`` query parameter hidden (a request's URL
    in a library's message carries the delegation token)."""
    return _TOKEN.sub(r"\1***", text)


class _HidingTokens(logging.Filter):
    """urllib3 logs each request's URL (at DEBUG), query and all: a delegation token's value is hidden there."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.msg, record.args = hide_tokens(record.getMessage()), None
        return True


logging.getLogger("urllib3.connectionpool").addFilter(_HidingTokens())


@dataclass(frozen=True)
class SpnegoSettings:
    """How a client authenticates to a kerberized namenode with SPNEGO: as ``principal`` from ``keytab`` (read
    by GSSAPI into a ticket cache in memory, and renewed from it), else from the ticket cache
    (``$KRB5CCNAME``, filled by ``kinit``) for ``principal`` or its default one; to the namenode as
    ``service_principal`` (``_HOST`` replaced by the namenode's host as the location names it; no realm: the
    default one)."""

    principal: str | None = None
    keytab: str | None = None
    service_principal: str = DEFAULT_SERVICE_PRINCIPAL

    def service_for(self, host: str) -> str:
        return self.service_principal.replace("_HOST", host.lower())

    def client(self) -> str:
        """Who authenticates, and from where, for messages."""
        return describe_client(self.principal, self.keytab)

    def advice(self) -> str:
        if self.keytab:
            return (
                f"check that the keytab holds current keys of {self.principal} (kinit -kt {self.keytab} tests it) "
                "and that [hdfs] kerberos_service_principal names the namenode's SPNEGO principal"
            )
        return (
            "run kinit (or set [hdfs] kerberos_principal and kerberos_keytab), and check that [hdfs] "
            "kerberos_service_principal names the namenode's SPNEGO principal"
        )


class SpnegoLogin:
    """SPNEGO for one client: the caller's credentials (:class:`~acidstream.kerberos.KerberosCredentials`: a keytab's
    obtained again near their end, a ticket cache's read again) as a ``requests`` auth; a missing or expired
    ticket or a missing keytab fails before the request. Holds no secret: a keytab stays a file name."""

    def __init__(self, settings: SpnegoSettings, url: str, host: str) -> None:
        self.settings, self.url, self.host = settings, url, host
        self._credentials = KerberosCredentials(settings.principal, settings.keytab)
        self._auth: Any = None

    def __repr__(self) -> str:
        return f"SpnegoLogin({self.settings.client()} to {self.settings.service_for(self.host)})"

    def auth(self) -> Any:
        import gssapi
        from requests_gssapi import DISABLED, HTTPSPNEGOAuth

        try:
            creds = self._credentials.get()
        except LoginFailed as exc:
            raise self.refused(f"no Kerberos credentials: {exc}") from None
        auth = self._auth
        if auth is None or auth.creds is not creds:
            # Mutual authentication would check only the answer that carries the server's token: the rest of
            # the exchange is plain HTTP, and DataNodes answer without one.
            target = gssapi.Name(self.settings.service_for(self.host), gssapi.NameType.kerberos_principal)
            auth = self._auth = HTTPSPNEGOAuth(
                creds=creds, target_name=target, mutual_authentication=DISABLED
            )
        return auth

    def diagnose(self) -> str:
        """Why a namenode's SPNEGO challenge (HTTP 401) went unanswered: requests-gssapi keeps GSSAPI's reason
        to itself, so a context to the service is set up again here, and its error (an unknown service
        principal, a ticket that cannot be had) is the reason."""
        import gssapi

        auth = self.auth()
        try:
            gssapi.SecurityContext(name=auth.target_name, creds=auth.creds, usage="initiate").step()
        except gssapi.exceptions.GSSError as exc:
            return gss_text(exc)
        return "the namenode did not accept the caller's service ticket (are its HTTP keys current?)"

    def refused(self, why: str) -> AuthenticationError:
        return AuthenticationError(
            f"WebHDFS at {self.url} refused {self.settings.client()} for the service principal "
            f"{self.settings.service_for(self.host)}: {why}; {self.settings.advice()}"
        )


class WebHdfsClient:
    """One namenode's WebHDFS endpoint (``http://host:port/webhdfs/v1``): requests, with their timeouts, status
    checks and retries. Thread-safe (one ``requests`` session, its pooled connections).

    Who asks: the holder of ``delegation`` (an HDFS delegation token) when given, else the Kerberos principal of
    ``kerberos`` (SPNEGO) when given, else ``user``, asserted as an open cluster takes it (``user.name``)."""

    def __init__(
        self,
        host: str,
        port: int,
        user: str,
        *,
        kerberos: SpnegoSettings | None = None,
        delegation: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
    ) -> None:
        self.url = f"http://{host}:{port}/webhdfs/v1"
        self.user = user
        self.timeout = (connect_timeout, read_timeout)
        self.session = requests.Session()
        self._delegation = delegation
        self.login = SpnegoLogin(kerberos, self.url, host) if kerberos and not delegation else None
        #: The DataNode a namenode last sent a read to: its WebHDFS URL and the query it was sent with.
        self._datanode: tuple[str, dict[str, str]] | None = None

    def __repr__(self) -> str:
        who = "a delegation token" if self._delegation else repr(self.login) if self.login else self.user
        return f"WebHdfsClient({self.url} as {who})"

    @property
    def identity(self) -> tuple[str, str]:
        """Who this client asks as (its namenode, and a user, a principal or a token's holder), for equality."""
        return self.url, repr(self)

    def _needs_kerberos(self, op: str) -> None:
        """A namenode renews and cancels tokens only for a caller authenticated with Kerberos."""
        if self.login is None:
            raise AuthenticationError(
                f"WebHDFS {op} at {self.url}: a delegation token is renewed or cancelled only by a caller "
                "authenticated with Kerberos, not with a token or a user name: run kinit (or set [hdfs] "
                "kerberos_principal and kerberos_keytab) with [hdfs] kerberos = true and no delegation_token"
            )

    def _who(self) -> dict[str, str]:
        """The query parameters that say who asks."""
        if self._delegation:
            return {"delegation": self._delegation}
        if self.login is not None:
            self.session.auth = self.login.auth()
            return {}
        return {"user.name": self.user}

    def get_delegation_token(self, renewer: str | None = None) -> str:
        """A new HDFS delegation token of the caller's (who must have authenticated with Kerberos), renewable by
        ``renewer`` (a short user name; the caller when None): what a process without credentials of its own
        sends as ``delegation=``. Its lifetime is the namenode's (a day by default, unless renewed; a week at
        most)."""
        params: dict[str, Any] = {"renewer": renewer} if renewer else {}
        answer = self.call("GETDELEGATIONTOKEN", "GET", "/", **params).json()
        token = (answer or {}).get("Token") or {}
        if not token.get("urlString"):
            raise AuthenticationError(
                f"WebHDFS at {self.url} gave no delegation token: only a caller authenticated with Kerberos gets "
                "one (set [hdfs] kerberos = true and run kinit)"
            )
        return str(token["urlString"])

    def renew_delegation_token(self, token: str) -> int:
        """Extend ``token``'s life by the namenode's renewal interval; returns its new expiry (ms since the
        epoch). Only its renewer may, authenticated with Kerberos."""
        self._needs_kerberos("RENEWDELEGATIONTOKEN")
        return int(self.call("RENEWDELEGATIONTOKEN", "PUT", "/", token=token).json()["long"])

    def cancel_delegation_token(self, token: str) -> None:
        """End ``token`` now: every request that carries it is refused from then on. Only its owner or renewer
        may, authenticated with Kerberos."""
        self._needs_kerberos("CANCELDELEGATIONTOKEN")
        self.call("CANCELDELEGATIONTOKEN", "PUT", "/", token=token)

    def call(
        self, op: str, method: str, path: str, *, data: bytes | None = None, **params: Any
    ) -> requests.Response:
        """Send ``op`` for ``path`` to the namenode (following a redirect to a DataNode for reads); the answer,
        whose status was a success. Reads and listings (``GET``) are tried again on a failure that is not an
        answer (see the module's docstring)."""
        url = self.url + quote(path, safe="/")
        query = {"op": op, **self._who(), **params}
        tries = IDEMPOTENT_TRIES if method == "GET" else 1
        for attempt in range(tries):
            try:
                return self._send(op, method, path, url, query, data)
            except (FileNotFoundError, FileExistsError, PermissionError, TimeoutError):
                raise  # an answer, or a server that hangs: asking again only waits longer
            except OSError:
                if attempt + 1 == tries:
                    raise
                time.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of ``path`` from ``offset`` (fewer at its end). A namenode answers ``OPEN`` with a
        redirect to a DataNode, which reads the file (through its own HDFS client, from whichever DataNodes
        hold its blocks) and sends the bytes: two exchanges a read. The DataNode and the query the namenode
        sent the first read with (its RPC address, and on a kerberized cluster a delegation token of the
        caller's) serve every later read of any file, one exchange each. When that DataNode fails the read
        for any reason but the file's own (gone, forbidden), the namenode is asked again."""
        datanode = self._datanode
        if datanode is not None:
            base, query = datanode
            url = base + quote(path, safe="/")
            try:
                return self._send(
                    "OPEN", "GET", path, url, {**query, "offset": offset, "length": length}, None
                ).content
            except (FileNotFoundError, PermissionError):
                raise
            except (OSError, AuthenticationError):
                self._datanode = None  # gone, or its token expired: the namenode names one again
        answer = self.call("OPEN", "GET", path, offset=offset, length=length)
        if answer.history:
            self._datanode = _datanode_of(answer.history[-1].headers.get("Location", ""), path)
        return answer.content

    def send_data(self, op: str, method: str, path: str, location: str, data: bytes) -> None:
        """Send ``data`` to the DataNode ``location`` a namenode's ``CREATE`` or ``APPEND`` redirected to."""
        self._send(op, method, path, location, None, data, octets=True)

    def _send(
        self,
        op: str,
        method: str,
        path: str,
        url: str,
        query: dict[str, Any] | None,
        data: bytes | None,
        *,
        octets: bool = False,
    ) -> requests.Response:
        where = f"WebHDFS {op} {path} at {self.url}"
        try:
            answer = self.session.request(
                method,
                url,
                params=query,
                data=data,
                headers={"content-type": "application/octet-stream"} if octets else None,
                allow_redirects=method == "GET",
                timeout=self.timeout,
            )
        except requests.Timeout as exc:
            raise TimeoutError(
                hide_tokens(f"{where}: no answer within {self.timeout[1]:g} s: {exc}")
            ) from None
        except requests.RequestException as exc:
            if self.login is not None and _is_spnego_failure(exc):
                raise self.login.refused(hide_tokens(str(exc))) from None
            raise ConnectionError(hide_tokens(f"{where}: {exc}")) from None
        if answer.status_code >= 400:
            raise self._error(where, answer)
        return answer

    def _error(self, where: str, answer: requests.Response) -> OSError | AuthenticationError:
        """What an error answer stands for: a refusal of who the caller is (HTTP 401, a ``SecurityException`` or
        ``InvalidToken``, a SPNEGO exchange the server failed) is an :class:`AuthenticationError`; else the
        namenode's own ``OSError`` when its ``RemoteException`` is one of :data:`_ANSWERS`, else a plain one
        (the store failed; the same request may succeed later)."""
        try:
            remote = answer.json()["RemoteException"]
            name, message = str(remote["exception"]), hide_tokens(str(remote["message"]))
        except (ValueError, KeyError, TypeError):
            name, message = "", hide_tokens(answer.text[:200])
            if "html" in answer.headers.get("content-type", ""):  # Jetty's error page: its reason says it
                message = answer.reason
        if answer.status_code == 401 or name in _REFUSALS or "GSSException" in message:
            if answer.status_code == 401 and self.login is not None:
                message = self.login.diagnose()
            return AuthenticationError(f"{where} refused {self._refused_who()}: {message}")
        if not name:
            return OSError(f"{where}: HTTP {answer.status_code}: {message!r}")
        return _ANSWERS.get(name, OSError)(f"{where}: {name}: {message}")

    def _refused_who(self) -> str:
        if self._delegation:
            return (
                "the HDFS delegation token ([hdfs] delegation_token): it expired or was cancelled; the process "
                "that gave it must get a new one (GETDELEGATIONTOKEN) and renew it before it expires"
            )
        if self.login is not None:
            return f"{self.login.settings.client()}; {self.login.settings.advice()}"
        return (
            f"the user {self.user} (no Kerberos): a kerberized cluster needs [hdfs] kerberos = true (or "
            "hadoop.security.authentication=kerberos in $HADOOP_CONF_DIR/core-site.xml) and kinit"
        )


def _is_spnego_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is requests-gssapi's failure to set up a security context (no ticket for the service, an
    unknown service principal): the caller's credentials, not the network."""
    from requests_gssapi.exceptions import SPNEGOExchangeError

    return isinstance(exc, SPNEGOExchangeError)


def _datanode_of(location: str, path: str) -> tuple[str, dict[str, str]] | None:
    """The DataNode's WebHDFS URL (``location`` up to ``/webhdfs/v1``) and its query but for the range, from a
    namenode's redirect of an ``OPEN`` of ``path``; None for a redirect of another shape."""
    parts = urlsplit(location)
    root, found, rest = parts.path.partition("/webhdfs/v1/")
    if not parts.scheme or not found or unquote("/" + rest) != path:
        return None
    query = {k: v for k, v in parse_qsl(parts.query) if k not in ("offset", "length")}
    return f"{parts.scheme}://{parts.netloc}{root}/webhdfs/v1", query


class _Reader(io.RawIOBase):
    """A file's bytes as of its length when opened, read by ``OPEN`` requests of at least :data:`READ_AHEAD`
    bytes. A file that ends early (replaced or cut meanwhile) fails the read instead of returning less."""

    def __init__(self, client: WebHdfsClient, path: str, size: int) -> None:
        super().__init__()
        self.client, self.path, self.size = client, path, size
        self._pos = 0
        self._cached_at, self._cached = 0, b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self._pos + size)
        if self._pos >= end:
            return b""
        start = self._pos - self._cached_at
        if start < 0 or end > self._cached_at + len(self._cached):
            self._fetch(self._pos, max(end - self._pos, READ_AHEAD))
            start = 0
        data = self._cached[start : start + end - self._pos]
        self._pos += len(data)
        return data

    def _fetch(self, offset: int, length: int) -> None:
        length = min(length, self.size - offset)
        data = self.client.read_range(self.path, offset, length)
        if len(data) != length:
            raise OSError(
                f"WebHDFS OPEN {self.path} at {self.client.url}: {len(data)} bytes at offset {offset} where "
                f"{length} were asked for (the file changed while it was read)"
            )
        self._cached_at, self._cached = offset, data


class _Writer(io.RawIOBase):
    """A file written in place: every :meth:`flush` sends the bytes written since as one request that leaves
    the file complete, so readers see the flushed prefix and the next bytes append. The first request of a new
    file (``"wb"``) is a ``CREATE`` that replaces any file of that name; then ``APPEND``, to the DataNode
    address learnt from the namenode once. After a failed request the file's end is unknown: the writer is
    closed and sends nothing more."""

    def __init__(self, client: WebHdfsClient, path: str, *, create: bool, overwrite: bool = True) -> None:
        super().__init__()
        self.client, self.path = client, path
        self._create = create
        self._overwrite = overwrite  # False: the CREATE fails (FileExistsError) if a file is there
        self._location: str | None = None
        self._buffer = io.BytesIO()
        self._failed = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError(f"{self.path}: write to a closed WebHDFS file")
        return self._buffer.write(data)

    def flush(self) -> None:
        if not self.closed and not self._failed and (self._create or self._buffer.tell()):
            self._send()

    def close(self) -> None:
        if not self.closed:
            try:
                self.flush()
            finally:
                super().close()

    def _send(self) -> None:
        data = self._buffer.getvalue()
        try:
            if self._create:
                self._redirected("CREATE", "PUT", data, overwrite=str(self._overwrite).lower())
                self._create = False
            elif self._location is None:
                self._location = self._redirected("APPEND", "POST", data)
            else:
                self.client.send_data("APPEND", "POST", self.path, self._location, data)
        except BaseException:
            self._failed = True  # io's close flushes first: nothing more is sent
            super().close()
            raise
        self._buffer = io.BytesIO()

    def _redirected(self, op: str, method: str, data: bytes, **params: Any) -> str:
        """Ask the namenode for ``op``'s DataNode, send ``data`` there; returns the DataNode's address."""
        answer = self.client.call(op, method, self.path, **params)
        location = answer.headers.get("Location")
        if not location:
            raise OSError(f"WebHDFS {op} {self.path} at {self.client.url}: the namenode named no DataNode")
        self.client.send_data(op, method, self.path, location, data)
        return location


class WebHdfsHandler(pafs.FileSystemHandler):
    """pyarrow's view of a :class:`WebHdfsClient` (type name ``webhdfs``: not an object store). It keeps the
    files it opened for writing, by path, for :meth:`publish`."""

    def __init__(self, client: WebHdfsClient) -> None:
        self.client = client
        self._writing: weakref.WeakValueDictionary[str, _Writer] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def get_type_name(self) -> str:
        return "webhdfs"

    def equals(self, other: Any) -> bool:
        return isinstance(other, WebHdfsHandler) and other.client.identity == self.client.identity

    def normalize_path(self, path: str) -> str:
        return path

    def _status(self, path: str) -> dict[str, Any] | None:
        try:
            status: dict[str, Any] = self.client.call("GETFILESTATUS", "GET", path).json()["FileStatus"]
        except FileNotFoundError:
            return None
        return status

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [_info(path, self._status(path)) for path in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        found: list[pafs.FileInfo] = []
        root = selector.base_dir.rstrip("/") or "/"
        pending = [root]
        while pending:
            directory = pending.pop()
            try:
                listed = self.client.call("LISTSTATUS", "GET", directory).json()["FileStatuses"]["FileStatus"]
            except FileNotFoundError:
                if selector.allow_not_found and directory == root:
                    return []
                raise
            if len(listed) == 1 and not listed[0]["pathSuffix"] and listed[0]["type"] == "FILE":
                raise NotADirectoryError(f"{directory}: not a directory (WebHDFS at {self.client.url})")
            for status in listed:
                info = _info(f"{directory.rstrip('/')}/{status['pathSuffix']}", status)
                found.append(info)
                if selector.recursive and info.type == pafs.FileType.Directory:
                    pending.append(info.path)
        return found

    def create_dir(self, path: str, recursive: bool) -> None:
        self.client.call("MKDIRS", "PUT", path)

    def delete_dir(self, path: str) -> None:
        self._delete(path, recursive=True)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        try:
            entries = self.get_file_info_selector(pafs.FileSelector(path))
        except FileNotFoundError:
            if missing_dir_ok:
                return
            raise
        for info in entries:
            self._delete(info.path, recursive=True)

    def delete_root_dir_contents(self) -> None:
        self.delete_dir_contents("/")

    def delete_file(self, path: str) -> None:
        self._delete(path, recursive=False)

    def _delete(self, path: str, *, recursive: bool) -> None:
        done = self.client.call("DELETE", "DELETE", path, recursive=str(recursive).lower()).json()
        if not done.get("boolean"):
            raise FileNotFoundError(f"{path}: no such file or directory (WebHDFS at {self.client.url})")

    def move(self, src: str, dest: str) -> None:
        """HDFS's rename with options: atomic, replaces a file or an empty directory at ``dest`` as POSIX
        rename does, and fails with the namenode's reason (plain ``RENAME`` answers only "false")."""
        self.client.call("RENAME", "PUT", src, destination=dest, renameoptions="OVERWRITE")

    def copy_file(self, src: str, dest: str) -> None:
        with self._reader(src) as source, _Writer(self.client, dest, create=True) as target:
            target.write(source.read())

    def _reader(self, path: str) -> _Reader:
        status = self._status(path)
        if status is None:
            raise FileNotFoundError(f"{path}: no such file (WebHDFS at {self.client.url})")
        if status["type"] != "FILE":
            raise IsADirectoryError(f"{path}: a directory (WebHDFS at {self.client.url})")
        return _Reader(self.client, path, int(status["length"]))

    def read_prefix(self, path: str, length: int) -> bytes:
        """The first ``length`` bytes of ``path``, known to hold them (a listing gave its size): ``OPEN``
        without asking for the file's status first. A file shorter than that fails the read."""
        return _Reader(self.client, path, length).read()

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(self._reader(path), mode="r")

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(self._reader(path), mode="r")

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self._open_writing(path, create=True)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self._open_writing(path, create=False)

    def open_new(self, path: str) -> pa.NativeFile:
        """A file that must not exist: its ``CREATE`` (at its first flush or close) has ``overwrite=false``, so
        the namenode refuses it (``FileExistsError``) if one is there, and of two writers racing, one."""
        return self._open_writing(path, create=True, overwrite=False)

    def _open_writing(self, path: str, *, create: bool, overwrite: bool = True) -> pa.NativeFile:
        file = _Writer(self.client, path, create=create, overwrite=overwrite)
        with self._lock:
            self._writing[path] = file
        return pa.PythonFile(file, mode="w")

    def publish(self, path: str) -> None:
        """Send what was written to ``path`` since its last publication (nothing when it is not open)."""
        with self._lock:
            file = self._writing.get(path)
        if file is not None and not file.closed:
            file.flush()


def _info(path: str, status: dict[str, Any] | None) -> pafs.FileInfo:
    if status is None:
        return pafs.FileInfo(path, pafs.FileType.NotFound)
    if status["type"] == "DIRECTORY":
        return pafs.FileInfo(path, pafs.FileType.Directory, mtime_ns=int(status["modificationTime"]) * 10**6)
    return pafs.FileInfo(
        path, pafs.FileType.File, size=int(status["length"]), mtime_ns=int(status["modificationTime"]) * 10**6
    )


def webhdfs_filesystem(client: WebHdfsClient) -> pafs.PyFileSystem:
    """``client``'s namenode as a pyarrow filesystem."""
    return pafs.PyFileSystem(WebHdfsHandler(client))
