"""The one exception hierarchy of acidstream, rooted at :class:`AcidStreamError`.

The streaming API's errors sit under :class:`StreamingException` with Hive's names (``org.apache.hive.streaming``
and its mutation API); the metastore's follow its Thrift exception names; format and replication errors have
their own branches. Every class says whether retrying the *same* operation can succeed (``retryable``), so that
a Spark driver, a streaming agent or the library's own loops decide retry-or-fail without lists of classes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar


class AcidStreamError(Exception):
    """Root of every error acidstream raises on purpose."""

    retryable: ClassVar[bool] = False


# --- streaming client errors (org.apache.hive.streaming) -------------------------------------------------


class StreamingException(AcidStreamError):
    """Root of the streaming API's errors (Hive's ``StreamingException``): connections, records, transactions
    and the mutation API."""


class StreamingConnectionError(StreamingException):
    """The connection cannot be made or used (bad table, bad options, closed connection); Hive's
    ``ConnectionError``, which stays importable under that name."""


class InvalidTable(StreamingConnectionError):
    """The table does not exist or is not a full-ACID ORC table."""

    def __init__(self, db: str, table: str, reason: str) -> None:
        super().__init__(f"Invalid table {db}.{table}: {reason}")
        self.db, self.table, self.reason = db, table, reason


class TableChanged(StreamingConnectionError):
    """The table's columns or bucketing changed (an ALTER, by Hive or by us) since the connection read them: its
    next batch would write files of the old shape, so it opens none. Not retryable: connect again."""

    def __init__(self, table: str, change: str) -> None:
        super().__init__(
            f"Table {table} changed since the streaming connection opened: {change}; connect again"
        )
        self.table, self.change = table, change


class InvalidPartition(StreamingException):
    """A partition spec does not fit the table's partition keys."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"Invalid partition {name}: {reason}")
        self.name, self.reason = name, reason


class SerializationError(StreamingException):
    """A record cannot be parsed into the table's columns; the transaction stays usable."""

    def __init__(
        self,
        message: str,
        *,
        record_index: int | None = None,
        field: str | None = None,
        record: bytes | None = None,
    ) -> None:
        where = []
        if record_index is not None:
            where.append(f"record {record_index}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
        self.record_index, self.field, self.record = record_index, field, record


class StreamingIOFailure(StreamingException):
    """Writing or flushing data files failed (disk full, permission, storage outage)."""

    retryable = True


class StorageLocationError(StreamingIOFailure):
    """A table's storage cannot be reached as configured (a bucket missing, credentials refused): said before
    any transaction opens, naming the location."""

    retryable = False


class TransactionError(StreamingException):
    """A transaction cannot move to the requested state (not open, aborted, timed out)."""


class HeartBeatFailure(StreamingException):
    """Heartbeats found transactions of the batch aborted or missing: the batch is dead."""

    def __init__(self, aborted: list[int], missing: list[int]) -> None:
        super().__init__(f"Heartbeat found aborted txns {aborted} and missing txns {missing}")
        self.aborted, self.missing = aborted, missing


# --- mutation errors (org.apache.hive.hcatalog.streaming.mutate) ------------------------------------------


class ClientException(StreamingException):
    """The mutation client cannot do what was asked (``mutate.client.ClientException``)."""


class ConnectionException(ClientException):
    """A sink table is missing, not transactional or not bucketed, or the client is not connected."""


class TransactionException(ClientException):
    """A mutation transaction cannot be opened, begun, committed or aborted in its current state."""


class LockException(ClientException):
    """The locks of a mutation transaction could not be acquired, or were lost."""


class WorkerException(StreamingException):
    """A coordinator cannot apply a mutation; the transaction should be aborted."""


class RecordSequenceException(WorkerException):
    """Records of a (partition, bucket) group are not in ascending ROW__ID order."""


class GroupRevisitedException(WorkerException):
    """A (partition, bucket) group came back after the coordinator had moved past it: its files are closed."""


class BucketIdException(WorkerException):
    """A record's ROW__ID bucket differs from the bucket its bucketed columns hash to: rows never move."""


class PartitionCreationException(WorkerException):
    """A partition could not be created in the metastore."""


# --- metastore errors (Hive metastore Thrift exception names) ---------------------------------------------


class AuthenticationError(AcidStreamError):
    """A server refused who the caller is, or the caller has no credentials for it (Kerberos: no ticket, a
    wrong keytab, a service principal the server is not). Raised before any transaction opens; the message names
    the principal, the server and what to do (``kinit``, the setting to change), never a secret. Not retryable:
    the same credentials are refused again."""


class MetaException(AcidStreamError):
    """The metastore failed or refused an operation for a reason not covered below."""


class MetastoreUnavailable(MetaException):
    """The metastore database cannot be reached right now."""

    retryable = True


class CommitOutcomeUnknown(MetaException):
    """A commit was sent, its answer was lost, and the metastore did not answer again within the settle bound:
    the txn may have committed or not. Not retryable: re-sending its writes in a new txn could write them twice.
    The message names the txn (``txn_id``) and how to learn its outcome once the metastore answers: a txn that is
    neither open nor aborted (``SHOW TRANSACTIONS``) committed."""

    def __init__(self, txn_id: int, metastore: str, why: str) -> None:
        super().__init__(
            f"the outcome of committing txnid:{txn_id} is unknown: its answer was lost and {why}. Do not re-send "
            f"its writes before you know it: once the metastore answers, SHOW TRANSACTIONS (acidstream show txns "
            f"--metastore {metastore}) lists txnid:{txn_id} if it is open (abort it) or aborted; not listed, it "
            "committed"
        )
        self.txn_id = txn_id


class MetastoreUrlError(MetaException):
    """A metastore URL that does not parse or names a metastore acidstream does not run on (SQLite, PostgreSQL
    or a Hive Metastore over thrift): the caller's mistake, not the metastore's state."""


class UnsupportedCapability(MetaException):
    """The metastore's backend lacks a capability the call needs (e.g. a notification log on a Hive Metastore);
    the message names the call, the backend and what to do instead."""

    def __init__(self, call: str, capability: str, backend: str, fallback: str) -> None:
        super().__init__(f"{call}: {backend} has no {capability.lower().replace('_', ' ')}; {fallback}")
        self.capability = capability


class SchemaVersionError(MetaException):
    """The metastore database was created by an incompatible acidstream release."""


class NoSuchObjectException(MetaException):
    """A database, table or partition does not exist."""


class AlreadyExistsException(MetaException):
    """A database, table or partition already exists."""


class InvalidObjectException(MetaException):
    """A definition is malformed (unknown type, bad partition spec, bad property)."""


class InvalidOperationException(MetaException):
    """The metastore refuses the operation as asked (Hive's name): dropping a database that still holds tables
    without CASCADE, or the default database."""


class SqlSyntaxError(InvalidObjectException):
    """A statement does not parse, or uses a construct acidstream does not run; ``position`` is the 0-based
    offset of the offending token (Hive's ``ParseException``)."""

    def __init__(self, message: str, sql: str, position: int) -> None:
        start = sql.rfind("\n", 0, position) + 1  # the caret points into the offending line only
        end = len(sql) if (found := sql.find("\n", position)) < 0 else found
        line = f" (line {sql.count(chr(10), 0, position) + 1})" if "\n" in sql.strip() else ""
        pointer = f"\n  {sql[start:end]}\n  {' ' * (position - start)}^"
        super().__init__(f"{message} at position {position}{line}{pointer}")
        self.sql, self.position = sql, position


class DdlSyntaxError(SqlSyntaxError):
    """A DDL statement (CREATE, DROP, ALTER, SHOW, DESCRIBE) does not parse."""


class NoSuchTxnException(MetaException):
    """The transaction id was never opened (or has been cleaned away)."""


class TxnAbortedException(MetaException):
    """The transaction was aborted (by the client, a timeout or a conflict) and cannot be committed."""


class TxnOpenException(MetaException):
    """The operation needs the transaction to be finished, but it is still open."""


class WriteConflictException(TxnAbortedException):
    """First-committer-wins: a concurrent committed txn updated/deleted the same partition.

    Not retryable: this txn is aborted. The caller may redo the whole mutation in a new txn, reading the rows
    again at its snapshot.
    """


class NoSuchLockException(MetaException):
    """The lock id is unknown (released, or its txn ended)."""


class LockTimeoutException(MetaException):
    """A lock could not be acquired within the wait timeout."""

    retryable = True


# --- storage ---------------------------------------------------------------------------------------------------


class StorageUnavailable(AcidStreamError):
    """A table's directory could not be listed or a file of it read: the store did not answer or failed the
    request (a network cut, an object store down, a disk's I/O error). Nothing is known about the bytes, so
    this is never a :class:`CorruptFileError`, which says bytes were read and do not decode. Retryable: the
    same read succeeds once the store answers. ``location`` is the directory or file, ``cause`` the store's
    error. (The write side's failures are :class:`StreamingIOFailure`, a streaming client's error.)"""

    retryable = True

    def __init__(self, location: str, cause: OSError) -> None:
        super().__init__(f"{location}: the store cannot be read: {cause}")
        self.location, self.cause = location, cause


@contextmanager
def reading_from(location: str) -> Iterator[None]:
    """The store's errors inside (``OSError``) as :class:`StorageUnavailable` naming ``location``. A missing
    file stays ``FileNotFoundError``: the store answered, and whether that is fine is the caller's to say."""
    try:
        yield
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StorageUnavailable(location, exc) from exc


# --- on-disk format errors ---------------------------------------------------------------------------------


class AcidFormatError(AcidStreamError):
    """Files or directories on disk violate the Hive ACID format."""


class NotEnoughHistory(AcidFormatError):
    """The snapshot is older than the oldest compacted base: the history it needs was cleaned."""


class CorruptFileError(AcidFormatError):
    """A data or side file is truncated or inconsistent; the message names the path."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


class SideFileNotReadable(CorruptFileError):
    """A ``_flush_length`` side file is empty or ends in a partial long: corrupt, or a writer is mid-append.

    Retryable: a live streaming writer completes its 8-byte append within moments; if the state persists the
    file needs ``orcfiledump --recover`` (or acidstream's equivalent).
    """

    retryable = True


# --- compaction ---------------------------------------------------------------------------------------------------


class CompactionError(AcidStreamError):
    """A compaction asked for and waited for was refused (nothing to compact) or failed; ``state`` says which.
    The table is as it was."""

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


class CompactionDeclined(CompactionError):
    """A compaction request the metastore did not queue, because of another request for the same table or
    partition (``queued_id``, in ``queued_state``): one of the other kind initiated or working, or on a Hive
    Metastore one carried out with nothing written since (ready for cleaning), which Hive declines a second
    request for. (One of the same kind initiated or working is returned instead: it does what was asked.)
    Nothing was queued; retryable: ask again once that request is done."""

    retryable = True

    def __init__(self, kind: str, target: str, queued_id: int, queued_kind: str, queued_state: str) -> None:
        super().__init__(
            f"a {kind} compaction of {target} was declined: {queued_kind} compaction {queued_id} of it is "
            f"{queued_state}; ask again once it is done",
            "declined",
        )
        self.queued_id, self.queued_state = queued_id, queued_state


# --- replication -------------------------------------------------------------------------------------------------


class ReplicationError(AcidStreamError):
    """Replication cannot go on as asked: a dump is incomplete or does not follow the replica's last event, a
    replica is asked to bootstrap twice, or source bytes no longer match their checksum."""


def __getattr__(name: str) -> Any:
    """``ConnectionError``: Hive's name for :class:`StreamingConnectionError`, kept for existing imports without
    shadowing the builtin in this module."""
    if name == "ConnectionError":
        return StreamingConnectionError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
