"""Hive 2.3.10 / orc-core 2.2.2 classes in the test JVM as an independent oracle for acidstream.

Everything goes through py4j into the one SparkSession's JVM: Hive's own
``OrcRecordUpdater`` writes reference tables, Hive's ``OrcInputFormat``/``OrcRawRecordMerger`` reads tables,
``AcidUtils.getAcidState`` selects directories, storage-api's ``ValidReaderWriteIdList`` answers snapshot
questions and orc-core inspects single files. Values cross py4j as Hadoop/Hive writables (a Python int would
become a Java ``Integer`` and break ``bigint`` columns) and come back as Python values shaped like
pyarrow's ``to_pylist()``: ints, floats, str, bytes, ``Decimal`` at the column's scale, ``datetime.date``,
``pandas.Timestamp`` (nanoseconds, UTC wall clock), lists, structs as ``dict``. Differences: maps come back
as ``dict`` (pyarrow gives a list of ``(key, value)`` pairs: compare with ``dict(pairs)``); ``char(n)``
values keep their padding.

Limits of Hive 2.3 as an oracle (measured):

* Hive 2.3 knows transaction ids, not write ids: snapshots are ``ValidReadTxnList`` strings
  ``hwm:minOpen[:exc1[:exc2...]]`` and the ids in file names are read as txn ids.
* ``read_acid_table`` uses the legacy (non split-update) read path: it applies inline delete/update events
  of legacy deltas but **ignores ``delete_delta_*`` directories**, so it checks the insert side only
  (bases, deltas, aborted/open ids, statement ids, side files). Split-update deletes are checked the other
  way round: Hive's updater writes them here, acidstream must apply them.
* The updater writes ORC through Spark's orc-core 2.2.2 (not a real Hive 2.3 cluster's ORC 1.3), V0
  ``bucket`` values (the plain bucket number, no BucketCodec), ACID version 0 (``_orc_acid_version`` holds
  4 zero bytes) and an empty ``hive.acid.key.index`` for the last stripe of a file.
* The updater's delete events (split update) carry its own bucket number, not the deleted row's
  ``ROW__ID.bucketid``: they match rows of V0 files only (those Hive 2 wrote), never V1 rows.
* Files are written through Hadoop's raw local file system (no ``.crc`` files; ``hflush`` reaches the disk,
  so the data and ``_flush_length`` files of an updater left open are readable as on HDFS).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

import pandas as pd

from acidstream.acid.types import HiveType, parse_type

#: One updater operation: ``("insert", write_id, row)``, ``("delete", write_id, (orig_write_id, bucket, row_id))``
#: or ``("update", write_id, (orig_write_id, bucket, row_id), new_row)``.
Op = tuple[Any, ...]
RowId = tuple[int, int, int]

_ROW_ID_TYPE = "struct<transactionid:bigint,bucketid:int,rowid:bigint>"
_BUCKET_FILE = re.compile(r"bucket_(\d+)")
_DECIMAL_CONTEXT = Context(prec=40)  # decimal(38,s) values overflow the default 28 digits


def _struct_type(columns: Sequence[tuple[str, str]]) -> str:
    return "struct<" + ",".join(f"{name}:{type_}" for name, type_ in columns) + ">"


def _timestamp_text(value: Any) -> str:
    """``java.sql.Timestamp.valueOf`` syntax with all nine fractional digits."""
    ts = pd.Timestamp(value)
    return f"{ts.strftime('%Y-%m-%d %H:%M:%S')}.{ts.microsecond * 1000 + ts.nanosecond:09d}"


@dataclass(frozen=True)
class JavaWriteIdList:
    """storage-api 2.8.1's ``ValidReaderWriteIdList``, with the method names of acidstream's ValidWriteIdList."""

    java: Any

    def is_write_id_valid(self, write_id: int) -> bool:
        return bool(self.java.isWriteIdValid(write_id))

    def is_write_id_aborted(self, write_id: int) -> bool:
        return bool(self.java.isWriteIdAborted(write_id))

    def is_valid_base(self, write_id: int) -> bool:
        return bool(self.java.isValidBase(write_id))

    def is_write_id_range_valid(self, lo: int, hi: int) -> str:
        """``"ALL"``, ``"SOME"`` or ``"NONE"`` (the Java enum's name)."""
        return str(self.java.isWriteIdRangeValid(lo, hi).name())

    def is_write_id_range_aborted(self, lo: int, hi: int) -> str:
        return str(self.java.isWriteIdRangeAborted(lo, hi).name())

    def write_to_string(self) -> str:
        return str(self.java.writeToString())


class HiveJvm:
    """Typed entry points into Hive 2.3.10 and orc-core inside the shared SparkSession's JVM."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()
        self._open_updaters: list[Any] = []
        # The checksummed local FS buffers hflush() (open files and side files stay empty on disk) and leaves
        # .crc files behind; the raw one writes through, as HDFS does.
        self._raw_fs = self._jvm.org.apache.hadoop.fs.RawLocalFileSystem()
        self._raw_fs.initialize(self._jvm.java.net.URI.create("file:///"), self._conf)
        # AcidUtils logs an ERROR on every local listing ("Failed to get files with ID ... Only supported for DFS").
        log4j = self._jvm.org.apache.logging.log4j
        log4j.core.config.Configurator.setLevel(
            "org.apache.hadoop.hive.ql.io.AcidUtils", log4j.Level.toLevel("OFF")
        )

    # --- writing -------------------------------------------------------------------------------------------

    def write_with_record_updater(
        self,
        table_dir: str,
        columns: Sequence[tuple[str, str]],
        ops: Iterable[Op],
        *,
        bucket: int,
        min_write_id: int,
        max_write_id: int,
        statement_id: int | None = None,
        split_update: bool = True,
        flush_after_each_write_id: bool = False,
        codec: str = "ZLIB",
        writing_base: bool = False,
        keep_open: bool = False,
    ) -> list[str]:
        """Write one bucket of one delta (or base) with Hive 2.3's ``OrcRecordUpdater``; return the files left.

        ``split_update`` selects ``transactional_properties=default`` (deletes and the delete half of updates
        go to ``delete_delta_*``) rather than Hive 2's legacy inline events. ``flush_after_each_write_id``
        calls ``flush()`` whenever the write id changes, as streaming does per committed txn (one stripe and
        one intermediate footer per id; the ``_flush_length`` side file is removed again on close).
        ``keep_open`` flushes after the last op and leaves the updater open, so the side file stays (close
        later with ``close_open_updaters``). Returned: existing bucket files and side files, sorted.
        """
        jvm = self._jvm
        conf = jvm.org.apache.hadoop.conf.Configuration(self._conf)
        conf.set("orc.compress", codec)
        types = [parse_type(t) for _, t in columns]
        type_info = jvm.org.apache.hadoop.hive.serde2.typeinfo.TypeInfoUtils.getTypeInfoFromTypeString(
            _struct_type([("row__id", _ROW_ID_TYPE), *columns])
        )
        inspector = jvm.org.apache.hadoop.hive.serde2.typeinfo.TypeInfoUtils.getStandardWritableObjectInspectorFromTypeInfo(
            type_info
        )
        table = jvm.org.apache.hadoop.fs.Path(table_dir)
        options = (
            jvm.org.apache.hadoop.hive.ql.io.AcidOutputFormat.Options(conf)
            .inspector(inspector)
            .filesystem(self._raw_fs)
            .bucket(bucket)
            .minimumTransactionId(min_write_id)
            .maximumTransactionId(max_write_id)
            .writingBase(writing_base)
            .recordIdColumn(0)
            .finalDestination(table)
        )
        if statement_id is not None:
            options = options.statementId(statement_id)
        if split_update:
            props = jvm.java.util.Properties()
            props.setProperty("transactional_properties", "default")
            options = options.tableProperties(props)
        updater = jvm.org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat().getRecordUpdater(table, options)
        last_write_id: int | None = None
        for op in ops:
            kind, write_id = op[0], op[1]
            if flush_after_each_write_id and last_write_id is not None and write_id != last_write_id:
                updater.flush()
            last_write_id = write_id
            if kind == "insert":
                updater.insert(write_id, self._event_row(None, types, op[2]))
            elif kind == "delete":
                updater.delete(write_id, self._event_row(op[2], types, None))
            elif kind == "update":
                updater.update(write_id, self._event_row(op[2], types, op[3]))
            else:
                raise ValueError(f"unknown updater op {kind!r}")
        if keep_open:
            updater.flush()
            self._open_updaters.append(updater)
        else:
            updater.close(False)
        insert_file = jvm.org.apache.hadoop.hive.ql.io.AcidUtils.createFilename(table, options)
        delete_file = jvm.org.apache.hadoop.hive.ql.io.AcidUtils.createFilename(
            table, options.clone().writingDeleteDelta(True)
        )
        candidates = []
        for path in (insert_file, delete_file):
            local = str(path.toUri().getPath())
            candidates += [local, local + "_flush_length"]
        return sorted({p for p in candidates if os.path.exists(p)})

    def close_open_updaters(self) -> None:
        """Close the updaters ``keep_open`` left open (their side files disappear)."""
        while self._open_updaters:
            self._open_updaters.pop().close(False)

    def _event_row(self, row_id: RowId | None, types: list[HiveType], row: Sequence[Any] | None) -> Any:
        """``[ROW__ID, col1, col2, ...]`` as writables; ROW__ID is null for inserts, columns null for deletes."""
        jvm = self._jvm
        values = jvm.java.util.ArrayList()
        if row_id is None:
            values.add(None)
        else:
            original, bucket, rid = row_id
            ident = jvm.java.util.ArrayList()
            ident.add(jvm.org.apache.hadoop.io.LongWritable(original))
            ident.add(jvm.org.apache.hadoop.io.IntWritable(bucket))
            ident.add(jvm.org.apache.hadoop.io.LongWritable(rid))
            values.add(ident)
        if row is not None and len(row) != len(types):
            raise ValueError(f"row {row!r} has {len(row)} values for {len(types)} columns")
        for i, type_ in enumerate(types):
            values.add(None if row is None else self._to_writable(type_, row[i]))
        return values

    def _to_writable(self, type_: HiveType, value: Any) -> Any:
        """A Python value as the Hadoop/Hive writable that Hive's standard writable inspectors expect."""
        if value is None:
            return None
        jvm = self._jvm
        hio, sio = jvm.org.apache.hadoop.io, jvm.org.apache.hadoop.hive.serde2.io
        name = type_.name
        simple = {
            "int": lambda: hio.IntWritable(int(value)),
            "bigint": lambda: hio.LongWritable(int(value)),
            "smallint": lambda: sio.ShortWritable(int(value)),
            "tinyint": lambda: sio.ByteWritable(int(value)),
            "boolean": lambda: hio.BooleanWritable(bool(value)),
            "float": lambda: hio.FloatWritable(float(value)),
            "double": lambda: sio.DoubleWritable(float(value)),
            "string": lambda: hio.Text(str(value)),
            "binary": lambda: hio.BytesWritable(bytearray(value)),
            "decimal": lambda: sio.HiveDecimalWritable(str(value)),
            "date": lambda: sio.DateWritable(jvm.java.sql.Date.valueOf(value.isoformat())),
            "timestamp": lambda: sio.TimestampWritable(
                jvm.java.sql.Timestamp.valueOf(_timestamp_text(value))
            ),
            "char": lambda: sio.HiveCharWritable(
                jvm.org.apache.hadoop.hive.common.type.HiveChar(value, type_.length)
            ),
            "varchar": lambda: sio.HiveVarcharWritable(
                jvm.org.apache.hadoop.hive.common.type.HiveVarchar(value, type_.length)
            ),
        }
        if name in simple:
            return simple[name]()
        if name == "array":
            items = jvm.java.util.ArrayList()
            for item in value:
                items.add(self._to_writable(type_.children[0], item))
            return items
        if name == "map":
            entries = jvm.java.util.LinkedHashMap()
            for key, item in value.items() if isinstance(value, dict) else value:
                entries.put(
                    self._to_writable(type_.children[0], key), self._to_writable(type_.children[1], item)
                )
            return entries
        if name == "struct":
            fields = jvm.java.util.ArrayList()
            values = [value[f] for f in type_.field_names] if isinstance(value, dict) else value
            for child, item in zip(type_.children, values, strict=True):
                fields.add(self._to_writable(child, item))
            return fields
        raise AssertionError(f"unhandled Hive type {type_}")

    # --- reading with Hive's ACID reader ------------------------------------------------------------------

    def read_acid_table(
        self,
        table_dir: str,
        columns: Sequence[tuple[str, str]],
        valid_txns: str,
        bucket_count: int | None = None,
    ) -> list[tuple[Any, ...]]:
        """Rows of one table (or partition) directory as Hive 2.3's ACID reader sees them at ``valid_txns``.

        Partition columns are not added. Row order is the reader's (per split, in ROW__ID order).
        ``bucket_count`` defaults to one more than the highest ``bucket_N`` file present: without it Hive
        makes no splits for delta-only tables and silently returns nothing.
        """
        return [row for _, row in self._read(table_dir, columns, valid_txns, bucket_count)]

    def read_acid_table_with_row_ids(
        self,
        table_dir: str,
        columns: Sequence[tuple[str, str]],
        valid_txns: str,
        bucket_count: int | None = None,
    ) -> list[tuple[RowId, tuple[Any, ...]]]:
        """Like ``read_acid_table`` plus each row's ROW__ID ``(writeid, bucketid, rowid)``.

        The ids come from ``AcidInputFormat.AcidRecordReader.getRecordIdentifier()`` of Hive's record reader.
        """
        return self._read(table_dir, columns, valid_txns, bucket_count)

    def _read(
        self,
        table_dir: str,
        columns: Sequence[tuple[str, str]],
        valid_txns: str,
        bucket_count: int | None,
    ) -> list[tuple[RowId, tuple[Any, ...]]]:
        jvm = self._jvm
        names = ",".join(n for n, _ in columns)
        type_list = ":".join(t for _, t in columns)
        job = jvm.org.apache.hadoop.mapred.JobConf(self._conf)
        settings = {
            "mapred.input.dir": table_dir,
            "columns": names,
            "columns.types": type_list,
            "schema.evolution.columns": names,
            "schema.evolution.columns.types": type_list,
            "hive.transactional.table.scan": "true",
            "hive.txn.valid.txns": valid_txns,
        }
        settings["bucket_count"] = str(bucket_count if bucket_count is not None else _bucket_count(table_dir))
        for key, value in settings.items():
            job.set(key, value)
        row_type = parse_type(_struct_type(columns))
        inspector = jvm.org.apache.hadoop.hive.ql.io.orc.OrcStruct.createObjectInspector(
            jvm.org.apache.hadoop.hive.serde2.typeinfo.TypeInfoUtils.getTypeInfoFromTypeString(str(row_type))
        )
        copy = jvm.org.apache.hadoop.hive.serde2.objectinspector.ObjectInspectorUtils.copyToStandardJavaObject
        input_format = jvm.org.apache.hadoop.hive.ql.io.orc.OrcInputFormat()
        rows: list[tuple[RowId, tuple[Any, ...]]] = []
        for split in input_format.getSplits(job, 1):
            reader = input_format.getRecordReader(split, job, jvm.org.apache.hadoop.mapred.Reporter.NULL)
            try:
                key, value = reader.createKey(), reader.createValue()
                while reader.next(key, value):
                    ident = reader.getRecordIdentifier()
                    row_id = (int(ident.getTransactionId()), int(ident.getBucketId()), int(ident.getRowId()))
                    rows.append((row_id, tuple(to_python(row_type, copy(value, inspector), top=True))))
            finally:
                reader.close()
        return rows

    # --- single ORC files ---------------------------------------------------------------------------------

    def orc_file_info(self, path: str, max_length: int | None = None) -> dict[str, Any]:
        """Footer facts of one ORC file through orc-core (a prefix of it with ``max_length``).

        Keys: rows, stripes, schema, metadata (user metadata decoded as UTF-8), compression, writer_version,
        software_version, file_version.
        """
        jvm = self._jvm
        options = jvm.org.apache.orc.OrcFile.readerOptions(self._conf)
        if max_length is not None:
            options = options.maxLength(max_length)
        reader = jvm.org.apache.orc.OrcFile.createReader(jvm.org.apache.hadoop.fs.Path(path), options)
        try:
            utf8 = jvm.java.nio.charset.StandardCharsets.UTF_8
            return {
                "rows": int(reader.getNumberOfRows()),
                "stripes": int(reader.getStripes().size()),
                "schema": str(reader.getSchema().toString()),
                "metadata": {
                    str(k): str(utf8.decode(reader.getMetadataValue(k)).toString())
                    for k in reader.getMetadataKeys()
                },
                "compression": str(reader.getCompressionKind().toString()),
                "writer_version": str(reader.getWriterVersion().toString()),
                "software_version": str(reader.getSoftwareVersion()),
                "file_version": str(reader.getFileVersion().toString()),
            }
        finally:
            reader.close()

    def orc_rows(
        self, path: str, max_length: int | None = None, first_row: int = 0, limit: int | None = None
    ) -> list[tuple[Any, ...]]:
        """Every row of one ORC file, as stored (for event files: ``(operation, originalTransaction, bucket,
        rowId, currentTransaction, row)`` with ``row`` a dict or None). Read with Hive's ORC reader; from
        ``first_row`` on (reached with ``seekToRow``, which positions every column by its row index), at most
        ``limit`` rows."""
        jvm = self._jvm
        options = jvm.org.apache.hadoop.hive.ql.io.orc.OrcFile.readerOptions(self._conf)
        if max_length is not None:
            options = options.maxLength(max_length)
        reader = jvm.org.apache.hadoop.hive.ql.io.orc.OrcFile.createReader(
            jvm.org.apache.hadoop.fs.Path(path), options
        )
        file_type = parse_type(str(reader.getSchema().toString()))
        inspector = reader.getObjectInspector()
        copy = jvm.org.apache.hadoop.hive.serde2.objectinspector.ObjectInspectorUtils.copyToStandardJavaObject
        rows: list[tuple[Any, ...]] = []
        records = reader.rows()
        try:
            if first_row:
                records.seekToRow(first_row)
            row = None
            while records.hasNext() and (limit is None or len(rows) < limit):
                row = records.next(row)
                rows.append(tuple(to_python(file_type, copy(row, inspector), top=True)))
        finally:
            records.close()
        return rows

    # --- directory selection and snapshots ----------------------------------------------------------------

    def acid_state(self, table_dir: str, valid_txns: str) -> dict[str, Any]:
        """Hive 2.3's ``AcidUtils.getAcidState`` for one table/partition directory at ``valid_txns``.

        Keys: ``base`` (directory name or None), ``deltas`` (current directories in Hive's order as
        ``(name, min, max, statement_id, is_delete_delta)``), ``obsolete`` and ``originals`` (sorted paths
        relative to ``table_dir``).
        """
        jvm = self._jvm
        txns = jvm.org.apache.hadoop.hive.common.ValidReadTxnList(valid_txns)
        state = jvm.org.apache.hadoop.hive.ql.io.AcidUtils.getAcidState(
            jvm.org.apache.hadoop.fs.Path(table_dir), self._conf, txns
        )
        root = os.path.realpath(table_dir)

        def rel(path: Any) -> str:
            return os.path.relpath(os.path.realpath(str(path.toUri().getPath())), root)

        base = state.getBaseDirectory()
        return {
            "base": None if base is None else str(base.getName()),
            "deltas": [
                (
                    str(d.getPath().getName()),
                    int(d.getMinTransaction()),
                    int(d.getMaxTransaction()),
                    int(d.getStatementId()),
                    bool(d.isDeleteDelta()),
                )
                for d in state.getCurrentDirectories()
            ],
            "obsolete": sorted(rel(f.getPath()) for f in state.getObsolete()),
            "originals": sorted(rel(f.getFileStatus().getPath()) for f in state.getOriginalFiles()),
        }

    def valid_write_id_list(self, text: str) -> JavaWriteIdList:
        """storage-api's ``ValidReaderWriteIdList`` parsed from Hive's string form ``db.t:hwm:minOpen:open:aborted``."""
        return JavaWriteIdList(self._jvm.org.apache.hadoop.hive.common.ValidReaderWriteIdList(text))


def hive_txns(snapshot: Any) -> str:
    """The Hive 2.3 ``ValidReadTxnList`` text of a write-id snapshot (a ``ValidWriteIdList``): Hive 2.3 reads
    the ids in file names as txn ids, so the snapshot's write ids stand for them."""
    exceptions = snapshot.invalid_write_ids()
    min_open = snapshot.open_ids[0] if snapshot.open_ids else 9223372036854775807
    return ":".join(str(v) for v in (snapshot.high_watermark, min_open, *exceptions))


def _bucket_count(table_dir: str) -> int:
    numbers = [
        int(m.group(1))
        for _, _, files in os.walk(table_dir)
        for f in files
        if (m := _BUCKET_FILE.fullmatch(f)) is not None
    ]
    return max(numbers, default=0) + 1


def to_python(type_: HiveType, value: Any, *, top: bool = False) -> Any:
    """A Java standard object (``copyToStandardJavaObject``; py4j already turned boxed primitives, String and
    byte[] into Python values) as the Python value pyarrow would give. ``top`` renders a struct as a tuple."""
    if value is None:
        return None
    name = type_.name
    if name == "decimal":
        return Decimal(str(value.toString())).quantize(
            Decimal(1).scaleb(-type_.scale), context=_DECIMAL_CONTEXT
        )
    if name in ("char", "varchar"):
        return str(value.getValue())
    if name == "date":
        return dt.date.fromisoformat(str(value.toString()))
    if name == "timestamp":
        return pd.Timestamp(str(value.toString()))
    if name == "binary":
        return bytes(value)
    if name == "array":
        return [to_python(type_.children[0], item) for item in value]
    if name == "map":
        key_type, value_type = type_.children
        return {to_python(key_type, k): to_python(value_type, v) for k, v in value.items()}
    if name == "struct":
        items = [to_python(child, item) for child, item in zip(type_.children, value, strict=True)]
        return tuple(items) if top else dict(zip(type_.field_names, items, strict=True))
    return value
