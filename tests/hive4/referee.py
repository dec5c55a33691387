"""Hive 4 beside the tests: the referee JVM (Hive's own ACID reader and writer) and a standalone Hive Metastore.

Both come from ``interop/hive`` (Hive's published jars plus two small driver classes) through
``scripts/hive.sh``. The referee is one long-running ``java`` process per test session speaking JSON lines:
a request per line on stdin, an answer per line on stdout (see ``acidstream.hive.Referee``).

Values come back as JSON: integers and floats as numbers, booleans, strings; decimals, dates, timestamps as
Hive prints them; binary as base64; lists as lists, structs as lists of field values, maps as
``[key, value]`` pairs.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList

ROOT = Path(__file__).resolve().parents[2]
HIVE_SH = ROOT / "scripts" / "hive.sh"
LOG4J = ROOT / "interop" / "hive" / "log4j2.properties"

RowId = tuple[int, int, int]
HiveRow = tuple[RowId, tuple[Any, ...]]


class HiveUnavailable(RuntimeError):
    """Java, Maven or Hive's jars are missing: the hive4 tests cannot run."""


def hive_sh(*args: str) -> str:
    """Runs ``scripts/hive.sh`` and returns its last line of output (a path or a URI)."""
    try:
        done = subprocess.run(
            ["bash", str(HIVE_SH), *args], capture_output=True, text=True, check=False, timeout=900
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HiveUnavailable(f"scripts/hive.sh {' '.join(args)}: {exc}") from exc
    if done.returncode != 0:
        raise HiveUnavailable(f"scripts/hive.sh {' '.join(args)} failed:\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else ""


#: A short txn timeout and housekeeping interval, so that Hive's housekeeping (txn timeouts, the txn cleaner)
#: acts within a test.
BRISK_HOUSEKEEPING = {
    "ACIDSTREAM_HIVE_TXN_TIMEOUT": "20s",
    "ACIDSTREAM_HIVE_HOUSEKEEPER_INTERVAL": "2s",
}


def start_brisk_metastore(state: Path) -> str:
    """(Re)start the metastore of ``state`` (``scripts/hive.sh start``) with :data:`BRISK_HOUSEKEEPING`; its URI."""
    done = subprocess.run(
        ["bash", str(HIVE_SH), "start", str(state)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **BRISK_HOUSEKEEPING},
    )
    return done.stdout.strip().splitlines()[-1]


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


class HiveError(AssertionError):
    """Hive refused a request: its Java stack trace."""


class JsonLinesJvm:
    """A Java main speaking JSON lines (a request per line in, an answer per line out); one request at a time.
    Its stderr goes to ``log``."""

    #: Hive 4.0's own launcher predates JDK 17: the module openings later releases pass
    ADD_OPENS = ("java.lang", "java.net", "java.util", "java.nio", "java.util.concurrent", "java.io")

    def __init__(self, classpath: Path, main: str, log: Path) -> None:
        self._log = log.open("ab")
        self._proc = subprocess.Popen(
            [
                java(),
                "-Xmx768m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                f"-Dlog4j.configurationFile={LOG4J}",
                *(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in self.ADD_OPENS),
                "-cp",
                str(classpath / "*"),
                main,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._lock = threading.Lock()
        self.log_path = log

    def call(self, **request: Any) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Hive JVM exited ({self._proc.poll()}), see {self.log_path}")
        answer: dict[str, Any] = json.loads(line)
        if not answer.pop("ok"):
            raise HiveError(answer["error"])
        return answer

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()


class Referee(JsonLinesJvm):
    """Hive 4's reader, directory selection, record writer and metastore client (``acidstream.hive.Referee``)."""

    #: Sent with each read, selection and write: Hadoop settings and a Kerberos login (:meth:`on_hadoop`).
    hadoop: Mapping[str, Any] = {}

    def __init__(self, home: Path, log: Path) -> None:
        super().__init__(home / "lib", "acidstream.hive.Referee", log)
        self.call(op="ping")

    def on_hadoop(self, conf: Mapping[str, str], kerberos: Mapping[str, str] | None = None) -> Referee:
        """This referee (the same JVM) reading, selecting and writing with the Hadoop settings ``conf`` (an HDFS
        cluster's client configuration) and, with ``kerberos`` (``principal``, ``keytab``, ``krb5conf``), as
        that principal logged in from the keytab, as a Hive job on a kerberized cluster runs."""
        view = copy.copy(self)
        view.hadoop = {"conf": dict(conf), "kerberos": dict(kerberos) if kerberos else None}
        return view

    def on_s3(self, endpoint: str, access_key: str, secret_key: str) -> Referee:
        """This referee reading, selecting and writing ``s3a://`` locations on the S3 server at ``endpoint``
        (``http://host:port``) through Hadoop's S3A, as a Hive job configured for an S3-compatible store: path-style
        requests, plain HTTP, the credentials as Hadoop settings (``fs.s3a.*``, sent with each request, never
        logged) and no other credential provider (no lookup of an instance's metadata service)."""
        return self.on_hadoop(
            {
                "fs.s3a.endpoint": endpoint,
                "fs.s3a.endpoint.region": "us-east-1",
                "fs.s3a.path.style.access": "true",
                "fs.s3a.connection.ssl.enabled": "false",
                "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
                "fs.s3a.access.key": access_key,
                "fs.s3a.secret.key": secret_key,
                # uploads buffered in memory: on disk, S3A would take its buffer directory from the local
                # filesystem of the conf that made it, which a read's may have set to RawLocalFs (no
                # LocalFileSystem, as Hadoop's disk buffer wants)
                "fs.s3a.fast.upload.buffer": "array",
            }
        )

    def read(
        self,
        location: str | Path,
        columns: Sequence[tuple[str, str]],
        write_ids: ValidWriteIdList | str,
        txns: ValidTxnList | str,
        *,
        buckets: int | None = None,
        vectorized: bool = False,
        splits: str = "hybrid",
    ) -> list[HiveRow]:
        """The rows of a table or partition directory at a snapshot, as a Hive query's table scan reads them
        (``OrcInputFormat`` → ``OrcRawRecordMerger``; ``vectorized``: ``VectorizedOrcAcidRowBatchReader``, as
        with vectorization on), each with its ROW__ID, sorted by ROW__ID.

        ``splits``: ``"hybrid"``, Hive's default split strategy for a one-task scan (several files are listed,
        not opened), or ``"etl"``, the footer-reading strategy of large and Tez queries
        (``hive.exec.orc.split.strategy=ETL``) with a split per stripe."""
        answer = self._read(location, columns, write_ids, txns, buckets, vectorized, splits)
        return sorted(((w, b, r), tuple(values)) for w, b, r, values in answer["rows"])

    def splits(
        self,
        location: str | Path,
        columns: Sequence[tuple[str, str]],
        write_ids: ValidWriteIdList | str,
        txns: ValidTxnList | str,
        *,
        buckets: int | None = None,
        splits: str = "hybrid",
    ) -> list[tuple[str, int, int]]:
        """The splits a read as :meth:`read`'s makes and reads: (file name, start, length) each."""
        answer = self._read(location, columns, write_ids, txns, buckets, False, splits)
        return [(name, start, length) for name, start, length in answer["splits"]]

    def _read(
        self,
        location: str | Path,
        columns: Sequence[tuple[str, str]],
        write_ids: ValidWriteIdList | str,
        txns: ValidTxnList | str,
        buckets: int | None,
        vectorized: bool,
        splits: str,
    ) -> dict[str, Any]:
        return self.call(
            op="read",
            dir=str(location),
            columns=[c for c, _ in columns],
            types=[t for _, t in columns],
            writeids=str(write_ids),
            txns=str(txns),
            buckets=buckets,
            vectorized=vectorized,
            splits=splits,
            **self.hadoop,
        )

    def select(
        self, location: str | Path, write_ids: ValidWriteIdList | str, txns: ValidTxnList | str
    ) -> tuple[str | None, list[str], list[str]]:
        """Hive's ``AcidUtils.getAcidState`` of a directory: base name, chosen deltas in order, sorted obsolete
        names."""
        answer = self.call(
            op="select", dir=str(location), writeids=str(write_ids), txns=str(txns), **self.hadoop
        )
        return answer["base"], answer["current"], answer["obsolete"]

    def write(
        self,
        location: str | Path,
        columns: Sequence[tuple[str, str]],
        ops: Sequence[Sequence[Any]],
        *,
        bucket: int,
        min_write_id: int,
        max_write_id: int,
        statement_id: int | None = None,
        flush: str = "close",
        handle: str | None = None,
    ) -> None:
        """Write one bucket of a delta with Hive's ``OrcRecordUpdater`` (see ``acidstream.hive.AcidWriter``):
        ops ``("insert", write_id, values)``, ``("delete", write_id, row_id)``,
        ``("update", write_id, row_id, values)``; ``flush="open"`` keeps the updater open as ``handle``."""
        self.call(
            op="write",
            dir=str(location),
            columns=[c for c, _ in columns],
            types=[t for _, t in columns],
            ops=[list(op) for op in ops],
            bucket=bucket,
            min=min_write_id,
            max=max_write_id,
            statement=statement_id,
            flush=flush,
            handle=handle,
            **self.hadoop,
        )

    def metastore(self, uri: str, call: str, **request: Any) -> dict[str, Any]:
        """One call of Hive's metastore client on the Hive Metastore at ``uri`` (see
        ``acidstream.hive.Metastore``)."""
        return self.call(op="metastore", uri=uri, call=call, **request)


class Streamer(JsonLinesJvm):
    """Hive's streaming client (``acidstream.hive.streaming.Streamer``, Hive 3.1.3's ``hive-streaming``: Hive 4
    publishes none) on one connection at a time, into tables of a Hive Metastore."""

    def __init__(self, home: Path, log: Path) -> None:
        super().__init__(home / "streaming3", "acidstream.hive.streaming.Streamer", log)

    def connect(
        self, uri: str, db: str, table: str, *, batch: int, writer: str, static: Sequence[str] | None
    ) -> None:
        """``writer``: ``"delimited"`` (comma-separated) or ``"json"``; ``static``: partition values, or None
        for dynamic partitioning (records end with them)."""
        self.call(op="connect", uri=uri, db=db, table=table, batch=batch, writer=writer, static=static)

    def transaction(self, records: Sequence[str], *, commit: bool | None) -> None:
        """Begin, write ``records``, then commit (True), abort (False) or leave the transaction open (None)."""
        self.call(op="begin")
        self.call(op="write", records=list(records))
        if commit is not None:
            self.call(op="commit" if commit else "abort")

    def close_connection(self) -> None:
        self.call(op="close")
