"""``AcidTable`` (what a coordinator needs to write a table inside a txn) and ``MutationSummary`` (what it wrote).

Both travel from the driver to workers and back — pickled (Spark) or as JSON (Hive's
``AcidTableSerializer``, e.g. in a job's configuration) — so they carry plain values only.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace
from typing import Any

from acidstream.acid.types import Column, parse_type
from acidstream.errors import ConnectionException
from acidstream.metastore.models import OperationType, TableDefinition


class TableType(enum.Enum):
    """A SINK receives mutations (shared-write lock, a write id); a SOURCE is only read (shared-read lock)."""

    SINK = "SINK"
    SOURCE = "SOURCE"


@dataclass
class AcidTable:
    """One table of a mutation txn: its definition, and the txn and write id once the txn is open."""

    db: str
    name: str
    table_type: TableType = TableType.SINK
    create_partitions: bool = False
    definition: TableDefinition | None = None
    txn_id: int | None = None
    write_id: int | None = None
    # in-process bookkeeping, never serialised: statement ids handed out here, summaries of closed coordinators
    _next_statement_id: int = field(default=0, repr=False, compare=False)
    _summaries: list[MutationSummary] = field(default_factory=list, repr=False, compare=False)

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def table(self) -> TableDefinition:
        """The definition, present once the client connected."""
        if self.definition is None:
            raise ConnectionException(f"{self.qualified_name}: not connected - no table definition yet")
        return self.definition

    def next_statement_id(self) -> int:
        """A statement id no other coordinator built on this object got (coordinators built elsewhere should
        be given theirs explicitly, e.g. a Spark task's partition id)."""
        statement_id = self._next_statement_id
        self._next_statement_id += 1
        return statement_id

    def record_summary(self, summary: MutationSummary) -> None:
        """A coordinator of this process closed: the client's commit includes what it wrote."""
        self._summaries.append(summary)

    def take_summaries(self) -> list[MutationSummary]:
        """The summaries recorded since the last take (a new txn starts empty)."""
        taken, self._summaries = self._summaries, []
        return taken

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_next_statement_id"], state["_summaries"] = 0, []
        return state

    # --- JSON (Hive's AcidTableSerializer) ------------------------------------------------------------

    def to_json(self) -> str:
        d = self.definition
        return json.dumps(
            {
                "db": self.db,
                "name": self.name,
                "table_type": self.table_type.value,
                "create_partitions": self.create_partitions,
                "txn_id": self.txn_id,
                "write_id": self.write_id,
                "definition": None
                if d is None
                else {
                    "columns": [[c.name, str(c.type)] for c in d.columns],
                    "partition_keys": [[c.name, str(c.type)] for c in d.partition_keys],
                    "bucket_columns": list(d.bucket_columns),
                    "num_buckets": d.num_buckets,
                    "bucketing_version": d.bucketing_version,
                    "properties": dict(d.properties),
                    "location": d.location,
                    "table_id": d.table_id,
                },
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> AcidTable:
        v = json.loads(text)
        d = v["definition"]
        definition = None
        if d is not None:
            definition = TableDefinition(
                db=v["db"],
                name=v["name"],
                columns=tuple(Column(n, parse_type(t)) for n, t in d["columns"]),
                partition_keys=tuple(Column(n, parse_type(t)) for n, t in d["partition_keys"]),
                bucket_columns=tuple(d["bucket_columns"]),
                num_buckets=d["num_buckets"],
                bucketing_version=d["bucketing_version"],
                properties=d["properties"],
                location=d["location"],
                table_id=d["table_id"],
            )
        return cls(
            v["db"],
            v["name"],
            TableType(v["table_type"]),
            v["create_partitions"],
            definition,
            v["txn_id"],
            v["write_id"],
        )


@dataclass
class PartitionMutations:
    """What one coordinator did to one partition (name ``""`` for an unpartitioned table)."""

    values: tuple[str | None, ...]
    location: str
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    files: list[str] = field(default_factory=list)
    #: Each file's length and CRC-32, kept by its writer as the bytes went out: the commit names them (for
    #: replication) without reading the files back (on an object store that read cost three requests a file).
    checksums: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def operation(self) -> OperationType:
        """The ``TXN_COMPONENTS`` operation: update/delete drive write-conflict detection."""
        if self.updated:
            return OperationType.UPDATE
        if self.deleted:
            return OperationType.DELETE
        return OperationType.INSERT


@dataclass
class MutationSummary:
    """What one coordinator wrote: per partition, counts and files. The driver commits with every worker's."""

    table: str
    write_id: int
    statement_id: int
    partitions: dict[str, PartitionMutations] = field(default_factory=dict)

    @property
    def inserted(self) -> int:
        return sum(p.inserted for p in self.partitions.values())

    @property
    def updated(self) -> int:
        return sum(p.updated for p in self.partitions.values())

    @property
    def deleted(self) -> int:
        return sum(p.deleted for p in self.partitions.values())

    def partition(self, name: str, values: tuple[str | None, ...], location: str) -> PartitionMutations:
        found = self.partitions.get(name)
        if found is None:
            found = self.partitions[name] = PartitionMutations(values, location)
        return found

    def to_json(self) -> str:
        return json.dumps(
            {
                "table": self.table,
                "write_id": self.write_id,
                "statement_id": self.statement_id,
                "partitions": {
                    name: {**vars(p), "values": list(p.values)} for name, p in self.partitions.items()
                },
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> MutationSummary:
        v = json.loads(text)
        parts = {
            name: replace(PartitionMutations(tuple(p["values"]), p["location"]), **_counts(p))
            for name, p in v["partitions"].items()
        }
        return cls(v["table"], v["write_id"], v["statement_id"], parts)


def _counts(p: dict[str, Any]) -> dict[str, Any]:
    checksums = {path: (int(n), int(crc)) for path, (n, crc) in p.get("checksums", {}).items()}
    return {**{k: p[k] for k in ("inserted", "updated", "deleted", "files")}, "checksums": checksums}
