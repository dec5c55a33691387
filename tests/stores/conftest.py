"""Warehouses on an object store: an S3 server (moto's) on loopback, started once per test session, and a
fresh ``s3://`` warehouse for each test. acidstream finds the server as any S3 client would: through the
usual AWS environment variables (``AWS_ENDPOINT_URL``, credentials, region)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream import Metastore

BUCKET = "acidstream-tests"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The server's URL; the AWS environment points at it for the rest of the session."""
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
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    try:
        yield endpoint
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3_warehouse(s3_endpoint: str) -> str:
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/wh"


@pytest.fixture
def s3_ms(metastore_url: str, s3_warehouse: str) -> Iterator[Metastore]:
    """A metastore (SQLite and PostgreSQL) whose warehouse is on the S3 server."""
    with Metastore.connect(metastore_url, warehouse=s3_warehouse) as ms:
        yield ms


@pytest.fixture
def local_ms(tmp_path: Path) -> Iterator[Metastore]:
    with Metastore.connect(f"sqlite:///{tmp_path / 'local.db'}", warehouse=tmp_path / "local-wh") as ms:
        yield ms
