"""Tables of a standalone Hive Metastore as Hive's writers fill them, and our directory-level read path over
them: no acidstream metastore, only the Hive Metastore's snapshot strings."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from acidstream.acid.types import Column, parse_type
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.metastore.models import TableDefinition
from acidstream.read.bucket_read import ROW_ID, ROW_ID_TYPE
from acidstream.read.planning import plan_partition
from acidstream.read.scan import bucket_readers
from acidstream.storage import table_filesystem
from hive4.referee import HiveRow, Referee

COLUMNS = [("id", "int"), ("msg", "string")]
_tables = itertools.count()


def read_directory(
    location: str, columns: Sequence[tuple[str, str]], txns: str, write_ids: str
) -> list[HiveRow]:
    """Our read path over one table or partition directory at a snapshot given as Hive's strings."""
    valid = ValidWriteIdList.parse(write_ids)
    definition = TableDefinition(
        db="hive",
        name="t",
        columns=tuple(Column(name, parse_type(type_)) for name, type_ in columns),
        partition_keys=(),
        bucket_columns=(),
        num_buckets=-1,
        bucketing_version=2,
        properties={"transactional": "true"},
        location=location,
        table_id=0,
    )
    fs, path = table_filesystem(location)
    tasks, _ = plan_partition(fs, path, valid, ValidTxnList.parse(txns), (), "")
    schema = pa.schema(
        [pa.field(ROW_ID, ROW_ID_TYPE), *(pa.field(c.name, c.type.to_arrow()) for c in definition.columns)]
    )
    rows = []
    for reader in bucket_readers(definition, tasks, valid, schema, with_row_id=True):
        for r in pa.Table.from_batches(list(reader.batches()), schema=schema).to_pylist():
            rid = r.pop(ROW_ID)
            rows.append(((rid["writeid"], rid["bucketid"], rid["rowid"]), tuple(r.values())))
    return sorted(rows)


class HiveTable:
    """A table of the Hive Metastore written the way Hive's writers do, with the rows it should hold."""

    def __init__(
        self, hive4: Referee, uri: str, partitions: Sequence[str] = (), *, partitioned: bool = False
    ) -> None:
        """A new table ``hive.t<N>`` of ``COLUMNS``; partitioned by ``part string`` when ``partitions`` (added
        now) are given or ``partitioned``."""
        self.hive4, self.uri, self.name = hive4, uri, f"t{next(_tables)}"
        self.location = self._call(
            "create_table",
            columns=[c for c, _ in COLUMNS],
            types=[t for _, t in COLUMNS],
            partition_keys=["part"] if partitions or partitioned else [],
        )["location"].removeprefix("file:")
        for p in partitions:
            self._call("add_partition", values=[p])
        self.partitioned = bool(partitions) or partitioned
        #: the rows committed transactions wrote, by partition value ("" unpartitioned)
        self.committed: dict[str, set[tuple[Any, ...]]] = (
            {p: set() for p in partitions} if self.partitioned else {"": set()}
        )

    @property
    def dirs(self) -> dict[str, str]:
        """Partition value ("" unpartitioned) to directory, as the Hive Metastore lists them now."""
        if not self.partitioned:
            return {"": self.location}
        listed = self._call("partitions")["partitions"]
        return {p["values"][0]: p["location"].removeprefix("file:") for p in listed}

    def _call(self, call: str, **request: Any) -> dict[str, Any]:
        return self.hive4.metastore(self.uri, call, db="hive", table=self.name, **request)

    def open_batch(self, size: int) -> list[tuple[int, int]]:
        """``open_txns`` then ``allocate_table_write_ids``, as Hive's streaming connection opens a batch."""
        txns = self._call("open_txns", count=size)["txns"]
        return list(zip(txns, self._call("allocate_write_ids", txns=txns)["write_ids"], strict=True))

    def end(self, txn: int, commit: bool) -> None:
        self._call("commit_txn" if commit else "abort_txn", txn=txn)

    def snapshot(self) -> tuple[str, str]:
        answer = self._call("snapshot")
        return answer["txns"], answer["writeids"]

    def judge(self) -> None:
        """At the Hive Metastore's snapshot now, our directory reader returns Hive's rows and ROW__IDs (Hive
        reading in row mode and vectorized, through its default and its ETL split generation) and exactly
        the committed rows, each once."""
        txns, write_ids = self.snapshot()
        dirs = self.dirs
        assert set(self.committed) - {""} <= set(dirs), "rows committed to a partition the metastore lacks"
        for part, location in dirs.items():
            theirs = self.hive4.read(location, COLUMNS, write_ids, txns)
            ours = read_directory(location, COLUMNS, txns, write_ids)
            assert ours == theirs, f"{part or self.name} at {txns} / {write_ids}"
            for vectorized, splits in ((True, "hybrid"), (False, "etl"), (True, "etl")):
                read = self.hive4.read(
                    location, COLUMNS, write_ids, txns, vectorized=vectorized, splits=splits
                )
                assert read == theirs, f"{part or self.name}: vectorized={vectorized}, {splits} splits"
            assert sorted(row for _, row in ours) == sorted(self.committed.get(part, set()))
