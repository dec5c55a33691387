"""``StreamingConnection``: Hive Streaming Data Ingest V2 for Python.

A connection writes into one table (or one static partition) through transaction batches: ``n`` txns opened
with their write ids in one go, all writing into the same file per (partition, bucket) (on object stores: each
txn into its own delta, see :mod:`acidstream.streaming.files`), each committed or aborted on its own. Records
handed to :meth:`write` are buffered and parsed in bulk; a malformed record is reported as
:class:`SerializationError` at the next parse point (a full buffer or the commit), naming its index in the
transaction and the field, and every good record is kept — the transaction stays usable. Any other failure
(I/O, metastore) kills the batch as in Hive: its txns are aborted and later calls raise.

The connection is not thread-safe by contract (as in Hive), except :meth:`close`, which may be called from any
thread or a signal handler.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.evolution import write_shape_change
from acidstream.acid.orc import WriterOptions
from acidstream.acid.partitions import make_part_name, partition_path
from acidstream.errors import (
    AcidStreamError,
    InvalidPartition,
    InvalidTable,
    MetaException,
    NoSuchObjectException,
    SerializationError,
    StreamingConnectionError,
    TableChanged,
    TransactionError,
)
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import (
    LockComponent,
    LockLevel,
    LockType,
    OperationType,
    TableDefinition,
    TableWrite,
)
from acidstream.runtime import DEFAULT_SWITCH_INTERVAL, ShortSwitchInterval, prepare_process
from acidstream.storage import capabilities, check_location, table_filesystem
from acidstream.streaming.deadletter import DeadLetterSink
from acidstream.streaming.files import BatchFiles, Destination
from acidstream.streaming.ingest import RecordIngest
from acidstream.streaming.records import RecordParser, record_bytes, split_records
from acidstream.streaming.stats import ConnectionStats
from acidstream.streaming.writers import RecordWriter
from acidstream.txn.batch import TransactionBatch, TxnBatch, UnmanagedTransaction
from acidstream.txn.heartbeat import Heartbeater, heartbeat_interval
from acidstream.txn.state import TxnState

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

#: Hive's ``hive.txn.max.open.batch``: the metastore refuses larger batches.
MAX_BATCH_SIZE = 1000


@dataclass(frozen=True)
class StreamingConfig:
    """Tunables with Hive-like defaults; ``with_configuration`` accepts these names as keys."""

    max_buffered_bytes: int = 256 << 20  # auto-flush threshold over all open files of a batch
    parse_batch_records: int = 65536  # records buffered before a bulk parse
    parse_batch_bytes: int = 64 << 20  # or record bytes, whichever fills first
    compression: str | None = None  # default: the table's ``orc.compress`` (ZLIB if unset), as in Hive
    heartbeat_interval: float | None = None  # default: metastore txn timeout / 2
    write_notifications: bool = True  # ACID_WRITE events for replication
    # fsync data files, side files and their directories before each commit; None: the table's acidstream.fsync
    fsync: bool | None = None
    # seconds; while a call works, other threads hand back the GIL sooner (see acidstream.runtime); None: leave it
    gil_switch_interval: float | None = DEFAULT_SWITCH_INTERVAL
    # each txn of a batch writes its own delta_w_w, closed before its commit, instead of sharing the batch's
    # delta_min_max and its side files; None: where the filesystem cannot flush and append (object stores)
    delta_per_transaction: bool | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> StreamingConfig:
        converters: dict[str, Any] = {
            "max_buffered_bytes": _at_least(0),
            "parse_batch_records": _at_least(1),
            "parse_batch_bytes": _at_least(1),
            "compression": lambda v: str(v).upper(),
            "heartbeat_interval": lambda v: None if v is None else float(v),
            "write_notifications": _flag,
            "fsync": lambda v: None if v is None else _flag(v),
            "gil_switch_interval": _switch_interval,
            "delta_per_transaction": lambda v: None if v is None else _flag(v),
        }
        unknown = set(values) - set(converters)
        if unknown:
            raise StreamingConnectionError(
                f"unknown configuration keys {sorted(unknown)}; known: {sorted(converters)}"
            )
        converted = {}
        for key, value in values.items():
            try:
                converted[key] = converters[key](value)
            except (TypeError, ValueError) as exc:
                raise StreamingConnectionError(f"configuration {key!r} = {value!r}: {exc}") from exc
        return cls(**converted)


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).lower() in ("1", "true")


def _at_least(low: int) -> Any:
    """A converter to an int no smaller than ``low``."""

    def convert(value: Any) -> int:
        number = int(value)
        if number < low:
            raise ValueError(f"must be >= {low}")
        return number

    return convert


def _switch_interval(value: Any) -> float | None:
    """Seconds; None or 0 leave the interpreter's switch interval alone."""
    if value is None or float(value) == 0:
        return None
    if float(value) < 0:
        raise ValueError("must be >= 0 seconds")
    return float(value)


class StreamingConnection:
    """A streaming connection to one table; build it with :meth:`builder`.

    A thin composition: the transactions it writes through (a :class:`~acidstream.txn.batch.TransactionBatch`,
    or one :class:`~acidstream.txn.batch.UnmanagedTransaction` with a fixed write id), the record ingest path
    (:class:`~acidstream.streaming.ingest.RecordIngest`: buffer → parse → route → files) and the batch's files.
    """

    #: Buffer one record (``bytes`` or ``str``); parsing happens in bulk every ``parse_batch_records`` records
    #: (or ``parse_batch_bytes``) and at commit. It is the record buffer's ``append`` (a builtin when the C
    #: extension is built): no Python frame per record; anything it cannot take at once (another type, the
    #: record that fills the buffer, no open txn) goes to the Python path, which converts, parses or raises.
    write: Callable[[bytes | str], None]

    def __init__(
        self,
        *,
        metastore: MetastoreFacade | None,
        owns_metastore: bool,
        table: TableDefinition,
        fs: pafs.FileSystem,
        table_dir: str,
        record_writer: RecordWriter,
        static_values: tuple[str, ...] | None,
        batch_size: int,
        streaming_optimizations: bool,
        agent_info: str,
        config: StreamingConfig,
        write_id: int | None,
        statement_id: int | None,
        dead_letter: str | None,
        delta_per_txn: bool = False,
    ) -> None:
        self.table = table
        self.metastore = metastore
        self._owns_metastore = owns_metastore
        self.fs = fs
        self.table_dir = table_dir
        self.agent_info = agent_info
        self.batch_size = batch_size
        self.config = config
        #: fsync what each commit names before the metastore records it (see ``StreamingConfig.fsync``)
        self.fsync = table.fsync if config.fsync is None else config.fsync
        self.unmanaged_write_id = write_id
        self.statement_id = statement_id
        #: each txn writes its own delta_w_w (see ``StreamingConfig.delta_per_transaction``)
        self.delta_per_txn = delta_per_txn
        self.static_values = static_values
        compression = config.compression or table.orc_compression
        try:
            self.writer_options = WriterOptions(
                compression=compression, streaming_optimizations=streaming_optimizations
            )
        except ValueError as exc:
            source = "configuration 'compression'" if config.compression else "table property 'orc.compress'"
            raise StreamingConnectionError(f"{table.full_name}: {source} = {compression!r}: {exc}") from exc
        self._split = record_writer.split
        self._stats = ConnectionStats()
        self._lock = threading.RLock()
        self._gil = ShortSwitchInterval(config.gil_switch_interval)  # held with _lock by every bulk call
        self._closed = False
        self._batch: TxnBatch | None = None
        self._files: BatchFiles | None = None
        self._heartbeater: Heartbeater | None = None
        if write_id is None and metastore is None:
            raise StreamingConnectionError("a managed connection needs a metastore")
        self._ingest = RecordIngest(
            table,
            record_writer,
            table_dir=table_dir,
            static_values=static_values,
            locate=self._registered_partition if self.is_managed else self._partition_path,
            overflow=self._write_slow,
            room=(config.parse_batch_records, config.parse_batch_bytes),
            stats=self._stats,
            dead_letters=DeadLetterSink(dead_letter, table.full_name) if dead_letter is not None else None,
        )
        self.parser: RecordParser = self._ingest.parser
        self.router = self._ingest.router
        self.dynamic = self._ingest.dynamic
        self.write = self._ingest.buffer.append  # see the class attribute; room 0 until a txn begins
        static = self._ingest.static_dest
        # Hive's per-txn lock: shared read on the static partition (or the table), agent info attached
        self._lock_component = LockComponent(
            type=LockType.SHARED_READ,
            level=LockLevel.PARTITION if static.name else LockLevel.TABLE,
            db=table.db,
            table=table.name,
            partition=static.name or None,
            operation=OperationType.INSERT,
            is_dynamic_partition_write=self.dynamic,
        )
        self._next_batch: Callable[[], TxnBatch] = self._open_managed_batch
        if write_id is not None:
            self._next_batch = UnmanagedTransaction.once(write_id)

    @staticmethod
    def builder() -> StreamingConnectionBuilder:
        return StreamingConnectionBuilder()

    # --- context managers -----------------------------------------------------------------------------

    def __enter__(self) -> StreamingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[StreamingConnection]:
        """Begin; commit when the block ends normally, abort when it raises."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            if not self._closed and self._batch is not None and self._batch.state is TxnState.OPEN:
                self.abort_transaction()
            raise
        self.commit_transaction()

    # --- state ----------------------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def is_managed(self) -> bool:
        return self.unmanaged_write_id is None

    def remaining_transactions(self) -> int:
        return self._batch.remaining if self._batch is not None else 0

    def current_transaction_id(self) -> int | None:
        batch = self._batch
        return batch.txn_id if batch is not None and batch.index >= 0 else None

    def current_write_id(self) -> int | None:
        batch = self._batch
        return batch.write_id if batch is not None and batch.index >= 0 else None

    def current_transaction_state(self) -> TxnState:
        return self._batch.state if self._batch is not None else TxnState.INACTIVE

    def partitions(self) -> list[str]:
        """Names of every partition this connection wrote to (for the owner's commit in unmanaged mode)."""
        return sorted(n for n in self._ingest.all_touched if n)

    def stats(self) -> dict[str, int]:
        snap = self._stats.snapshot()
        snap["auto_flushes"] += self._files.auto_flushes if self._files is not None else 0
        snap["metastore_calls"] += self._batch.calls if self._batch is not None else 0
        return snap

    def to_transaction_string(self) -> str:
        batch = self._batch
        if batch is None:
            return f"TxnStatus[] on {self.table.full_name}"
        pairs, status = batch.describe().split(" TxnStatus", 1)
        return f"{pairs} on table {self.table.full_name} TxnStatus{status}"

    def __repr__(self) -> str:
        return f"StreamingConnection({self.table.full_name}, agent={self.agent_info!r}, {self.to_transaction_string()})"

    # --- transactions ---------------------------------------------------------------------------------

    def begin_transaction(self) -> None:
        with self._lock, self._gil:
            self._check_not_closed()
            batch = self._batch
            if batch is not None and batch.state is TxnState.OPEN:
                raise TransactionError(
                    f"Transaction txnid:{batch.txn_id} is still open: commit or abort it before beginning another"
                )
            if batch is None or batch.remaining == 0:
                if batch is not None:
                    self._close_batch(batch)
                batch = self._open_batch()
            if batch.dead is not None:
                raise TransactionError(
                    f"Cannot begin next transaction on a closed streaming connection: {batch.dead}"
                ) from batch.dead
            try:
                batch.begin_next()
            except TransactionError as exc:  # its lock was refused
                self._mark_dead(batch, exc)
                raise
            assert self._files is not None
            self._files.begin(batch.write_id)
            self._ingest.start(self._files, batch.write_id, batch.txn_id)

    def _write_slow(self, record: bytes | str) -> None:
        """Not plain bytes, the record that fills the buffer, or a txn that is not writable (raises why)."""
        self._check_writable()
        if isinstance(record, str):
            data: bytes | bytearray | memoryview = record.encode()
        elif isinstance(record, bytes | bytearray):
            data = record  # the buffer copies it: the caller may reuse its buffer before the parse
        elif isinstance(record, memoryview):
            data = bytes(record)  # its bytes in order, whatever its layout (a strided view included)
        else:
            raise TypeError(f"write() takes bytes or str, not {type(record).__name__}")
        if self._ingest.add(data):
            self._drain_pending()

    def write_stream(self, stream: BinaryIO, line_delimiter: str | None = None) -> None:
        """Write every record of a binary stream split as the record writer splits it (on its line delimiter
        pattern), or on ``line_delimiter``."""
        for chunk in split_records(stream, line_delimiter) if line_delimiter else self._split(stream):
            self.write_record_array(chunk)

    def write_record_array(self, records: pa.Array) -> None:
        """Write records already split into one Arrow binary array (one bulk parse, no per-record Python)."""
        self._drain_pending()
        with self._lock, self._gil:
            batch = self._check_writable()
            first = self._ingest.count(len(records), record_bytes(records))
            with self._fatal_unless_bad_records(batch):
                self._ingest.parse(records, first)

    def write_batch(self, data: pa.Table | pa.RecordBatch | Any) -> None:
        """Beyond Hive: write an Arrow table/batch or a pandas DataFrame whose columns match the table's."""
        self._drain_pending()
        with self._lock, self._gil:
            txns = self._check_writable()
            rows = self._ingest.rows(data)
            with self._fatal_unless_bad_records(txns):
                self._ingest.route(rows)

    def commit_transaction(
        self,
        partitions: Sequence[Sequence[str]] | None = None,
        key: str | None = None,
        value: str | None = None,
    ) -> None:
        """Commit the current txn; ``key``/``value`` is stored atomically with it (exactly-once sinks).

        ``partitions`` (lists of values) are created first and registered with this txn, as Hive 4 does.
        A :class:`SerializationError` found while parsing the last buffered records leaves the txn open; any
        other failure kills the batch (its txns are aborted) and every later call on it raises. In unmanaged
        mode the files are flushed and closed and the txn is left PREPARED_FOR_COMMIT for its owner.
        """
        with self._lock, self._gil:
            batch = self._check_writable()
            self._drain_pending()
            try:
                self._commit(batch, partitions, key, value)
            except AcidStreamError as exc:
                self._mark_dead(batch, exc)
                raise
            except Exception as exc:
                self._mark_dead(batch, exc)
                raise TransactionError(f"Unable to commit transaction txnid:{batch.txn_id}: {exc}") from exc
            self._ingest.refuse()

    def _commit(
        self,
        batch: TxnBatch,
        partitions: Sequence[Sequence[str]] | None,
        key: str | None,
        value: str | None,
    ) -> None:
        files = self._files
        assert files is not None
        touched_by = self._ingest.txn_touched
        for values in partitions or ():
            dest = self._ingest.destination(tuple(values))
            touched_by.setdefault(dest.name, dest)
        files.flush()
        files.end_txn(abort=False, last=batch.remaining == 0)
        if self.fsync:
            files.sync(self.table_dir)
        if not self.is_managed:  # left PREPARED_FOR_COMMIT: its owner commits the files and their partitions
            batch.commit((), key, value)
            return
        touched = sorted(touched_by)
        # replication: each file's new range and checksum, after the flush (or the batch's close)
        written = files.written_files(touched) if self.config.write_notifications else {}
        write = TableWrite(
            self.table.full_name,
            batch.write_id,
            components=dict.fromkeys(touched, OperationType.INSERT) if self.dynamic else {},
            files={name or None: written.get(name, []) for name in touched} if written else {},
        )
        batch.commit([write] if write.components or write.files else (), key, value)
        files.named(written)
        self._stats.committed_txns += 1

    def abort_transaction(self) -> None:
        """Abort the current txn: rows already written stay in the files but no snapshot ever shows them."""
        with self._lock, self._gil:
            batch = self._require_open_txn()
            self._ingest.buffer.clear()
            self._ingest.refuse()
            try:
                batch.abort_current()
                assert self._files is not None
                self._files.end_txn(abort=True, last=batch.remaining == 0)
            except AcidStreamError as exc:
                self._mark_dead(batch, exc)
                raise
            self._stats.aborted_txns += 1

    def close(self) -> None:
        """Abort every unused txn of the batch, close the files, stop heartbeats; idempotent, any thread."""
        if self._heartbeater is not None:
            self._heartbeater.stop()  # before taking the lock: a beat in progress may hold it
        with self._lock, self._gil:
            if self._closed:
                return
            self._closed = True
            self._ingest.refuse()
            errors: list[BaseException] = []
            if self._batch is not None:
                try:
                    self._close_batch(self._batch)
                except Exception as exc:
                    errors.append(exc)
            self._ingest.close()
            if self._owns_metastore and self.metastore is not None:
                self.metastore.close()
            if errors:
                raise errors[0]

    # --- internals: batches ---------------------------------------------------------------------------

    def _open_managed_batch(self) -> TxnBatch:
        assert self.metastore is not None
        batch = TransactionBatch.open(
            self.metastore,
            self.batch_size,
            self.table.full_name,
            self._lock_component,
            agent_info=self.agent_info,
        )
        self._stats.batches_opened += 1
        self._start_heartbeats()
        return batch

    def _open_batch(self) -> TxnBatch:
        """The next batch with its files; nothing of it stays open if the files cannot be made."""
        self._check_table()
        batch = self._next_batch()
        try:
            files = BatchFiles(
                self.fs,
                self.table.columns,
                min_write_id=batch.write_ids[0],
                max_write_id=batch.write_ids[-1],
                statement_id=self.statement_id,
                options=self.writer_options,
                max_buffered_bytes=self.config.max_buffered_bytes,
                delta_per_txn=self.delta_per_txn,
            )
        except Exception:
            batch.settle()
            raise
        self._batch, self._files = batch, files
        return batch

    def _check_table(self) -> None:
        """Refuse a batch when the table no longer has the shape this connection writes (an ALTER since it
        opened, by Hive or by us): its files would carry the old columns, or rows routed to buckets by the old
        rule (:class:`TableChanged`, :func:`acidstream.acid.evolution.write_shape_change`)."""
        if self.metastore is None or not self.is_managed:
            return
        change = write_shape_change(self.table, self.metastore.table(self.table.full_name))
        if change is not None:
            raise TableChanged(self.table.full_name, change)

    def _close_batch(self, batch: TxnBatch) -> None:
        files = self._files
        assert files is not None
        try:
            self._settle(batch)
        finally:
            self._stats.auto_flushes += files.auto_flushes
            self._stats.metastore_calls += batch.calls
            self._stats.files_written.update(files.files)
            files.auto_flushes = batch.calls = 0
            files.close(abort=files.delta_per_txn)  # per-txn deltas: the open txn's, now aborted

    def _settle(self, batch: TxnBatch) -> None:
        """Abort the batch's unresolved txns (retried at the next heartbeat and at close if the metastore
        cannot be reached)."""
        self._stats.aborted_txns += batch.settle()

    def _mark_dead(self, batch: TxnBatch, cause: BaseException) -> None:
        """Any failure but a bad record kills the batch (Hive's ``markDead``): remaining txns are aborted."""
        if not batch.mark_dead(cause):
            return
        self._ingest.refuse()
        with contextlib.suppress(Exception):  # the original failure is what the caller needs to see
            self._close_batch(batch)

    def _start_heartbeats(self) -> None:
        if self._heartbeater is not None:
            return
        assert self.metastore is not None
        interval = self.config.heartbeat_interval or heartbeat_interval(self.metastore.txn_timeout)
        self._heartbeater = Heartbeater(
            interval, self._heartbeat, f"acidstream-heartbeat-{self.table.full_name}"
        )
        self._heartbeater.start()

    def _heartbeat(self) -> None:
        with self._lock, self._gil:
            batch = self._batch
            if self._closed or batch is None:
                return
            if batch.dead is not None:
                self._settle(batch)  # txns the failure could not abort (the metastore was unreachable)
                return
            failure = batch.heartbeat()
            if failure is not None:
                self._mark_dead(batch, failure)

    # --- internals: records ---------------------------------------------------------------------------

    def _drain_pending(self) -> None:
        """Parse and route the buffered records."""
        if not self._ingest.buffer:
            return
        with self._lock, self._gil:
            batch = self._check_writable()
            array, first = self._ingest.take_pending()
            with self._fatal_unless_bad_records(batch):
                self._ingest.parse(array, first)

    @contextmanager
    def _fatal_unless_bad_records(self, batch: TxnBatch) -> Iterator[None]:
        """Hive's rule for taking records: a :class:`SerializationError` names bad records and every other one
        was kept, so the txn stays usable; any other failure may have lost records (taken from the buffer,
        half routed, half written) and kills the batch, aborting its txns, so that nothing commits without them."""
        try:
            yield
        except SerializationError:
            raise
        except BaseException as exc:
            self._mark_dead(batch, exc)
            raise

    def _registered_partition(self, values: tuple[str, ...]) -> Destination:
        """A partition created in the metastore on first use (race-safe there)."""
        assert self.metastore is not None
        self._stats.metastore_calls += 1
        part = self.metastore.add_partition(self.table.full_name, list(values), if_not_exists=True)
        return Destination(values, part.name, table_filesystem(part.location)[1])

    def _partition_path(self, values: tuple[str, ...]) -> Destination:
        """Unmanaged mode: the partition's directory under the table's (its owner registers it)."""
        keys = [k.name for k in self.table.partition_keys]
        return Destination(
            values, make_part_name(keys, list(values)), partition_path(self.table_dir, keys, values)
        )

    # --- internals: checks ----------------------------------------------------------------------------

    def _check_not_closed(self) -> None:
        if self._closed:
            raise StreamingConnectionError("Streaming connection is closed already.")

    def _require_open_txn(self) -> TxnBatch:
        self._check_not_closed()
        batch = self._batch
        if batch is None:
            raise TransactionError("Transaction batch is null. Missing beginTransaction?")
        if batch.state is not TxnState.OPEN:
            raise TransactionError("Transaction state is not OPEN. Missing beginTransaction?")
        return batch

    def _check_writable(self) -> TxnBatch:
        batch = self._require_open_txn()
        if batch.dead is not None:
            raise TransactionError(f"Transaction batch is dead: {batch.dead}") from batch.dead
        return batch


class StreamingConnectionBuilder:
    """Hive's ``HiveStreamingConnection.Builder`` with snake_case names."""

    def __init__(self) -> None:
        self._db: str | None = None
        self._table: str | None = None
        self._static: list[str] | None = None
        self._agent: str | None = None
        self._metastore: MetastoreFacade | str | None = None
        self._warehouse: str | None = None
        self._batch_size = 1
        self._optimizations = True
        self._writer: RecordWriter | None = None
        self._write_id: int | None = None
        self._statement_id: int | None = None
        self._table_object: TableDefinition | None = None
        self._config: dict[str, Any] = {}
        self._dead_letter: str | None = None

    def with_database(self, db: str) -> StreamingConnectionBuilder:
        self._db = db.lower()
        return self

    def with_table(self, table: str) -> StreamingConnectionBuilder:
        self._table = table.lower()
        return self

    def with_static_partition_values(self, values: Sequence[str]) -> StreamingConnectionBuilder:
        self._static = [str(v) for v in values]
        return self

    def with_agent_info(self, agent_info: str) -> StreamingConnectionBuilder:
        self._agent = agent_info
        return self

    def with_metastore(
        self, metastore: MetastoreFacade | str, warehouse: str | None = None
    ) -> StreamingConnectionBuilder:
        """A :class:`Metastore` or its URL (then ``warehouse`` says where table files live)."""
        self._metastore = metastore
        self._warehouse = warehouse
        return self

    def with_transaction_batch_size(self, size: int) -> StreamingConnectionBuilder:
        if not 1 <= size <= MAX_BATCH_SIZE:
            raise StreamingConnectionError(f"transaction batch size must be 1..{MAX_BATCH_SIZE}, got {size}")
        self._batch_size = size
        return self

    def with_streaming_optimizations(self, enabled: bool) -> StreamingConnectionBuilder:
        self._optimizations = enabled
        return self

    def with_record_writer(self, writer: RecordWriter) -> StreamingConnectionBuilder:
        self._writer = writer
        return self

    def with_write_id(self, write_id: int) -> StreamingConnectionBuilder:
        """Unmanaged mode: write under a write id whose txn is owned elsewhere (e.g. a Spark driver)."""
        self._write_id = write_id
        return self

    def with_statement_id(self, statement_id: int) -> StreamingConnectionBuilder:
        self._statement_id = statement_id
        return self

    def with_table_object(self, table: TableDefinition) -> StreamingConnectionBuilder:
        """Unmanaged mode without any metastore access (executors): the table definition itself."""
        self._table_object = table
        return self

    def with_configuration(self, overrides: Mapping[str, Any]) -> StreamingConnectionBuilder:
        self._config.update(overrides)
        return self

    def with_dead_letter_file(self, path: str | os.PathLike[str]) -> StreamingConnectionBuilder:
        """Bad records go to this JSON-lines file instead of raising :class:`SerializationError`."""
        self._dead_letter = os.fspath(path)
        return self

    def connect(self) -> StreamingConnection:
        if self._writer is None:
            raise StreamingConnectionError("record writer cannot be null")
        config = StreamingConfig.from_mapping(self._config)
        prepare_process()
        ms, owns = self._open_metastore()
        try:
            table = self._resolve_table(ms)
            self._validate(table)
            check_location(table.location)  # a missing bucket is said now, not at the first commit
            fs, table_dir = table_filesystem(table.location)
            delta_per_txn = _delta_per_txn(config, fs, self._batch_size)
            return StreamingConnection(
                metastore=ms,
                owns_metastore=owns,
                table=table,
                fs=fs,
                table_dir=table_dir,
                record_writer=self._writer,
                static_values=tuple(self._static) if self._static is not None else None,
                batch_size=self._batch_size,
                streaming_optimizations=self._optimizations,
                agent_info=self._agent or _default_agent_info(),
                config=config,
                write_id=self._write_id,
                statement_id=self._statement_id,
                dead_letter=self._dead_letter,
                delta_per_txn=delta_per_txn,
            )
        except BaseException:
            if owns and ms is not None:
                ms.close()
            raise

    def _open_metastore(self) -> tuple[MetastoreFacade | None, bool]:
        if isinstance(self._metastore, str):
            if self._warehouse is None:
                raise StreamingConnectionError(
                    "with_metastore(url) needs warehouse=... (where the table files live)"
                )
            from acidstream.metastore import MetastoreFacade

            return MetastoreFacade.connect(self._metastore, warehouse=self._warehouse), True
        if self._metastore is None and self._table_object is None:
            raise StreamingConnectionError(
                "a metastore (object or URL) is required unless a table object is given"
            )
        return self._metastore, False

    def _resolve_table(self, ms: MetastoreFacade | None) -> TableDefinition:
        if self._table_object is not None:
            if self._write_id is None:
                raise StreamingConnectionError(
                    "with_table_object() is for unmanaged mode: give with_write_id() too"
                )
            return self._table_object
        if self._db is None:
            raise StreamingConnectionError("database cannot be null")
        if self._table is None:
            raise StreamingConnectionError("table cannot be null")
        assert ms is not None
        try:
            return ms.table(f"{self._db}.{self._table}")
        except NoSuchObjectException as exc:
            raise InvalidTable(self._db, self._table, "table does not exist") from exc
        except MetaException as exc:
            raise StreamingConnectionError(f"Unable to fetch table {self._db}.{self._table}: {exc}") from exc

    def _validate(self, table: TableDefinition) -> None:
        if not table.is_transactional:
            raise InvalidTable(table.db, table.name, f"{table.full_name} is not an Acid table")
        if self._static is not None and not table.partition_keys:
            raise StreamingConnectionError(
                f"{table.full_name}: static partition values {self._static} "
                "specifies partitions for un-partitioned table"
            )
        if self._static is not None and len(self._static) != len(table.partition_keys):
            names = [k.name for k in table.partition_keys]
            raise InvalidPartition(str(self._static), f"table {table.full_name} is partitioned by {names}")
        if self._statement_id is not None and self._write_id is None:
            raise StreamingConnectionError("with_statement_id() needs with_write_id() (unmanaged mode)")


def _delta_per_txn(config: StreamingConfig, fs: pafs.FileSystem, batch_size: int) -> bool:
    """Whether each txn of a batch writes its own ``delta_w_w``: as configured, else where the filesystem
    cannot publish an open file's prefix (object stores), since Hive's shared batch delta needs side files
    there. A batch larger than one sharing a delta on such a filesystem is refused with Hive's words."""
    flushes = capabilities(fs).can_flush_and_append
    per_txn = config.delta_per_transaction
    if per_txn is None:
        return not flushes
    if batch_size > 1 and not per_txn and not flushes:
        raise StreamingConnectionError(
            "The backing filesystem only supports transaction batch sizes of 1, "
            f"but {batch_size} was requested."
        )
    return per_txn


def _default_agent_info() -> str:
    """Hive's default ``<user>:<host>:<thread>``."""
    user, host = client_identity()
    return f"{user}:{host}:{threading.current_thread().name}"
