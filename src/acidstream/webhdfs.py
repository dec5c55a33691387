"""HDFS through its namenode's WebHDFS REST API, as a pyarrow filesystem (``pyarrow.fs.PyFileSystem`` of a
:class:`WebHdfsHandler`), on ``requests``: pyarrow's own HDFS filesystem needs libhdfs and a JVM on the client.

Written here rather than taken from fsspec's WebHDFS client, which has no request timeouts, returns a DataNode's
error answer to a read as the file's bytes, and sends a written file only when it is closed or a block's worth
is buffered, where streaming needs every flush readable at once (what ``hflush`` gives a JVM writer). Every
request here has a connect and a read timeout, every answer's status is checked (an error answer is an
``OSError``, never data), and idempotent requests (reads, listings) are tried again a bounded number of times.

Errors are the builtins pyarrow's filesystems raise: ``FileNotFoundError``, ``FileExistsError`` and
``PermissionError`` only when the namenode said so in its ``RemoteException``; anything else (a timeout, a
refused connection, an error status without that answer, a read shorter than the file) is a plain ``OSError``
(``TimeoutError``, ``ConnectionError``) naming the operation, the path and the namenode's URL.
"""

from __future__ import annotations

import io
import threading
import time
import weakref
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.fs as pafs
import requests

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
    "SecurityException": PermissionError,
}


class WebHdfsClient:
    """One namenode's WebHDFS endpoint (``http://host:port/webhdfs/v1``) as ``user``: requests, with their
    timeouts, status checks and retries. Thread-safe (one ``requests`` session, its pooled connections)."""

    def __init__(
        self,
        host: str,
        port: int,
        user: str,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
    ) -> None:
        self.url = f"http://{host}:{port}/webhdfs/v1"
        self.user = user
        self.timeout = (connect_timeout, read_timeout)
        self.session = requests.Session()

    def call(
        self, op: str, method: str, path: str, *, data: bytes | None = None, **params: Any
    ) -> requests.Response:
        """Send ``op`` for ``path`` to the namenode (following a redirect to a DataNode for reads); the answer,
        whose status was a success. Reads and listings (``GET``) are tried again on a failure that is not an
        answer (see the module's docstring)."""
        url = self.url + quote(path, safe="/")
        query = {"op": op, "user.name": self.user, **params}
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
            raise TimeoutError(f"{where}: no answer within {self.timeout[1]:g} s: {exc}") from exc
        except requests.RequestException as exc:
            raise ConnectionError(f"{where}: {exc}") from exc
        if answer.status_code >= 400:
            raise _error(where, answer)
        return answer


def _error(where: str, answer: requests.Response) -> OSError:
    """The ``OSError`` an error answer stands for: the namenode's own when its ``RemoteException`` is one of
    :data:`_ANSWERS`, else a plain one (the store failed; the same request may succeed later)."""
    try:
        remote = answer.json()["RemoteException"]
        name, message = str(remote["exception"]), str(remote["message"])
    except (ValueError, KeyError, TypeError):
        return OSError(f"{where}: HTTP {answer.status_code}: {answer.text[:200]!r}")
    return _ANSWERS.get(name, OSError)(f"{where}: {name}: {message}")


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
        data = self.client.call("OPEN", "GET", self.path, offset=offset, length=length).content
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

    def __init__(self, client: WebHdfsClient, path: str, *, create: bool) -> None:
        super().__init__()
        self.client, self.path = client, path
        self._create = create
        self._location: str | None = None
        self._buffer = io.BytesIO()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError(f"{self.path}: write to a closed WebHDFS file")
        return self._buffer.write(data)

    def flush(self) -> None:
        if not self.closed and (self._create or self._buffer.tell()):
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
                self._redirected("CREATE", "PUT", data, overwrite="true")
                self._create = False
            elif self._location is None:
                self._location = self._redirected("APPEND", "POST", data)
            else:
                self.client.send_data("APPEND", "POST", self.path, self._location, data)
        except BaseException:
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
        return isinstance(other, WebHdfsHandler) and (other.client.url, other.client.user) == (
            self.client.url,
            self.client.user,
        )

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

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(self._reader(path), mode="r")

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(self._reader(path), mode="r")

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self._open_writing(path, create=True)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self._open_writing(path, create=False)

    def _open_writing(self, path: str, *, create: bool) -> pa.NativeFile:
        file = _Writer(self.client, path, create=create)
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
