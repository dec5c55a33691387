"""The requests a merge makes on S3: what it must ask the store, and nothing it already knows.

A moto server of the test's own, in this process, records every request; the merge runs in this process
(``workers=1``) on the settings :func:`configure_stores` gives it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream import Metastore
from acidstream.storage import configure_stores
from support.deps import import_or_skip

BUCKET = "acidstream-requests"
DDL = (
    "CREATE TABLE t (id int, v string) PARTITIONED BY (p int) CLUSTERED BY (id) INTO 2 BUCKETS "
    "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


class Recorded:
    """The requests served since :meth:`clear`: (method, path, query), and each PUT's ``If-None-Match``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []
        self.if_none_match: dict[str, str | None] = {}

    def clear(self) -> None:
        self.requests.clear()

    def of(self, method: str, listing: bool = False) -> list[str]:
        """Paths (listings: queries) of the requests of ``method``; a GET of the bucket itself lists it."""
        out = []
        for m, path, query in self.requests:
            lists = m == "GET" and path.strip("/") == BUCKET
            if m == method and lists == listing:
                out.append(query if listing else path)
        return out


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    import_or_skip("moto.server")
    import boto3
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    seen = Recorded()

    def recording(environ: dict[str, Any], start_response: Any) -> Any:
        seen.requests.append(
            (environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""))
        )
        if environ["REQUEST_METHOD"] == "PUT":
            seen.if_none_match[environ.get("PATH_INFO", "")] = environ.get("HTTP_IF_NONE_MATCH")
        return app(environ, start_response)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = make_server("127.0.0.1", port, recording, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{port}"
    keys = {"access_key": "acidstream", "secret_key": "acidstream", "region": "us-east-1"}
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="acidstream",
        aws_secret_access_key="acidstream",
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)
    previous = configure_stores(s3={"endpoint_override": endpoint, "scheme": "http", **keys})
    try:
        yield seen
    finally:
        configure_stores(**previous)
        server.shutdown()
        thread.join()


def test_a_merge_asks_the_store_only_what_it_does_not_know(tmp_path: Path, recorded: Recorded) -> None:
    with Metastore.connect(
        f"sqlite:///{tmp_path / 'ms.db'}", warehouse=f"s3://{BUCKET}/{tmp_path.name}/wh"
    ) as ms:
        ms.execute(DDL)
        table = ms.table("t")
        for first in (0, 100):  # two deltas in each of two partitions
            ids = list(range(first, first + 20))
            rows = pa.table({"id": ids, "v": [str(i) for i in ids], "p": [i % 2 for i in ids]})
            table.merge(rows, on=["id"], workers=1)
        recorded.clear()
        changes = pa.table({"id": [1, 2, 3, 500], "v": ["a", "b", "c", "d"], "p": [1, 0, 1, 0]})
        counts = table.merge(changes, on=["id"], workers=1)
        assert (counts["updated"], counts["inserted"]) == (3, 1)
        merged = recorded.requests[:]
        assert ms.table("t").scan().to_arrow().num_rows == 41

    recorded.requests = merged
    put = recorded.of("PUT")
    new_files = [p for p in put if "/bucket_" in p]
    assert new_files, put
    # one listing of the table plans the merge (not one per partition and per delta directory)
    assert len(recorded.of("GET", listing=True)) == 1, recorded.of("GET", listing=True)
    # no directory marker objects: a prefix holding objects is a directory to every reader
    assert not [p for p in put if p.endswith("/")], put
    # each new directory's version file is put, without asking first whether it is there
    versions = [p for p in put if p.endswith("/_orc_acid_version")]
    assert versions and not [p for p in recorded.of("HEAD") if p.endswith("/_orc_acid_version")]
    # the files written are not read back for their checksums (the writer kept them), and the no-overwrite
    # check is the PUT itself (If-None-Match: *), no HEAD before it
    assert not [p for p in recorded.of("GET") if p in new_files]
    assert not [p for p in recorded.of("HEAD") if p in new_files]
    assert {recorded.if_none_match[p] for p in new_files} == {"*"}
    # the files read are fetched without a HEAD first: the plan's listing gave their lengths
    read = recorded.of("GET")
    assert read and not [p for p in recorded.of("HEAD") if p in read]


def test_of_two_writers_racing_for_one_file_the_store_takes_one_and_keeps_its_bytes(
    tmp_path: Path, recorded: Recorded
) -> None:
    """The no-overwrite rule rests on S3's conditional PUT: neither writer is refused at its open (nothing is
    there yet), the second close is refused by the store, and its cleanup leaves the first writer's file."""
    from acidstream.acid.codec import BucketCodec
    from acidstream.acid.orc import AcidWriter, WriterOptions
    from acidstream.acid.types import parse_columns
    from acidstream.errors import StreamingIOFailure
    from acidstream.storage import table_filesystem

    fs, root = table_filesystem(f"s3://{BUCKET}/{tmp_path.name}")
    path = f"{root}/delta_0000001_0000001_0000/bucket_00000"
    columns, bucket = parse_columns("id int"), BucketCodec.V1.encode(0, 0)
    first, second = (AcidWriter(fs, path, columns, options=WriterOptions(), side_file=False) for _ in "ab")
    first.insert(1, bucket, pa.table({"id": pa.array([1, 2], pa.int32())}))
    second.insert(1, bucket, pa.table({"id": pa.array([3], pa.int32())}))
    first.close()
    with fs.open_input_file(path) as written:
        kept = written.read()
    with pytest.raises(StreamingIOFailure, match="already exists") as refused:
        second.close()
    assert isinstance(refused.value.__cause__, FileExistsError)
    with fs.open_input_file(path) as after:
        assert after.read() == kept  # neither replaced nor deleted by the refused writer's cleanup
    assert not [p for m, p, _ in recorded.requests if m == "DELETE"]


def test_a_compaction_lists_each_delta_once(tmp_path: Path, recorded: Recorded) -> None:
    """The compactor checks its deltas' lengths against their commits, then plans them: from one listing of
    each delta directory, not two."""
    with Metastore.connect(
        f"sqlite:///{tmp_path / 'ms.db'}", warehouse=f"s3://{BUCKET}/{tmp_path.name}/wh"
    ) as ms:
        ms.execute(DDL)
        table = ms.table("t")
        for first in (0, 100, 200):
            ids = list(range(first, first + 10))
            table.merge(
                pa.table({"id": ids, "v": [str(i) for i in ids], "p": [0] * 10}), on=["id"], workers=1
            )
        recorded.clear()
        ms.compact("default.t", partition="p=0", kind="major", wait=True)
        listed = [q for q in recorded.of("GET", listing=True) if "delta_" in q]
        assert ms.table("t").scan().to_arrow().num_rows == 30
    assert len(listed) == 3 and len(set(listed)) == 3, listed
