"""What a replica applies, as plain data: one source event becomes a list of operations (:data:`ReplOp`), which
dumps store as JSON and every backend's ``repl_apply`` takes; and where a replica stands (:class:`ReplState`).
Shared by ``repl/`` and the backends; acidstream's SQL metastore applies them (``metastore/sql/replication.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REPL_AGENT = "acidstream-repl"
# The table property naming the policy whose replication created a table: a newer bootstrap replaces only the
# tables of its own policy, never a replica's local tables or another policy's.
POLICY_PROPERTY = "acidstream.repl.policy"


@dataclass(frozen=True)
class ReplState:
    """Where a replica stands: the last source event applied and when."""

    policy: str
    source: str
    last_event_id: int
    last_event_time: int
    applied_time: int
    bootstrap_event_id: int


# --- operations --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateDatabase:
    name: str
    comment: str | None = None


@dataclass(frozen=True)
class DropDatabase:
    name: str


@dataclass(frozen=True)
class CreateTable:
    db: str
    name: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[tuple[str, str], ...] = ()
    bucket_columns: tuple[str, ...] = ()
    num_buckets: int = 0
    properties: tuple[tuple[str, str], ...] = ()
    location: str | None = None  # on a replica, where a newer bootstrap puts the table (None: the default)


@dataclass(frozen=True)
class DropTable:
    """The table goes with its write ids; its directory, and those of its retired copies (:class:`RetireTable`)
    still waiting for readers, are deleted once the drop commits."""

    db: str
    name: str


@dataclass(frozen=True)
class RetireTable:
    """A newer bootstrap replaces (or no longer has) the table: it leaves the catalog now, with its write ids and
    ``repl_files`` rows, but its directory stays for the replica's readers that may still be scanning it, and is
    deleted by the replica's cleaning pass as a replicated compaction's inputs are (the entry is recorded in
    this DB transaction, so a loader killed after it commits still deletes it)."""

    db: str
    name: str
    event_id: int


@dataclass(frozen=True)
class AlterTable:
    """Properties set, or (``columns``: (name, type) pairs, when the event changed them) the columns now."""

    db: str
    name: str
    properties: tuple[tuple[str, str], ...]
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class AddPartition:
    db: str
    table: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class DropPartition:
    db: str
    table: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class OpenTxns:
    """Source txns opened: each gets a replica txn (those already mapped are skipped)."""

    src_txn_ids: tuple[int, ...]


@dataclass(frozen=True)
class AllocWriteIds:
    """The source's write ids of ``db.table`` for source txns (mapped to their replica txns)."""

    db: str
    table: str
    pairs: tuple[tuple[int, int], ...]  # (source txn, write id)


@dataclass(frozen=True)
class CommitTxn:
    src_txn_id: int


@dataclass(frozen=True)
class AbortTxns:
    src_txn_ids: tuple[int, ...]


@dataclass(frozen=True)
class AbortUncarried:
    """A newer bootstrap: this policy's replica txns still open whose source txns it does not carry as open
    are aborted (they ended on the source unseen; replicated txns never time out, so they would pin the
    replica's cleaning and readers' snapshots for ever)."""

    carried_open: tuple[int, ...]


@dataclass(frozen=True)
class SeedWriteIds:
    """Bootstrap: write ids up to ``write_id`` of ``db.table`` are committed (one replica txn holds the
    highest, opened before any mapped txn, so it orders before every txn still open or aborted)."""

    db: str
    table: str
    write_id: int


@dataclass(frozen=True)
class RecordCompaction:
    """A source compaction's outputs are in place on the replica: its inputs (``meta``) wait for the replica's
    readers before the replica's cleaning pass deletes them."""

    db: str
    table: str
    partition: str | None
    kind: str
    highest_write_id: int | None
    meta: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class FileStates:
    """Replicated files now copied up to ``length`` with that CRC-32; ``forget``: paths (or directory
    prefixes ending in '/') no longer replicated."""

    files: tuple[tuple[str, int, int], ...] = ()
    forget: tuple[str, ...] = ()


ReplOp = (
    CreateDatabase
    | DropDatabase
    | CreateTable
    | DropTable
    | RetireTable
    | AlterTable
    | AddPartition
    | DropPartition
    | OpenTxns
    | AllocWriteIds
    | CommitTxn
    | AbortTxns
    | AbortUncarried
    | SeedWriteIds
    | RecordCompaction
    | FileStates
)
