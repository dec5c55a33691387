"""An S3 server (moto's) on loopback for the tests, found by acidstream as any S3 client finds one: through the
usual AWS environment variables, which :func:`s3_server` points at it for as long as it runs."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from support.deps import import_or_skip

#: Buckets the server starts with: the tests' own and the README's example bucket.
BUCKETS = ("acidstream-tests", "acidstream-demo")


@contextmanager
def s3_server() -> Iterator[str]:
    """Start the server with :data:`BUCKETS`; yields its URL."""
    boto3 = import_or_skip("boto3")
    moto_server = import_or_skip("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    settings = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "acidstream",
        "AWS_SECRET_ACCESS_KEY": "acidstream",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        client = boto3.client("s3", endpoint_url=endpoint)
        for bucket in BUCKETS:
            client.create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def s3_server_process(env: dict[str, str]) -> Iterator[str]:
    """A moto server of its own in a child process, configured by ``env`` (moto reads its settings from the
    environment at start: ``INITIAL_NO_AUTH_ACTION_COUNT`` makes it check credentials); yields its URL."""
    import_or_skip("moto.server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not start on port {port} (exit {server.poll()})")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait()
