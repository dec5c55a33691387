"""What the Hive 4 schema-evolution tests share: a fresh database on our metastore or a Hive Metastore, a
committed streaming txn under the table's columns now, and a major compaction run to its end."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream import StreamingConnection, StrictDelimitedInputWriter
from acidstream.catalog import Metastore
from acidstream.compactor import Compactor, CompactorConfig
from support.deps import import_or_skip

_dbs = itertools.count()


def both_metastores(
    request: pytest.FixtureRequest, tmp_path: Path, warehouse: Path
) -> Iterator[tuple[Metastore, str]]:
    """For a fixture parametrized ``["ours", "hive"]``: a metastore (our SQLite one, or a Hive 4 Metastore)
    and a fresh database in it."""
    if request.param == "ours":
        url, kw = f"sqlite:///{tmp_path / 'ms.db'}", {"warehouse": str(warehouse)}
    else:
        import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")
        url, kw = request.getfixturevalue("hive4_metastore"), {}
    db = f"evo{next(_dbs)}"  # one count for every module: they share the session's Hive Metastore
    with Metastore.connect(url, **kw) as m:
        m.execute(f"CREATE DATABASE {db}")
        yield m, db


def stream(ms: Metastore, table: str, data: dict[str, Any]) -> None:
    """One committed txn of ``data``, through a connection opened now (under the table's columns now)."""
    db, name = table.split(".")
    schema = ms.table(table).scan().schema
    batch = pa.table({f.name: pa.array(data[f.name], f.type) for f in schema if f.name in data})
    builder = StreamingConnection.builder().with_metastore(ms).with_database(db).with_table(name)
    with builder.with_record_writer(StrictDelimitedInputWriter.builder().build()).connect() as conn:
        conn.begin_transaction()
        conn.write_batch(batch)
        conn.commit_transaction()


def compact(ms: Metastore, table: str, partition: dict[str, str] | None = None) -> None:
    """A major compaction of ``table`` (or one partition), run now by our compactor."""
    request = ms.compact(table, partition, kind="major")
    Compactor(ms, CompactorConfig(retention=0.0)).run_once()
    assert ms.get_compaction(request).state in ("ready for cleaning", "succeeded"), ms.get_compaction(request)
