"""An S3 server (moto's) on loopback for the tests, found by acidstream as any S3 client finds one: through the
usual AWS environment variables, which :func:`s3_server` points at it for as long as it runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

#: Buckets the server starts with: the tests' own and the README's example bucket.
BUCKETS = ("acidstream-tests", "acidstream-demo")


@contextmanager
def s3_server() -> Iterator[str]:
    """Start the server with :data:`BUCKETS`; yields its URL."""
    boto3 = pytest.importorskip("boto3")
    moto_server = pytest.importorskip("moto.server")
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
