"""Values the metastore hands out: table and partition definitions, Hive's enums with their one-letter DB codes."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from acidstream.acid.types import Column
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import CompactionError

#: The table property that makes every writer of the table fsync what it commits (see ``Table.fsync``).
FSYNC_PROPERTY = "acidstream.fsync"


class TxnStatus(enum.Enum):
    """A txn's state as the metastore has it (Hive's thrift ``TxnState``; ``UNKNOWN``: it has no record of it).
    The client's view of its own txn is :class:`acidstream.txn.state.TxnState`, Hive's streaming API's name."""

    OPEN = "o"
    COMMITTED = "c"
    ABORTED = "a"
    UNKNOWN = "u"


class OperationType(enum.Enum):
    SELECT = "s"
    INSERT = "i"
    UPDATE = "u"
    DELETE = "d"
    COMPACT = "c"

    @property
    def writes(self) -> bool:
        return self in (OperationType.INSERT, OperationType.UPDATE, OperationType.DELETE)

    @property
    def is_update_delete(self) -> bool:
        return self in (OperationType.UPDATE, OperationType.DELETE)


class LockType(enum.Enum):
    SHARED_READ = "r"
    SHARED_WRITE = "w"
    EXCLUSIVE = "e"


class LockLevel(enum.Enum):
    DB = "db"
    TABLE = "table"
    PARTITION = "partition"


class LockState(enum.Enum):
    ACQUIRED = "a"
    WAITING = "w"
    NOT_ACQUIRED = "n"
    ABORT = "x"


@dataclass(frozen=True)
class LockComponent:
    type: LockType
    level: LockLevel
    db: str
    table: str | None = None
    partition: str | None = None
    operation: OperationType = OperationType.SELECT
    is_dynamic_partition_write: bool = False


@dataclass(frozen=True)
class LockResponse:
    lock_id: int
    state: LockState


@dataclass(frozen=True)
class LockInfo:
    """One row of SHOW LOCKS (one component of a lock request)."""

    lock_id: int
    component_id: int
    txn_id: int | None
    db: str
    table: str | None
    partition: str | None
    state: LockState
    type: LockType
    last_heartbeat: int
    acquired_at: int | None
    user: str | None
    host: str | None
    agent_info: str | None
    blocked_by: int | None

    def describe(self) -> str:
        """The lock as a lock wait's timeout names its blocker: id, type, object, txn, agent and state."""
        where = (
            self.db
            + (f".{self.table}" if self.table else "")
            + (f"/{self.partition}" if self.partition else "")
        )
        owner = f", txnid:{self.txn_id}" if self.txn_id else ""
        agent = f", agent {self.agent_info!r}" if self.agent_info else ""
        return f"lock {self.lock_id} ({self.type.name} on {where}{owner}{agent}, {self.state.name.lower()})"


@dataclass(frozen=True)
class TxnInfo:
    """One row of SHOW TRANSACTIONS (open and aborted txns; committed ones are not listed, as in Hive)."""

    txn_id: int
    state: TxnStatus
    started: int
    last_heartbeat: int
    user: str | None
    host: str | None
    agent_info: str | None


@dataclass(frozen=True)
class HeartbeatTxnRangeResponse:
    aborted: list[int]
    nosuch: list[int]


@dataclass(frozen=True)
class NotificationEvent:
    event_id: int
    event_time: int
    event_type: str
    db: str | None
    table: str | None
    partition: str | None
    txn_id: int | None
    write_id: int | None
    message: dict[str, Any]


@dataclass(frozen=True)
class CompactionInfo:
    """A compaction request, queued or completed; ``state`` is Hive's SHOW COMPACTIONS text.

    ``txn_id`` is the worker's compactor txn (heartbeated while it works: a worker whose txn is no longer
    open is dead). ``publish_id``/``next_reader_id`` order the publication of its output against snapshot
    readers' registrations; ``meta`` holds the ``_tmp`` directory, the output and the input directories.
    """

    id: int
    db: str
    table: str
    partition: str | None
    kind: str  # 'major' | 'minor'
    state: str
    worker_id: str | None
    enqueue_time: int
    start: int | None
    end: int | None
    highest_write_id: int | None
    error_message: str | None
    txn_id: int | None = None
    initiator_id: str | None = None
    attempts: int = 0
    publish_id: int | None = None
    next_reader_id: int | None = None
    commit_time: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def table_name(self) -> str:
        return f"{self.db}.{self.table}"

    def finished(self) -> CompactionInfo:
        """This request, waited for; :class:`CompactionError` when it was refused or failed."""
        if self.state in ("refused", "failed"):
            raise CompactionError(
                f"compaction {self.id} ({self.kind} {self.full_partition_name}) {self.state}: {self.error_message}",
                self.state,
            )
        return self

    @property
    def full_partition_name(self) -> str:
        """``db.table`` or ``db.table/k=v``, as Hive names compaction targets in its logs."""
        return self.table_name + (f"/{self.partition}" if self.partition else "")

    @property
    def type(self) -> str:
        """``MAJOR`` or ``MINOR`` (Hive's ``CompactionType`` name)."""
        return self.kind.upper()

    @property
    def worker_host(self) -> str | None:
        """The host part of a worker id ``host-pid-n`` (host names may contain dashes)."""
        return None if self.worker_id is None else self.worker_id.rsplit("-", 2)[0]

    @property
    def duration_ms(self) -> int | None:
        """Working time: from the worker's claim to the end of work (or of cleaning, once finished)."""
        if self.start is None:
            return None
        finish = self.end if self.end is not None else self.commit_time
        return None if finish is None else finish - self.start


@dataclass(frozen=True)
class Publication:
    """A compaction moving its output into a partition: a scan listing that partition meanwhile ignores
    ``outputs`` (directory names) and reads the directories they replace, which stay until it is done."""

    partition: str | None
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class ReaderRegistration:
    """A scan's registration (see ``Metastore.register_reader``) and the snapshot taken with it.

    ``baseline``: directory listings made after the registration see every publication numbered below it.
    """

    reader_id: int
    write_ids: ValidWriteIdList
    txns: ValidTxnList

    @property
    def baseline(self) -> int:
        return self.reader_id + 1


@dataclass(frozen=True)
class PotentialCompaction:
    """An initiator candidate: a table/partition written since its last compaction, or with many aborts."""

    db: str
    table: str
    partition: str | None
    too_many_aborts: bool

    @property
    def table_name(self) -> str:
        return f"{self.db}.{self.table}"


@dataclass(frozen=True)
class WrittenFile:
    """A file a commit wrote, as a replica copies it: bytes ``[start, length)`` are new since the file's previous
    commit (``start`` 0: a new file), ``crc32`` is the CRC-32 of bytes ``[0, length)`` and ``start_crc32`` that of
    ``[0, start)``, so a copier verifies the range it appends by continuing the value it had. ``open``: the file is
    still being written (a streaming batch's, with a side file whose last flush length is ``length``).
    """

    path: str
    length: int
    crc32: int
    start: int = 0
    start_crc32: int = 0
    open: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "length": self.length,
            "crc32": self.crc32,
            "start": self.start,
            "start_crc32": self.start_crc32,
            "open": self.open,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> WrittenFile:
        return cls(
            str(value["path"]),
            int(value["length"]),
            int(value["crc32"]),
            int(value.get("start", 0)),
            int(value.get("start_crc32", 0)),
            bool(value.get("open", False)),
        )


@dataclass(frozen=True)
class TableWrite:
    """What a committing txn wrote to one table, recorded in the commit's DB transaction.

    ``components``: partitions (name, None for an unpartitioned table) whose ``TXN_COMPONENTS`` rows the
    commit adds with their operation (Hive's ``addDynamicPartitions``): writers that did not name them in a
    lock request. ``files``: the data files written per partition, for ACID_WRITE events (replication): each a
    :class:`WrittenFile` (what a replica needs to copy it) or only its path.
    """

    table: str
    write_id: int
    components: Mapping[str | None, OperationType] = field(default_factory=dict)
    files: Mapping[str | None, Sequence[str | WrittenFile]] = field(default_factory=dict)


@dataclass(frozen=True)
class CompletedComponent:
    """A table/partition written by a committed txn: the compaction initiator's input."""

    txn_id: int
    db: str
    table: str
    partition: str | None
    write_id: int | None
    update_delete: bool
    timestamp: int


@dataclass(frozen=True)
class TableDefinition:
    """A table's definition (a plain value: :class:`acidstream.metastore.facade.TableHandle` is the handle that also
    knows its metastore)."""

    db: str
    name: str
    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...]
    bucket_columns: tuple[str, ...]
    num_buckets: int
    bucketing_version: int
    properties: Mapping[str, str]
    location: str
    table_id: int

    @property
    def full_name(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def is_transactional(self) -> bool:
        """Full ACID: ``transactional=true`` and not ``insert_only`` (Hive's ``AcidUtils.isFullAcidTable``)."""
        props = {k.lower(): v.lower() for k, v in self.properties.items()}
        return (
            props.get("transactional") == "true"
            and props.get("transactional_properties", "default") != "insert_only"
        )

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_keys)

    @property
    def orc_compression(self) -> str:
        """The ORC codec writers use: the ``orc.compress`` table property, as in Hive; ZLIB by default."""
        props = {k.lower(): v for k, v in self.properties.items()}
        return props.get("orc.compress", "ZLIB").upper()

    @property
    def fsync(self) -> bool:
        """Whether writers fsync data files, side files and their directories before each commit: the
        ``acidstream.fsync`` table property (false by default: a commit then survives a process crash, not
        a machine crash)."""
        props = {k.lower(): v for k, v in self.properties.items()}
        return props.get(FSYNC_PROPERTY, "false").strip().lower() == "true"

    @property
    def all_columns(self) -> tuple[Column, ...]:
        return self.columns + self.partition_keys

    def field_values(self) -> dict[str, Any]:
        """The definition's fields (a handle's too, without what a handle adds)."""
        return {f.name: getattr(self, f.name) for f in fields(TableDefinition)}

    def definition(self) -> TableDefinition:
        """The plain definition, also of a handle: what pickles to workers (a handle's metastore does not)."""
        values = self.field_values()
        values["properties"] = dict(self.properties)  # a plain dict pickles, a read-only view may not
        return TableDefinition(**values)


@dataclass(frozen=True)
class Partition:
    table: str
    values: tuple[str, ...]
    name: str
    location: str
