"""Storage locations no store can serve are refused, naming them, before anything is created; ``s3a://`` (what
Hive and Spark users write) is S3; an S3 endpoint that does not answer is one line, after one try."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from acidstream import Metastore
from acidstream.errors import NoSuchObjectException, StorageLocationError
from acidstream.storage import check_location, configure_stores
from support.s3server import BUCKETS

DDL = "CREATE TABLE t (id int, note string) TBLPROPERTIES ('transactional'='true')"


@pytest.mark.parametrize(
    ("warehouse", "reason"),
    [
        ("s3://", "names no bucket"),
        ("s3:///wh", "names no bucket"),
        ("s3a:///wh", "names no bucket"),
        ("swebhdfs://127.0.0.1:1/wh", "not supported"),
        ("hdfs://127.0.0.1:notaport/wh", "port is not a number"),
        ("s3://bucket/wh?region=eu-west-3&scheme=ftp", "scheme 'ftp'"),
        ("nosuchstore://x/wh", "Unrecognized filesystem"),
    ],
)
def test_a_location_no_store_serves_is_refused_naming_it_before_anything_is_created(
    warehouse: str, reason: str, tmp_path: Path
) -> None:
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
        with pytest.raises(StorageLocationError, match=rf"^{re.escape(warehouse)}: .*{reason}"):
            ms.execute(DDL)
        with pytest.raises(NoSuchObjectException):
            ms.table("t")
        assert ms.show_txns() == []


def test_an_s3_scheme_other_than_http_or_https_is_refused_when_set() -> None:
    with pytest.raises(StorageLocationError, match=r"scheme: 'ftp' is not http or https"):
        configure_stores(s3={"scheme": "ftp"})


def test_s3a_locations_are_s3(s3_endpoint: str, tmp_path: Path) -> None:
    warehouse = f"s3a://{BUCKETS[0]}/{uuid.uuid4().hex[:12]}/wh"
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
        ms.execute(DDL)
        ms.table("t").merge(pd.DataFrame({"id": [1, 2], "note": ["one", "two"]}), on=["id"])
        assert ms.table("t").location.startswith("s3a://")
        assert sorted(ms.table("t").scan().to_arrow().column("id").to_pylist()) == [1, 2]
    with Metastore.connect(
        f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse.replace("s3a", "s3", 1)
    ) as ms:
        assert sorted(ms.table("t").scan().to_arrow().column("id").to_pylist()) == [1, 2]


@pytest.fixture
def refusing_endpoint() -> Iterator[tuple[str, list[int]]]:
    """``(http://127.0.0.1:port, attempts)``: a loopback port that takes each connection and closes it at once
    (as a server that is not S3 would), counting them."""
    attempts: list[int] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            attempts.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", attempts
    finally:
        listener.close()


def test_an_s3_endpoint_that_does_not_answer_is_reported_after_one_try(
    refusing_endpoint: tuple[str, list[int]],
) -> None:
    endpoint, attempts = refusing_endpoint
    previous = configure_stores(s3={"endpoint_override": endpoint, "access_key": "a", "secret_key": "b"})
    try:
        with pytest.raises(
            StorageLocationError, match=r"^s3://bucket/wh: its bucket 'bucket' cannot be reached"
        ):
            check_location("s3://bucket/wh")
    finally:
        configure_stores(**previous)
    assert len(attempts) == 1


def test_the_command_line_reports_an_s3_warehouse_without_a_server_in_one_line(tmp_path: Path) -> None:
    """The README's S3 example with nothing at the endpoint (a closed loopback port): exit code 5 and one
    line naming the warehouse, no traceback."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        closed = probe.getsockname()[1]
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed}",
        "AWS_ACCESS_KEY_ID": "a",
        "AWS_SECRET_ACCESS_KEY": "b",
        "ACIDSTREAM_METASTORE": f"sqlite:///{tmp_path / 'm.db'}",
        "ACIDSTREAM_WAREHOUSE": "s3://acidstream-demo/warehouse",
    }
    cli = [sys.executable, "-m", "acidstream.cli"]
    subprocess.run([*cli, "metastore", "init"], env=env, cwd=tmp_path, check=True, capture_output=True)
    done = subprocess.run(
        [*cli, "sql", DDL], env=env, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 5, done.stderr
    assert "Traceback" not in done.stderr
    assert len(errors) == 1 and "StorageLocationError: s3://acidstream-demo/warehouse" in errors[0], (
        done.stderr
    )
