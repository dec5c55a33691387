"""Bytes that are not UTF-8 through every record writer and every way in.

Each bad record is refused with a SerializationError naming it and the field (or goes to the dead-letter
file); every other record of the txn is kept and commits; a full read of the table works afterwards, and
partition names stay valid text.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest

from acidstream import (
    Metastore,
    StreamingConnection,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)
from acidstream.errors import SerializationError
from acidstream.streaming.writers import RecordWriter

#: an invalid start byte, a truncated sequence, an overlong encoding, an encoded surrogate, a lone continuation
BAD = [b"\xff\xfe", b"caf\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"a\x80b"]
RECORDS = 200
BAD_AT = {3: BAD[0], 64: BAD[1], 77: BAD[2], 150: BAD[3], 199: BAD[4]}


def _writer(kind: str) -> RecordWriter:
    if kind == "delimited":
        return StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    if kind == "json":
        return StrictJsonWriter.builder().build()
    return StrictRegexWriter.builder().with_regex(r"([^,]*),([^,]*),([^,]*)").build()


def _records(kind: str, field: str) -> list[bytes]:
    out = []
    for i in range(RECORDS):
        values = {"id": b"%d" % i, "msg": b"m%d" % i, "p": b"part%d" % (i % 3)}
        if i in BAD_AT:
            values[field] = b"x" + BAD_AT[i]
        id_, msg, part = values["id"], values["msg"], values["p"]
        if kind == "json":
            out.append(b'{"id": %s, "msg": "%s", "p": "%s"}' % (id_, msg, part))
        else:
            out.append(b"%s,%s,%s" % (id_, msg, part))
    return out


def _send(conn: StreamingConnection, records: list[bytes], way: str) -> list[SerializationError]:
    """Hand the records over one way; the SerializationErrors raised on the way (the txn stays usable)."""
    errors: list[SerializationError] = []
    if way == "write":
        for r in records:
            try:
                conn.write(r)
            except SerializationError as exc:
                errors.append(exc)
    elif way == "write_record_array":
        try:
            conn.write_record_array(pa.array(records, pa.binary()))
        except SerializationError as exc:
            errors.append(exc)
    else:
        try:
            conn.write_stream(io.BytesIO(b"\n".join(records) + b"\n"))
        except SerializationError as exc:
            errors.append(exc)
    try:
        conn.commit_transaction()
    except SerializationError as exc:  # found by the commit's last parse: the txn is still open
        errors.append(exc)
        conn.commit_transaction()
    return errors


@pytest.mark.parametrize("dead_letter", [False, True], ids=["raise", "dead-letter"])
@pytest.mark.parametrize("way", ["write", "write_record_array", "write_stream"])
@pytest.mark.parametrize("field", ["msg", "p"])
@pytest.mark.parametrize("kind", ["delimited", "json", "regex"])
def test_bad_bytes_are_refused_by_name_and_every_other_record_commits(
    tmp_path: Path, warehouse: Path, kind: str, field: str, way: str, dead_letter: bool
) -> None:
    with Metastore.connect(f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(warehouse)) as ms:
        ms.execute(
            "CREATE TABLE t (id int, msg string) PARTITIONED BY (p string) "
            "CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
        builder = (
            StreamingConnection.builder()
            .with_metastore(ms)
            .with_database("default")
            .with_table("t")
            .with_record_writer(_writer(kind))
            .with_configuration({"parse_batch_records": 64})
        )
        if dead_letter:
            builder = builder.with_dead_letter_file(tmp_path / "dead.jsonl")
        with builder.connect() as conn:
            conn.begin_transaction()
            errors = _send(conn, _records(kind, field), way)
        if dead_letter:
            assert not errors
            entries = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
            assert [(e["record_index"], e["field"]) for e in entries] == [(i, field) for i in sorted(BAD_AT)]
            assert all("UTF-8" in e["error"] for e in entries)
        else:
            assert errors and all("UTF-8" in str(e) for e in errors)
            assert {(e.record_index, e.field) for e in errors} <= {(i, field) for i in BAD_AT}
            assert errors[0].record_index == min(BAD_AT)
        rows = ms.table("default.t").scan().to_arrow().to_pylist()  # a full read: every string decoded
        assert sorted(r["id"] for r in rows) == [i for i in range(RECORDS) if i not in BAD_AT]
        assert sorted(p.name for p in ms.list_partitions("default.t")) == [f"p=part{i}" for i in range(3)]
