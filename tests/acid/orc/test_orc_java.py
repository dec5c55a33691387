"""Independent readers of the files we write: Java orc-core (prefix reads) and Hive 2.3's ACID OrcInputFormat.

orc-core's ``maxLength`` reads the prefix up to an intermediate footer; Hive's
reader applies side files, snapshots and the key index like a real cluster would.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from hive_format import hive_row

from acidstream import faults
from acidstream.acid.codec import BucketCodec
from acidstream.acid.orc import AcidWriter, WriterOptions, read_acid_metadata, read_events
from acidstream.acid.types import Column, parse_columns
from acidstream.errors import CorruptFileError, StreamingIOFailure
from conftest import all_type_rows

B0 = BucketCodec.V1.encode(0, -1)
EVENT_PREFIX = (
    "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,currentTransaction:bigint,"
)


def orc_reader(jvm: Any, path: str, length: int | None = None) -> Any:
    conf = jvm.org.apache.hadoop.conf.Configuration()
    opts = jvm.org.apache.orc.OrcFile.readerOptions(conf)
    if length is not None:
        opts = opts.maxLength(length)
    return jvm.org.apache.orc.OrcFile.createReader(jvm.org.apache.hadoop.fs.Path(path), opts)


def java_metadata(jvm: Any, reader: Any) -> dict[str, str]:
    utf8 = jvm.java.nio.charset.StandardCharsets.UTF_8
    return {k: utf8.decode(reader.getMetadataValue(k)).toString() for k in reader.getMetadataKeys()}


def java_rows(reader: Any) -> list[str]:
    rows = reader.rows()
    batch = reader.getSchema().createRowBatch()
    out: list[str] = []
    while rows.nextBatch(batch):
        out.extend(line for line in batch.toString().splitlines() if line.startswith("["))
    rows.close()
    return out


def hive_read(jvm: Any, table: str, columns: list[Column], valid_txns: str) -> list[str]:
    """Rows Hive's ACID reader returns for ``table`` under the Hive-2.3 ``ValidTxnList`` string."""
    job = jvm.org.apache.hadoop.mapred.JobConf(jvm.org.apache.hadoop.conf.Configuration())
    names = ",".join(c.name for c in columns)
    types = ":".join(str(c.type) for c in columns)
    settings = {
        "mapred.input.dir": table,
        "columns": names,
        "columns.types": types,
        "schema.evolution.columns": names,
        "schema.evolution.columns.types": types,
        "hive.transactional.table.scan": "true",
        "hive.txn.valid.txns": valid_txns,
        "bucket_count": "1",
    }
    for k, v in settings.items():
        job.set(k, v)
    fmt = jvm.org.apache.hadoop.hive.ql.io.orc.OrcInputFormat()
    out: list[str] = []
    for split in fmt.getSplits(job, 1):
        rr = fmt.getRecordReader(split, job, jvm.org.apache.hadoop.mapred.Reporter.NULL)
        key, value = rr.createKey(), rr.createValue()
        while rr.next(key, value):
            out.append(value.toString())
        rr.close()
    return out


def streaming_delta(
    tmp_path: Path, columns: list[Column], junk: bool = True
) -> tuple[str, list[int], list[pa.Table]]:
    """delta_0000011_0000013/bucket_00000 with one flush per write id, still "open" (side file, junk)."""
    d = tmp_path / "t" / "delta_0000011_0000013"
    d.mkdir(parents=True)
    path = str(d / "bucket_00000")
    w = AcidWriter(pafs.LocalFileSystem(), path, columns, options=WriterOptions(), side_file=True)
    offsets, batches = [], []
    for i, wid in enumerate((11, 12, 13)):
        rows = all_type_rows(columns, 5, start=10 * i)
        w.insert(wid, B0, rows)
        batches.append(rows)
        offsets.append(w.flush())
    if junk:
        with open(path, "ab") as f:
            f.write(b"\x00not-a-footer" * 7)  # bytes of a stripe still being written
    return path, offsets, batches


def test_orc_core_reads_every_intermediate_footer(
    tmp_path: Path, jvm: Any, all_columns: list[Column]
) -> None:
    path, offsets, _ = streaming_delta(tmp_path, all_columns)
    row_type = ",".join(f"{c.name}:{c.type}" for c in all_columns)
    for n, off in enumerate(offsets, start=1):
        r = orc_reader(jvm, path, off)
        assert r.getNumberOfRows() == 5 * n
        assert r.getStripes().size() == n
        assert r.getSchema().toString() == f"{EVENT_PREFIX}row:struct<{row_type}>>"
        keys = "".join(f"{wid},536870912,4;" for wid in (11, 12, 13)[:n])
        assert java_metadata(jvm, r) == {
            "hive.acid.key.index": keys,
            "hive.acid.stats": f"{5 * n},0,0",
            "hive.acid.version": "2",
        }
        assert jvm.org.apache.orc.impl.SchemaEvolution.checkAcidSchema(r.getSchema())
        assert len(java_rows(r)) == 5 * n
    with pytest.raises(Exception, match=r"Protocol|Illegal|ORC|protobuf|Malformed"):
        orc_reader(jvm, path, offsets[1] + 5).getNumberOfRows()
    with pytest.raises(CorruptFileError):
        read_events(pafs.LocalFileSystem(), path, length=offsets[1] + 5)


def test_orc_core_row_dump_matches(tmp_path: Path, jvm: Any) -> None:
    cols = parse_columns("id int, msg varchar(20)")
    path = str(tmp_path / "bucket_00000")
    w = AcidWriter(
        pafs.LocalFileSystem(), path, cols, options=WriterOptions(stripe_size=64 << 10), side_file=False
    )
    for wid in (1, 2):
        w.insert(wid, B0, pa.table({"id": pa.array(range(3), pa.int32()), "msg": ["a", None, "c"]}))
    w.close()
    expected = [
        f"[0, {wid}, 536870912, {r}, {wid}, [{r}, {'null' if r == 1 else chr(97 + r).join(chr(34) * 2)}]]"
        for wid in (1, 2)
        for r in range(3)
    ]
    assert java_rows(orc_reader(jvm, path)) == expected


def test_hive_reads_committed_prefix_of_open_streaming_delta(
    tmp_path: Path, jvm: Any, all_columns: list[Column]
) -> None:
    _, _, batches = streaming_delta(tmp_path, all_columns)
    table = str(tmp_path / "t")
    expected = [hive_row(r, all_columns) for b in batches for r in b.to_pylist()]
    # write id 13 still open: Hive reads up to the last flush length and drops txn 13 by snapshot
    assert hive_read(jvm, table, all_columns, "13:13:13") == expected[:10]
    # 12 open as well
    assert hive_read(jvm, table, all_columns, "13:12:12:13") == expected[:5]


def test_hive_reads_a_file_cut_back_after_a_failed_flush(
    tmp_path: Path, jvm: Any, all_columns: list[Column]
) -> None:
    """A flush that failed after its stripes (disk full): the close cuts the file back to the last published
    footer and deletes the side file; Hive reads it as a closed file, with every row flushed before."""
    d = tmp_path / "t" / "delta_0000011_0000013"
    d.mkdir(parents=True)
    path = str(d / "bucket_00000")
    w = AcidWriter(pafs.LocalFileSystem(), path, all_columns, options=WriterOptions(), side_file=True)
    batches = []
    for i, wid in enumerate((11, 12, 13)):
        batches.append(all_type_rows(all_columns, 5, start=10 * i))
        w.insert(wid, B0, batches[-1])
        if wid < 13:
            w.flush()
    with faults.armed("orc.flush.tail", faults.os_error(errno.ENOSPC)), pytest.raises(StreamingIOFailure):
        w.flush()
    w.close()
    assert not Path(path + "_flush_length").exists()
    expected = [hive_row(r, all_columns) for b in batches[:2] for r in b.to_pylist()]
    assert hive_read(jvm, str(tmp_path / "t"), all_columns, "13:13:13") == expected


def test_hive_reads_base_and_multi_stripe_delta(tmp_path: Path, jvm: Any, all_columns: list[Column]) -> None:
    fs = pafs.LocalFileSystem()
    table = tmp_path / "t"
    (table / "base_0000005").mkdir(parents=True)
    (table / "delta_0000006_0000007").mkdir()
    base_rows = all_type_rows(all_columns, 6)
    w = AcidWriter(fs, str(table / "base_0000005" / "bucket_00000"), all_columns,
                   options=WriterOptions(is_base=True), side_file=False)  # fmt: skip
    w.insert(5, B0, base_rows)
    w.close()
    opts = WriterOptions(stripe_size=64 << 10)
    w = AcidWriter(
        fs, str(table / "delta_0000006_0000007" / "bucket_00000"), all_columns, options=opts, side_file=True
    )
    delta = [all_type_rows(all_columns, 700, start=100), all_type_rows(all_columns, 700, start=1000)]
    for wid, rows in zip((6, 7), delta, strict=True):
        for start in range(0, 700, 100):
            w.insert(wid, B0, rows.slice(start, 100))
        w.flush()
    w.close()
    assert w.stripes > 2
    got = hive_read(jvm, str(table), all_columns, "10:9223372036854775807::")
    expected = [hive_row(r, all_columns) for t in (base_rows, *delta) for r in t.to_pylist()]
    assert got == expected
    assert hive_read(jvm, str(table), all_columns, "10:7:7") == expected[: 6 + 700]


@pytest.mark.parametrize("compression", ["ZSTD", "ZLIB", "SNAPPY", "NONE"])
def test_we_read_files_hive_writes(tmp_path: Path, jvm: Any, compression: str) -> None:
    """OrcRecordUpdater (Hive 2.3 code, orc-core 2.2.2 encoding) output: our tail parser and reader agree."""
    conf = jvm.org.apache.hadoop.conf.Configuration()
    conf.set("orc.compress", compression)
    oif = jvm.org.apache.hadoop.hive.serde2.objectinspector.ObjectInspectorFactory
    prim = jvm.org.apache.hadoop.hive.serde2.objectinspector.primitive.PrimitiveObjectInspectorFactory

    def jlist(items: list[Any]) -> Any:
        out = jvm.java.util.ArrayList()
        for x in items:
            out.add(x)
        return out

    oi = oif.getStandardStructObjectInspector(
        jlist(["id", "msg"]), jlist([prim.javaIntObjectInspector, prim.javaStringObjectInspector])
    )
    table = jvm.org.apache.hadoop.fs.Path(str(tmp_path))
    opts = (
        jvm.org.apache.hadoop.hive.ql.io.AcidOutputFormat.Options(conf)
        .inspector(oi)
        .bucket(0)
        .minimumTransactionId(2)
        .maximumTransactionId(3)
        .writingBase(False)
        .finalDestination(table)
    )
    updater = jvm.org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat().getRecordUpdater(table, opts)
    for txn in (2, 3):
        for i in range(3):
            updater.insert(txn, jlist([jvm.java.lang.Integer(i), f"m{txn}{i}"]))
        updater.flush()
    updater.close(False)
    (path,) = [str(p) for p in tmp_path.glob("delta_*/bucket_00000")]
    fs = pafs.LocalFileSystem()
    t = read_events(fs, path)
    assert t.column("originalTransaction").to_pylist() == [2, 2, 2, 3, 3, 3]
    assert t.column("rowId").to_pylist() == [0, 1, 2, 0, 1, 2]
    assert t.column("row").to_pylist()[4] == {"id": 1, "msg": "m31"}
    meta = read_acid_metadata(fs, path)
    assert (meta.num_rows, meta.stats, meta.key_index[0]) == (6, (6, 0, 0), (2, 0, 2))


def test_orc_core_reads_delete_events(tmp_path: Path, jvm: Any) -> None:
    cols = parse_columns("id int, msg string")
    path = str(tmp_path / "delete_delta_0000007_0000007_0000" / "bucket_00000")
    w = AcidWriter(pafs.LocalFileSystem(), path, cols, options=WriterOptions(), side_file=False)
    w.delete(
        7,
        pa.table({"originalTransaction": [1, 2], "bucket": pa.array([B0, B0], pa.int32()), "rowId": [4, 0]}),
    )
    w.close()
    r = orc_reader(jvm, path)
    assert java_rows(r) == ["[2, 1, 536870912, 4, 7, null]", "[2, 2, 536870912, 0, 7, null]"]
    assert java_metadata(jvm, r)["hive.acid.key.index"] == "2,536870912,0;"
    assert java_metadata(jvm, r)["hive.acid.stats"] == "0,0,2"


@pytest.mark.parametrize("compression", ["ZLIB", "NONE", "SNAPPY", "ZSTD"])
def test_hive_reads_inserts_with_spliced_acid_columns(
    tmp_path: Path, jvm: Any, all_columns: list[Column], compression: str
) -> None:
    """Inserts of one write id between flushes get ACID columns we encode (stripes.from_inserted_rows): every
    type (a table with a struct column gives pyarrow its rows nested), several stripes per flush, read by Hive
    and orc-core."""
    columns = all_columns
    table = tmp_path / "t"
    (table / "delta_0000006_0000007").mkdir(parents=True)
    path = str(table / "delta_0000006_0000007" / "bucket_00000")
    opts = WriterOptions(compression=compression, stripe_size=8 << 10, batch_rows=256)
    w = AcidWriter(pafs.LocalFileSystem(), path, columns, options=opts, side_file=True)
    delta = [all_type_rows(columns, 900, start=100), all_type_rows(columns, 600, start=1000)]
    for wid, rows in zip((6, 7), delta, strict=True):
        for start in range(0, len(rows), 300):
            w.insert(wid, B0, rows.slice(start, 300))
        w.flush()
    w.close()
    assert w.stripes > 3
    expected = [hive_row(r, columns) for t in delta for r in t.to_pylist()]
    assert hive_read(jvm, str(table), columns, "10:9223372036854775807::") == expected
    assert hive_read(jvm, str(table), columns, "10:7:7") == expected[:900]
    reader = orc_reader(jvm, path)
    assert jvm.org.apache.orc.impl.SchemaEvolution.checkAcidSchema(reader.getSchema())
    assert len(java_rows(reader)) == 1500
