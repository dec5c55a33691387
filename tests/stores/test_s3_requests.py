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
    """The requests served since :meth:`clear`: (method, path, query)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []

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
    # the files written are not read back for their checksums (the writer kept them): no GET, and one HEAD
    # each (the no-overwrite check before the PUT)
    assert not [p for p in recorded.of("GET") if p in new_files]
    assert sorted(p for p in recorded.of("HEAD") if p in new_files) == sorted(new_files)
