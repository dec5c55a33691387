"""Two S3 requests pyarrow's S3 client cannot make, made with botocore (the ``s3`` extra) beside it.

* A GET of an object whose length a listing gave: pyarrow's ``open_input_file`` takes a path only and sends a
  HEAD for the object's size before each GET (a merge reading 320 files: 320 HEADs).
* A PUT that succeeds only where no object is (``If-None-Match: *``): the no-overwrite rule in the PUT itself,
  where pyarrow needs a HEAD first and two writers racing for one name could both pass it. AWS S3 and
  S3-compatible stores that follow it (moto, MinIO) answer 412 when the key exists.

Each is used only for an ``S3FileSystem`` whose options botocore can take over (endpoint, region, keys);
with botocore missing, or options it does not mirror (a proxy, a CA file, an assumed role, anonymous
access), the callers fall back to pyarrow's requests, as before.
"""

from __future__ import annotations

import functools
import io
import os
import threading
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

#: A file up to this size is put in one conditional PUT (pyarrow's delayed open does one plain PUT up to its
#: first part, 10 MiB); a larger one goes to pyarrow's multipart upload, after a HEAD.
ONE_PUT_BYTES = 10 << 20
#: Held while a client is made: a plan's first reads ask from several threads at once, and each client costs
#: about 0.2 s of CPU to make (botocore loads S3's service model).
_making = threading.Lock()


def client_for(fs: pafs.FileSystem) -> Any | None:
    """The botocore S3 client of ``fs``'s endpoint and credentials (one per process and options), or None."""
    if not isinstance(fs, pafs.S3FileSystem):
        return None
    try:
        options = fs.__reduce__()[1][0]
    except (TypeError, IndexError):
        return None
    if (
        options.get("anonymous")
        or options.get("role_arn")
        or options.get("tls_ca_file_path")
        or (options.get("proxy_options") or {}).get("host")
        or options.get("force_virtual_addressing")
    ):
        return None
    endpoint = options.get("endpoint_override") or ""
    if endpoint and "://" not in endpoint:
        endpoint = f"{options.get('scheme') or 'https'}://{endpoint}"
    key = (
        os.getpid(),  # a forked child makes its own: the parent's pooled connections are not its own
        endpoint,
        fs.region or options.get("region") or "",
        options.get("access_key") or "",
        options.get("secret_key") or "",
        options.get("session_token") or "",
        float(options.get("connect_timeout") or -1),
        float(options.get("request_timeout") or -1),
    )
    with _making:
        return _client(*key)


@functools.cache
def _client(
    pid: int,
    endpoint: str,
    region: str,
    access_key: str,
    secret_key: str,
    session_token: str,
    connect_timeout: float,
    request_timeout: float,
) -> Any | None:
    try:
        from botocore.config import Config
    except ImportError:
        return None
    config = Config(
        retries={"mode": "standard", "max_attempts": 3},  # pyarrow's AwsStandardS3RetryStrategy's
        max_pool_connections=32,
        connect_timeout=connect_timeout if connect_timeout > 0 else 10,
        read_timeout=request_timeout if request_timeout > 0 else 60,
        s3={"addressing_style": "path"} if endpoint else {},  # pyarrow's, at an endpoint of one's own
    )
    return _session().create_client(
        "s3",
        endpoint_url=endpoint or None,
        region_name=region or None,
        aws_access_key_id=access_key or None,
        aws_secret_access_key=secret_key or None,
        aws_session_token=session_token or None,
        config=config,
    )


@functools.cache
def _session() -> Any:
    """One botocore session a process: its loader keeps S3's service model once loaded, for every client."""
    import botocore.session

    return botocore.session.get_session()


def _bucket_key(path: str) -> tuple[str, str]:
    bucket, _, key = path.lstrip("/").partition("/")
    return bucket, key


def _os_error(exc: Exception, what: str) -> OSError:
    """botocore's failure as the ``OSError`` pyarrow's client would raise: a missing key is
    ``FileNotFoundError``, a key that exists (412) ``FileExistsError``, a refusal ``PermissionError``."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404 or code in ("NoSuchKey", "NotFound"):
            return FileNotFoundError(f"{what}: no such object")
        if status == 412 or code == "PreconditionFailed":
            return FileExistsError(f"{what} already exists")
        if status == 403:
            return PermissionError(f"{what}: {exc}")
    return OSError(f"{what}: {exc}")


def get_prefix(client: Any, path: str, length: int) -> bytes:
    """The first ``length`` bytes of the object at ``path`` (``bucket/key``), in one GET; an object shorter
    than that fails, as a read beyond its end would."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = _bucket_key(path)
    what = f"S3 GET s3://{path}"
    try:
        ranged = {"Range": f"bytes=0-{length - 1}"} if length > 0 else {}
        answer = client.get_object(Bucket=bucket, Key=key, **ranged)
        data: bytes = answer["Body"].read()
    except (BotoCoreError, ClientError) as exc:
        raise _os_error(exc, what) from None
    if len(data) < length:
        raise OSError(f"{what}: {len(data)} bytes, {length} expected")
    return data[:length]


def put_new(client: Any, path: str, data: bytes) -> None:
    """Put ``data`` at ``path`` unless an object is there (``FileExistsError``), in one request."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = _bucket_key(path)
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except (BotoCoreError, ClientError) as exc:
        raise _os_error(exc, f"S3 PUT s3://{path}") from None


def open_new(fs: pafs.FileSystem, client: Any, path: str) -> pa.NativeFile:
    """An output stream of a new object at ``path``: put with ``If-None-Match: *`` at its close (which then
    raises ``FileExistsError`` if one is there, leaving it as it was), or, once it outgrows
    :data:`ONE_PUT_BYTES`, checked with a HEAD and handed to ``fs``'s multipart upload."""
    return pa.PythonFile(_NewObject(fs, client, path), mode="w")


class _NewObject(io.RawIOBase):
    """The file of :func:`open_new`: its bytes held until its close, or until they outgrow one PUT."""

    def __init__(self, fs: pafs.FileSystem, client: Any, path: str) -> None:
        super().__init__()
        self._fs, self._client, self.path = fs, client, path
        self._buffer: io.BytesIO | None = io.BytesIO()
        self._upload: pa.NativeFile | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError(f"{self.path}: write to a closed S3 file")
        size = memoryview(data).nbytes
        if self._upload is not None:
            self._upload.write(data)
            return size
        assert self._buffer is not None
        self._buffer.write(data)
        if self._buffer.tell() > ONE_PUT_BYTES:
            self._hand_over()
        return size

    def _hand_over(self) -> None:
        """Too large for one PUT: pyarrow's multipart upload (which it cannot make conditional), once a HEAD
        found no object there."""
        assert self._buffer is not None
        try:
            self._fs.open_input_file(self.path).close()
        except FileNotFoundError:
            pass
        else:
            raise FileExistsError(f"{self.path} already exists")
        self._upload = self._fs.open_output_stream(self.path)
        self._upload.write(self._buffer.getbuffer())
        self._buffer = None

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._upload is not None:
                self._upload.close()
            elif self._buffer is not None:
                put_new(self._client, self.path, self._buffer.getvalue())
        finally:
            self._buffer = None
            super().close()
