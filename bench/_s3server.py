"""An S3 server (moto's) on loopback in a child process, counting the requests it serves by kind.

``GET /_counts`` (not counted) answers the counts so far as JSON: a benchmark reads them before and after a
commit to know what the commit cost. Kinds: PUT (objects and multipart parts), GET, LIST, HEAD, DELETE (of an
object, or a bulk delete of many), COPY (a PUT with ``x-amz-copy-source``) and POST (a multipart upload's start
and completion).

    python bench/_s3server.py PORT      # serves until killed
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

KINDS = ("PUT", "GET", "LIST", "HEAD", "DELETE", "COPY", "POST")
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def kind(environ: dict[str, Any]) -> str:
    """The request's kind: an object GET and a listing are both GETs of S3's HTTP API."""
    method, path, query = (
        environ["REQUEST_METHOD"],
        environ.get("PATH_INFO", ""),
        environ.get("QUERY_STRING", ""),
    )
    if method == "PUT" and "HTTP_X_AMZ_COPY_SOURCE" in environ:
        return "COPY"
    if method == "GET" and (path.strip("/").count("/") == 0 or "list-type" in query):
        return "LIST"  # a GET of the bucket itself lists it
    if method == "POST" and "delete" in query:
        return "DELETE"
    return method if method in KINDS else "POST"


def counting(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/_counts":
            with lock:
                body = json.dumps(dict(counts)).encode()
            start_response(
                "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            )
            return [body]
        with lock:
            counts[kind(environ)] += 1
        return app(environ, start_response)

    return wrapped


def serve(port: int) -> None:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import run_simple

    app = DomainDispatcherApplication(create_backend_app)
    run_simple("127.0.0.1", port, counting(app), threaded=True)


class S3Server:
    """A running server: its endpoint and its counts."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def counts(self) -> Counter[str]:
        with urllib.request.urlopen(f"{self.endpoint}/_counts") as answer:
            return Counter(json.loads(answer.read()))

    @contextmanager
    def counted(self) -> Iterator[Counter[str]]:
        """The requests made inside the block, filled in when it ends."""
        spent: Counter[str] = Counter()
        before = self.counts()
        yield spent
        spent.update(self.counts() - before)

    def storage_options(self) -> dict[str, str]:
        """For deltalake (object_store): the endpoint, plain HTTP, and a commit without a lock service."""
        return {
            **CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        }


@contextmanager
def s3_server(bucket: str) -> Iterator[S3Server]:
    """Start the server with ``bucket`` and point this process's AWS environment at it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, __file__, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        server = S3Server(endpoint)
        deadline = time.monotonic() + 60
        while True:
            try:
                server.counts()
                break
            except OSError:
                if child.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the S3 server did not start (exit {child.poll()})") from None
                time.sleep(0.2)
        os.environ.update({**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint})
        req = urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")
        urllib.request.urlopen(req).close()
        yield server
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
