"""What a replica applies: bootstrap plans and source events, both as plain data that dumps store as JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acidstream.metastore import replops as r
from acidstream.metastore.models import NotificationEvent, TableDefinition

_OPS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        r.CreateDatabase,
        r.DropDatabase,
        r.CreateTable,
        r.DropTable,
        r.AlterTable,
        r.AddPartition,
        r.DropPartition,
        r.OpenTxns,
        r.AllocWriteIds,
        r.CommitTxn,
        r.AbortTxns,
        r.SeedWriteIds,
        r.RecordCompaction,
        r.FileStates,
    )
}


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def op_to_json(op: r.ReplOp) -> dict[str, Any]:
    return {"op": type(op).__name__, **dataclasses.asdict(op)}


def op_from_json(value: Mapping[str, Any]) -> r.ReplOp:
    cls = _OPS[value["op"]]
    op: r.ReplOp = cls(**{k: _tuples(v) for k, v in value.items() if k != "op"})
    return op


@dataclass(frozen=True)
class BootstrapFile:
    """A source file a bootstrap copies: ``[0, length)`` of ``source_path``, which lands at ``relative`` under the
    replica's location of ``db.table``; ``open``: it had a side file (a batch still writing it)."""

    db: str
    table: str
    relative: str
    source_path: str
    length: int
    open: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> BootstrapFile:
        return cls(**value)


@dataclass(frozen=True)
class BootstrapPlan:
    """A consistent copy of the source at event ``event_id``: catalog and txn state as operations, and files."""

    source: str
    event_id: int
    event_time: int
    ops: tuple[r.ReplOp, ...]
    files: tuple[BootstrapFile, ...]
    carried_open: tuple[int, ...]  # source txns still open after the wait, carried as open

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "event_id": self.event_id,
            "event_time": self.event_time,
            "ops": [op_to_json(o) for o in self.ops],
            "files": [f.to_json() for f in self.files],
            "carried_open": list(self.carried_open),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> BootstrapPlan:
        return cls(
            value["source"],
            int(value["event_id"]),
            int(value["event_time"]),
            tuple(op_from_json(o) for o in value["ops"]),
            tuple(BootstrapFile.from_json(f) for f in value["files"]),
            tuple(value.get("carried_open", ())),
        )


def event_to_json(e: NotificationEvent) -> dict[str, Any]:
    return dataclasses.asdict(e)


def event_from_json(value: Mapping[str, Any]) -> NotificationEvent:
    return NotificationEvent(**value)


def source_partition_dir(path: str, partition_keys: int, partition: str | None) -> tuple[str, str]:
    """(table location, partition directory) on the source of a file ``path`` an event names: the partition
    a replica copies again when that file is gone."""
    location = path.rsplit("/", 2 + partition_keys)[0]
    return location, location.rstrip("/") + (f"/{partition}" if partition else "")


def table_with_location(table: TableDefinition, location: str) -> TableDefinition:
    """``table``'s definition at another location (the source's, for listing its files)."""
    fields: dict[str, Any] = {
        f: getattr(table, f) for f in TableDefinition.__dataclass_fields__
    }  # a handle has more
    fields["location"] = location
    return TableDefinition(**fields)


def relative_path(path: str, depth: int) -> str:
    """The last ``depth`` components of ``path``: a file's place under its table (partition directories, then
    the ACID directory and the file), which is the same on source and replica."""
    parts = path.rstrip("/").split("/")
    return "/".join(parts[-depth:])
