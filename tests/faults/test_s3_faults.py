"""An S3 server that vanishes mid-write or mid-read, and one that refuses our credentials.

The server vanishes behind a :class:`~support.cutproxy.CutProxy`: to the client its cut is the server's death
(open connections reset mid-request, new ones refused), while the server behind keeps what was committed, as a
real S3 does and as a killed in-memory server would not. The cut is armed for a request line, so that it lands
inside a multipart upload (pyarrow uploads 10 MiB parts), inside a compaction's in-place publication, or
inside the reading of a file too large to be read in one request.
"""

from __future__ import annotations

import base64
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter, repl
from acidstream.acid.orc.reader import WHOLE_READ_BYTES
from acidstream.compactor import Cleaner, Compactor, CompactorConfig
from acidstream.errors import StorageLocationError, StorageUnavailable, StreamingIOFailure
from acidstream.faults import armed
from support.cutproxy import CutProxy, cut_proxy
from support.deps import import_or_skip
from support.s3server import BUCKETS, s3_server_process

boto3 = import_or_skip("boto3")
BUCKET = BUCKETS[0]
DDL = (
    "CREATE TABLE events (id int, payload string) CLUSTERED BY (id) INTO {buckets} BUCKETS "
    "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


@pytest.fixture
def proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CutProxy]:
    """The session's S3 server behind a proxy that the AWS environment points at for this test.

    Table locations get the S3 filesystem acidstream makes (delayed open), except that it gives up at the
    first refused connection: pyarrow's keeps reconnecting for 6 s per request, which would change no outcome
    here (the server stays away longer) and would make each test last a minute."""
    with cut_proxy(s3_endpoint) as p:
        monkeypatch.setenv("AWS_ENDPOINT_URL", p.url)
        impatient = pafs.S3FileSystem(
            endpoint_override=p.url,
            allow_delayed_open=True,
            retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1),
        )
        with armed("storage.filesystem", lambda fs: impatient if fs.type_name == "s3" else fs):
            yield p


@pytest.fixture
def ms(proxy: CutProxy, tmp_path: Path) -> Iterator[Metastore]:
    warehouse = f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/wh"
    with Metastore.connect(f"sqlite:///{tmp_path / 'metastore.db'}", warehouse=warehouse) as m:
        yield m


def _connect(ms: Metastore) -> StreamingConnection:
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("default")
        .with_table("events")
        .with_record_writer(writer)
        .connect()
    )


def _commit(ms: Metastore, rows: pa.Table) -> None:
    with _connect(ms) as conn, conn.transaction():
        conn.write_batch(rows)


def _rows(first: int, count: int, width: int = 8) -> pa.Table:
    """Rows whose payloads do not compress: ``count * width`` bytes reach the file."""
    noise = base64.b64encode(os.urandom(count * width * 3 // 4 + 3)).decode()
    return pa.table(
        {
            "id": pa.array(range(first, first + count), pa.int32()),
            "payload": [noise[i * width : (i + 1) * width] for i in range(count)],
        }
    )


def _scan(ms: Metastore) -> list[tuple[int, str]]:
    table = ms.table("events").scan().to_arrow().sort_by("id")
    return list(zip(table.column("id").to_pylist(), table.column("payload").to_pylist(), strict=True))


def _as_list(rows: pa.Table) -> list[tuple[int, str]]:
    return list(zip(rows.column("id").to_pylist(), rows.column("payload").to_pylist(), strict=True))


def _warehouse_key(ms: Metastore) -> str:
    return ms.warehouse.removeprefix(f"s3://{BUCKET}/")


def _dirs(ms: Metastore) -> list[str]:
    fs, path = pafs.FileSystem.from_uri(ms.table("events").location)
    return sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(path)))


def _merge(ms: Metastore, rows: pa.Table) -> None:
    ms.table("events").merge(rows, on=["id"], workers=1)  # in this process, which the proxy's settings reach


WRITES = {"streaming commit": _commit, "merge": _merge}


@pytest.mark.parametrize("write", WRITES)
def test_a_server_dying_inside_a_multipart_upload_fails_the_txn_typed_and_retryable(
    ms: Metastore, proxy: CutProxy, write: str
) -> None:
    ms.execute(DDL.format(buckets=1))
    committed = _rows(0, 100)
    WRITES[write](ms, committed)
    proxy.cut_at(rb"PUT /[^ ]*/bucket_00000\?partNumber=2&")  # part 1 of the file is up, part 2 starts
    with pytest.raises(StreamingIOFailure, match="bucket_00000") as failure:
        WRITES[write](ms, _rows(1000, 60_000, width=256))  # about 15 MiB in one file: two parts
    assert proxy.cuts == 1 and failure.value.retryable
    assert "UploadPart" in str(failure.value)  # the cause leads; a failed cleanup after it is a note at most
    proxy.restore()
    assert _scan(ms) == _as_list(committed)
    pending = boto3.client("s3").list_multipart_uploads(Bucket=BUCKET, Prefix=_warehouse_key(ms))
    assert [u["Key"].rsplit("/", 2)[-2] for u in pending["Uploads"]] == [_delta(2, write)]  # docs/s3.md
    assert [t.state.name for t in ms.show_txns()] == ["ABORTED"]
    later = _rows(200_000, 10)
    WRITES[write](ms, later)
    assert _scan(ms) == _as_list(committed) + _as_list(later)


def _delta(write_id: int, write: str) -> str:
    """The delta directory of ``write_id``: a mutation's has a statement id."""
    return f"delta_{write_id:07d}_{write_id:07d}" + ("_0000" if write == "merge" else "")


def test_a_server_dying_inside_a_compaction_leaves_the_committed_rows_and_the_next_pass_succeeds(
    ms: Metastore, proxy: CutProxy
) -> None:
    ms.execute(DDL.format(buckets=2))
    committed = [_rows(t * 100, 50) for t in range(4)]
    for rows in committed:
        _commit(ms, rows)
    expected = sorted(r for rows in committed for r in _as_list(rows))
    assert _scan(ms) == expected
    proxy.cut_at(rb"PUT /[^ ]*/base_[0-9]+_v[0-9]+/bucket_00001[? ]")  # its output half written in place
    failed = ms.get_compaction(ms.compact("default.events", kind="major", wait=True))
    assert (
        proxy.cuts == 1
        and failed.state == "failed"
        # pyarrow's words for a lost server, or botocore's (a file's conditional PUT, see storage.create_new)
        and re.search("NETWORK_CONNECTION|Could not connect", failed.error_message or "")
    )
    proxy.restore()
    half = f"base_0000004_v{failed.txn_id:07d}"
    assert half in _dirs(ms)  # its worker could not remove it: the server was gone
    assert _scan(ms) == expected  # txn T of base_N_vT never committed: no reader reads it
    done = ms.get_compaction(ms.compact("default.events", kind="major", wait=True))
    assert done.state == "ready for cleaning" and _scan(ms) == expected
    (cleaned,) = Cleaner(ms, CompactorConfig(retention=0)).run_once()
    assert half in cleaned.removed  # with the aborted writes' directories
    assert _dirs(ms) == [f"base_0000004_v{done.txn_id:07d}"] and _scan(ms) == expected


def test_a_scan_while_the_server_is_away_fails_typed_naming_the_table_and_succeeds_once_it_is_back(
    ms: Metastore, proxy: CutProxy
) -> None:
    ms.execute(DDL.format(buckets=2))
    committed = _rows(0, 100)
    _commit(ms, committed)
    proxy.cut()
    with pytest.raises(
        StorageUnavailable, match=re.escape(ms.table("events").location.removeprefix("s3://"))
    ) as failure:
        _scan(ms)
    assert failure.value.retryable and "NETWORK_CONNECTION" in str(failure.value)
    proxy.restore()
    assert _scan(ms) == _as_list(committed)


def test_a_server_dying_inside_the_read_of_a_large_file_is_no_corrupt_file(
    ms: Metastore, proxy: CutProxy
) -> None:
    """A file over ``WHOLE_READ_BYTES`` is read in ranges: the cut lands in a stripe's, after the tail's.
    pyarrow's ORC reader says ``OSError`` for that as for bytes that do not decode."""
    ms.execute(DDL.format(buckets=1))
    committed = _rows(0, 96_000, width=256)  # about 18 MiB in one file (the payloads compress by a quarter)
    _commit(ms, committed)
    fs, path = pafs.FileSystem.from_uri(ms.table("events").location)
    (data,) = [
        i for i in fs.get_file_info(pafs.FileSelector(path, recursive=True)) if i.base_name == "bucket_00000"
    ]
    assert data.size > WHOLE_READ_BYTES
    # a range from 100 kB to 10 MB in: stripes, read in 128 KiB ranges, after the tail at the file's end
    proxy.cut_at(rb"GET /[^ ]*/bucket_00000 HTTP/1\.1\r\n(?:[^\r\n]*\r\n)*?range: bytes=[1-9][0-9]{5,6}-")
    with pytest.raises(StorageUnavailable, match="bucket_00000") as failure:
        _scan(ms)
    assert proxy.cuts == 1 and failure.value.retryable and "NETWORK_CONNECTION" in str(failure.value)
    proxy.restore()
    assert _scan(ms) == _as_list(committed)


@pytest.fixture
def strict_server(s3_endpoint: str) -> Iterator[str]:
    """A server of its own that checks credentials (ours are unknown to it); its one unchecked request made
    our bucket there."""
    with s3_server_process({"INITIAL_NO_AUTH_ACTION_COUNT": "1"}) as endpoint:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint


def test_refused_credentials_are_named_before_any_txn_opens(
    strict_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/wh"
    with Metastore.connect(f"sqlite:///{tmp_path / 'metastore.db'}", warehouse=warehouse) as ms:
        ms.execute(DDL.format(buckets=1))  # on the session's server, which takes any credentials
        monkeypatch.setenv("AWS_ENDPOINT_URL", strict_server)
        for write in (
            lambda: ms.execute(
                "CREATE TABLE other (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
            ),
            lambda: _connect(ms),
            lambda: ms.table("events").merge(_rows(0, 3), on=["id"]),
        ):
            with pytest.raises(StorageLocationError, match=f"{re.escape(warehouse)}.*ACCESS_DENIED"):
                write()
        assert ms.show_txns() == []


def test_the_daemons_report_a_server_away_as_storage_unavailable_and_clean_once_it_is_back(
    proxy: CutProxy, tmp_path: Path
) -> None:
    """While the server is away the initiator and replication raise :class:`StorageUnavailable` (not
    pyarrow's ``OSError``), and a cleaning waits in "ready for cleaning" instead of being marked failed; once
    the server is back, a later pass (after the cleaning's claim lapsed) removes what the compaction replaced."""
    warehouse = f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/wh"
    config = CompactorConfig(delta_num_threshold=1, retention=0.0)
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse, txn_timeout=2.0) as ms:
        ms.execute(DDL.format(buckets=1))
        committed = [_rows(t * 100, 10) for t in range(5)]
        for rows in committed[:3]:
            _commit(ms, rows)
        compactor = Compactor(ms, config)
        assert compactor.compact("default.events").info.state == "ready for cleaning"
        for rows in committed[3:]:
            _commit(ms, rows)  # two new deltas: the initiator has a candidate
        before = _dirs(ms)
        proxy.cut()
        try:
            with pytest.raises(StorageUnavailable, match="NETWORK_CONNECTION"):
                compactor.run_once()
            assert [c.state for c in compactor.clean()] == ["ready for cleaning"]
            with (
                Metastore.connect(f"sqlite:///{tmp_path / 'r.db'}", warehouse=tmp_path / "r") as replica,
                pytest.raises(StorageUnavailable, match="NETWORK_CONNECTION"),
            ):
                repl.sync(ms, replica)
        finally:
            proxy.restore()
        assert [c.state for c in ms.show_compactions()] == ["ready for cleaning"]
        time.sleep(2.0)  # the claim of the cleaning that waited lapses with the txn timeout
        assert [c.state for c in compactor.clean()] == ["succeeded"]
        assert len(_dirs(ms)) < len(before)
        assert _scan(ms) == sorted(r for rows in committed for r in _as_list(rows))
