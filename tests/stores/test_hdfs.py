"""Every capability on a warehouse in HDFS (Hadoop's MiniDFSCluster on loopback, reached through WebHDFS).

HDFS is what Hive's layout was made for: a directory renames atomically (a compaction writes under a temporary
name and renames), and a file written by a streaming batch stays open across its commits, each of which
publishes a readable prefix and appends its length to the ``_flush_length`` side file.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter, repl
from acidstream.acid.attempts import remove_if_empty
from acidstream.acid.sidefile import read_flush_lengths
from acidstream.compactor import Cleaner, CompactorConfig
from acidstream.errors import AcidStreamError, StorageLocationError
from acidstream.storage import WEBHDFS_PORT_ENV, capabilities, hdfs_filesystem, table_filesystem
from support.deps import import_or_skip
from support.hdfscluster import MiniHdfs

DDL = (
    "CREATE TABLE sales (id int, amount bigint) PARTITIONED BY (region string) CLUSTERED BY (id) INTO 2 BUCKETS "
    "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


@pytest.fixture
def hdfs_ms(hdfs_namenode: MiniHdfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Metastore]:
    """A SQLite metastore whose warehouse is a new directory of the session's HDFS, whose WebHDFS port the
    Hadoop client configuration says."""
    with _metastore_on(hdfs_namenode, tmp_path, monkeypatch) as ms:
        yield ms


@contextmanager
def _metastore_on(cluster: MiniHdfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Metastore]:
    monkeypatch.setenv("HADOOP_CONF_DIR", str(cluster.conf_dir))
    warehouse = f"{cluster.uri}/{uuid.uuid4().hex[:12]}/wh"
    with Metastore.connect(f"sqlite:///{tmp_path / 'hdfs.db'}", warehouse=warehouse) as ms:
        yield ms


@pytest.fixture(params=["open", "kerberos"])
def any_hdfs_ms(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Metastore]:
    """:func:`hdfs_ms` on the session's open HDFS, and on its kerberized one (WebHDFS behind SPNEGO, with a
    ticket of alice's in a ticket cache of the test's own): streaming, compaction and mutations hold alike."""
    if request.param == "open":
        cluster: MiniHdfs = request.getfixturevalue("hdfs_namenode")
    else:
        import_or_skip("requests_gssapi")
        cluster = request.getfixturevalue("hdfs_kerberos_namenode")
        kdc = request.getfixturevalue("kdc")
        monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'ccache'}")
        kdc.kinit("alice", kdc.dir / "alice.keytab", tmp_path / "ccache")
    with _metastore_on(cluster, tmp_path, monkeypatch) as ms:
        yield ms


def _connect(ms: Metastore, batch: int = 1) -> StreamingConnection:
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("default")
        .with_table("sales")
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(batch)
        .connect()
    )


def _write(conn: StreamingConnection, t: int) -> None:
    """Three rows of txn ``t``, ids ``10t .. 10t+2``, in both partitions."""
    for i in range(3):
        row = t * 10 + i
        conn.write(f"{row},{row * 100},{'eu' if row % 2 else 'us'}".encode())


def _stream(ms: Metastore, first: int, txns: int) -> None:
    with _connect(ms) as conn:
        for t in range(first, first + txns):
            conn.begin_transaction()
            _write(conn, t)
            conn.commit_transaction()


def _ids(ms: Metastore) -> list[int]:
    return sorted(ms.table("sales").scan().to_arrow().column("id").to_pylist())


def _rows(ms: Metastore) -> list[tuple[int, int, str]]:
    table = ms.table("sales").scan().to_arrow().sort_by("id")
    return list(zip(*(table.column(c).to_pylist() for c in ("id", "amount", "region")), strict=True))


def _dirs(ms: Metastore, region: str) -> list[str]:
    fs, path = table_filesystem(ms.table("sales").location)
    return sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(f"{path}/region={region}")))


def test_hdfs_renames_directories_and_flushes_readable_prefixes(hdfs_namenode: MiniHdfs) -> None:
    fs, path = table_filesystem(f"{hdfs_namenode.uri}/probe")
    assert path == "/probe"
    assert capabilities(fs) == capabilities(pafs.LocalFileSystem())
    assert capabilities(fs).can_flush_and_append and capabilities(fs).can_rename_directories


def test_stream_mutate_and_read(any_hdfs_ms: Metastore) -> None:
    ms = any_hdfs_ms
    ms.execute(DDL)
    _stream(ms, 1, 3)
    assert len(_rows(ms)) == 9
    ms.table("sales").merge(
        pd.DataFrame({"id": [10, 99], "amount": [-1, 9900], "region": ["us", "eu"]}), on=["id"]
    )
    ms.table("sales").update(pc.field("id") == 11, {"amount": pc.field("amount") + 1})
    assert ms.execute("DELETE FROM sales WHERE id = 12") == [(0, 0, 1)]
    assert ms.execute("UPDATE sales SET amount = 7 WHERE id = 20") == [(0, 1, 0)]
    rows = {r[0]: r for r in _rows(ms)}
    assert len(rows) == 9 and rows[10][1] == -1 and rows[11][1] == 1101 and 12 not in rows
    assert rows[99][2] == "eu" and rows[20][1] == 7


def test_an_open_batch_shows_readers_exactly_its_committed_prefix(any_hdfs_ms: Metastore) -> None:
    """One file per bucket stays open across the batch's commits; after each, a new reader sees the committed
    transactions and nothing of the one being written or the aborted one, through the side file's length."""
    ms = any_hdfs_ms
    ms.execute(DDL)
    with _connect(ms, batch=4) as conn:
        conn.begin_transaction()
        _write(conn, 1)
        conn.commit_transaction()
        assert _ids(ms) == [10, 11, 12]
        fs, table = table_filesystem(ms.table("sales").location)
        delta = f"{table}/region=us/delta_0000001_0000004"
        bucket = next(
            i.path
            for i in fs.get_file_info(pafs.FileSelector(delta))
            if i.base_name.startswith("bucket_") and not i.base_name.endswith("_flush_length")
        )
        lengths = read_flush_lengths(fs, f"{bucket}_flush_length")
        assert lengths is not None and lengths[-1] == fs.get_file_info(bucket).size  # published, still open

        conn.begin_transaction()
        _write(conn, 2)
        assert _ids(ms) == [10, 11, 12]  # written, not committed
        conn.abort_transaction()
        conn.begin_transaction()
        _write(conn, 3)
        conn.commit_transaction()
        assert _ids(ms) == [10, 11, 12, 30, 31, 32]
        assert read_flush_lengths(fs, f"{bucket}_flush_length") is not None  # the batch is still open
    assert _ids(ms) == [10, 11, 12, 30, 31, 32]
    assert read_flush_lengths(fs, f"{bucket}_flush_length") is None  # closed: the side file is gone


def test_compaction_renames_its_output_into_place_and_cleans(any_hdfs_ms: Metastore) -> None:
    ms = any_hdfs_ms
    ms.execute(DDL)
    _stream(ms, 1, 4)
    ms.execute("DELETE FROM sales WHERE id = 11")
    before = _rows(ms)
    old = ms.table("sales").scan()  # a reader whose snapshot and listing predate the compactions
    info = ms.get_compaction(ms.compact("default.sales", "region=eu", kind="minor", wait=True))
    assert info.state == "ready for cleaning"
    assert "delta_0000001_0000005" in _dirs(ms, "eu")
    info = ms.get_compaction(ms.compact("default.sales", "region=eu", kind="major", wait=True))
    assert info.state == "ready for cleaning"
    assert "base_0000005" in _dirs(ms, "eu")  # renamed into place, as on a local disk: no visibility suffix
    assert not [d for d in _dirs(ms, "eu") if d.startswith((".", "_tmp"))]  # no temporary name is left
    assert _rows(ms) == before
    assert old.to_arrow().num_rows == len(before)  # its files are still there: it is registered
    old.close()
    removed = [name for o in Cleaner(ms, CompactorConfig(retention=0)).run_once() for name in o.removed]
    assert removed and all(not name.startswith("base_") for name in removed)
    assert [d for d in _dirs(ms, "eu") if not d.startswith("base_")] == []
    assert _rows(ms) == before


def test_replication_from_a_local_warehouse_to_hdfs_and_back(local_ms: Metastore, hdfs_ms: Metastore) -> None:
    """Local → HDFS, then after each commit of an open batch (the replica appends the new bytes of the open
    file and extends its side file), then HDFS → local."""
    local_ms.execute(DDL)
    _stream(local_ms, 1, 2)
    repl.sync(local_ms, hdfs_ms)  # the bootstrap: it waits for no open txn
    with _connect(local_ms, batch=3) as conn:
        conn.begin_transaction()
        _write(conn, 3)
        conn.commit_transaction()
        repl.sync(local_ms, hdfs_ms)
        assert _rows(hdfs_ms) == _rows(local_ms)
        conn.begin_transaction()
        _write(conn, 4)
        conn.commit_transaction()
        repl.sync(local_ms, hdfs_ms)
        assert _rows(hdfs_ms) == _rows(local_ms)
        fs, table = table_filesystem(hdfs_ms.table("sales").location)
        listed = fs.get_file_info(pafs.FileSelector(table, recursive=True))
        assert [
            i for i in listed if i.base_name.endswith("_flush_length")
        ]  # the replica's files are open too
    repl.sync(local_ms, hdfs_ms)
    assert len(_rows(hdfs_ms)) == 12 and _rows(hdfs_ms) == _rows(local_ms)

    with Metastore.connect(local_ms.url, warehouse=local_ms.warehouse + "-replica") as back:
        repl.sync(hdfs_ms, back, policy="back")
        assert _rows(back) == _rows(hdfs_ms)


def test_an_unreachable_namenode_is_named_before_any_txn_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WEBHDFS_PORT_ENV, "1")  # nothing listens there
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse="hdfs://127.0.0.1:1/wh") as ms:
        with pytest.raises(
            StorageLocationError, match=r"hdfs://127\.0\.0\.1:1/wh.*namenode cannot be reached"
        ):
            ms.execute(DDL)
        assert ms.show_txns() == []


def test_a_streaming_connection_to_a_lost_namenode_opens_no_txn(hdfs_ms: Metastore) -> None:
    hdfs_ms.execute(DDL)
    table = hdfs_ms.table("sales")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv(WEBHDFS_PORT_ENV, "1")
        with pytest.raises(AcidStreamError, match=table.location):
            _connect(hdfs_ms)
    assert hdfs_ms.show_txns() == []


def test_the_webhdfs_port_comes_from_the_location_the_environment_or_hadoop_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients only: nothing is asked of a namenode."""

    def url(location: str) -> str:
        fs, _ = hdfs_filesystem(location)
        return str(fs.handler.client.url)

    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    monkeypatch.delenv(WEBHDFS_PORT_ENV, raising=False)
    assert url("hdfs://nn:8020/wh") == "http://nn:9870/webhdfs/v1"  # Hadoop 3's default
    assert url("webhdfs://nn:50070/wh") == "http://nn:50070/webhdfs/v1"
    with pytest.raises(StorageLocationError, match="names no namenode"):
        url("hdfs:///wh")
    (conf / "core-site.xml").write_text(
        "<configuration><property><name>fs.defaultFS</name><value>hdfs://nn2:8020</value></property>"
        "</configuration>"
    )
    (conf / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.namenode.http-address</name><value>0.0.0.0:50070</value>"
        "</property></configuration>"
    )
    assert url("hdfs:///wh") == "http://nn2:50070/webhdfs/v1"
    monkeypatch.setenv(WEBHDFS_PORT_ENV, "14000")
    assert url("hdfs://nn:8020/wh") == "http://nn:14000/webhdfs/v1"
    monkeypatch.setenv(WEBHDFS_PORT_ENV, "http")
    with pytest.raises(StorageLocationError, match=r"hdfs://nn:8020/wh.*'http'"):
        url("hdfs://nn:8020/wh")


def test_a_datanode_lost_mid_batch_aborts_it_and_keeps_what_committed(
    hdfs_namenode: MiniHdfs, hdfs_ms: Metastore
) -> None:
    """The only DataNode stops after a batch's first commit: the next commit cannot publish its bytes and
    fails, the batch's txns end aborted, and once the DataNode is back the committed rows read and the table
    takes new writes."""
    ms = hdfs_ms
    ms.execute(DDL)
    conn = _connect(ms, batch=3)
    try:
        conn.begin_transaction()
        _write(conn, 1)
        conn.commit_transaction()
        hdfs_namenode.stop_datanode()
        try:
            conn.begin_transaction()
            _write(conn, 2)
            with pytest.raises(AcidStreamError):
                conn.commit_transaction()
        finally:
            hdfs_namenode.restart_datanode()
    finally:
        conn.close()
    assert not [t for t in ms.show_txns() if t.state.name == "OPEN"]
    assert _ids(ms) == [10, 11, 12]
    _stream(ms, 5, 1)
    assert _ids(ms) == [10, 11, 12, 50, 51, 52]


def test_the_webhdfs_filesystem_does_what_pyarrow_filesystems_do(
    hdfs_namenode: MiniHdfs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acidstream's WebHDFS client through pyarrow's interface, as a local filesystem answers."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_namenode.conf_dir))
    fs, root = table_filesystem(f"{hdfs_namenode.uri}/{uuid.uuid4().hex[:12]}")
    fs.create_dir(f"{root}/a/b")
    with fs.open_output_stream(f"{root}/a/b/f") as out:
        out.write(b"hello")
    with fs.open_append_stream(f"{root}/a/b/f") as out:
        out.write(b" world")
    assert fs.open_input_stream(f"{root}/a/b/f").read() == b"hello world"
    assert fs.open_input_file(f"{root}/a/b/f").read_at(5, 6) == b"world"
    found = {i.path: i.type for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))}
    assert found == {
        f"{root}/a": pafs.FileType.Directory,
        f"{root}/a/b": pafs.FileType.Directory,
        f"{root}/a/b/f": pafs.FileType.File,
    }
    assert fs.get_file_info(f"{root}/a/b/f").size == 11
    assert fs.get_file_info(f"{root}/none").type == pafs.FileType.NotFound
    assert fs.get_file_info(pafs.FileSelector(f"{root}/none", allow_not_found=True)) == []
    with pytest.raises(FileNotFoundError):
        fs.get_file_info(pafs.FileSelector(f"{root}/none"))
    with pytest.raises(NotADirectoryError):
        fs.get_file_info(pafs.FileSelector(f"{root}/a/b/f"))
    fs.copy_file(f"{root}/a/b/f", f"{root}/g")
    with fs.open_output_stream(f"{root}/h") as out:
        out.write(b"old")
    fs.move(f"{root}/g", f"{root}/h")  # replaces a file, as POSIX rename does
    assert fs.open_input_stream(f"{root}/h").read() == b"hello world"
    with pytest.raises(FileNotFoundError):
        fs.move(f"{root}/g", f"{root}/i")
    with pytest.raises(FileNotFoundError):
        fs.delete_file(f"{root}/g")
    with pytest.raises(FileNotFoundError):
        fs.open_input_file(f"{root}/g")
    remove_if_empty(fs, f"{root}/a/b")  # holds f: kept, in one non-recursive DELETE (no listing to race)
    assert fs.get_file_info(f"{root}/a/b/f").type == pafs.FileType.File
    fs.delete_dir_contents(f"{root}/a")
    assert fs.get_file_info(pafs.FileSelector(f"{root}/a")) == []
    remove_if_empty(fs, f"{root}/a")
    assert fs.get_file_info(f"{root}/a").type == pafs.FileType.NotFound
    fs.delete_dir(root)
    assert fs.get_file_info(root).type == pafs.FileType.NotFound
    with pytest.raises(FileNotFoundError):
        fs.delete_dir(root)


def test_the_namenode_refuses_a_second_create_of_a_data_file_and_its_writer_leaves_it_whole(
    hdfs_namenode: MiniHdfs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The no-overwrite rule rests on WebHDFS's CREATE with overwrite=false: of two streams racing for one
    name the namenode takes the first to send its bytes; a streaming writer of a file that exists fails at its
    first flush, and its abort removes its own side file and leaves the file that was there."""
    from acidstream.acid.codec import BucketCodec
    from acidstream.acid.names import side_file_path
    from acidstream.acid.orc import AcidWriter, WriterOptions
    from acidstream.acid.types import parse_columns
    from acidstream.errors import StreamingIOFailure
    from acidstream.storage import create_new

    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_namenode.conf_dir))
    fs, root = table_filesystem(f"{hdfs_namenode.uri}/{uuid.uuid4().hex[:12]}")
    fs.create_dir(root)
    one, two = create_new(fs, f"{root}/f"), create_new(fs, f"{root}/f")
    one.write(b"first")
    two.write(b"second")
    one.close()
    with pytest.raises(FileExistsError):
        two.close()
    assert fs.open_input_stream(f"{root}/f").read() == b"first"

    path = f"{root}/delta_0000001_0000002/bucket_00000"
    columns, bucket = parse_columns("id int"), BucketCodec.V1.encode(0, 0)
    first = AcidWriter(fs, path, columns, options=WriterOptions(), side_file=True)
    first.insert(1, bucket, pa.table({"id": pa.array([1, 2], pa.int32())}))
    first.close()
    kept = fs.open_input_stream(path).read()
    late = AcidWriter(fs, path, columns, options=WriterOptions(), side_file=True)
    late.insert(2, bucket, pa.table({"id": pa.array([3], pa.int32())}))
    with pytest.raises(StreamingIOFailure, match="already exists"):
        late.flush()
    late.abort_close()
    assert fs.open_input_stream(path).read() == kept
    assert fs.get_file_info(side_file_path(path)).type == pafs.FileType.NotFound
