"""``StreamingConnection``: Hive Streaming Data Ingest V2 for Python (hive-acid-format.md §5).

A connection writes into one table (or one static partition) through transaction batches: ``n`` txns opened
with their write ids in one go, all writing into the same file per (partition, bucket), each committed or
aborted on its own. Records handed to :meth:`write` are buffered and parsed in bulk; a malformed record is
reported as :class:`SerializationError` at the next parse point (a full buffer or the commit), naming its index
in the transaction and the field, and every good record is kept — the transaction stays usable. Any other
failure (I/O, metastore) kills the batch as in Hive: its txns are aborted and later calls raise.

The connection is not thread-safe by contract (as in Hive), except :meth:`close`, which may be called from any
thread or a signal handler.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.location import table_filesystem
from acidstream.acid.orc import WriterOptions
from acidstream.acid.partitions import make_part_name, partition_path
from acidstream.acid.tabular import to_record_batch
from acidstream.errors import (
    ConnectionError,
    HeartBeatFailure,
    InvalidPartition,
    InvalidTable,
    LockTimeoutException,
    MetaException,
    MetastoreUnavailable,
    NoSuchObjectException,
    NoSuchTxnException,
    SerializationError,
    StreamingException,
    TransactionError,
    TxnAbortedException,
)
from acidstream.gil import DEFAULT_SWITCH_INTERVAL, ShortSwitchInterval
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import (
    LockComponent,
    LockLevel,
    LockResponse,
    LockType,
    OperationType,
    Table,
    TableWrite,
)
from acidstream.streaming.files import BatchFiles, Destination, raise_open_file_limit
from acidstream.streaming.records import ParseResult, RecordParser, record_bytes, split_records
from acidstream.streaming.records.buffer import new_record_buffer
from acidstream.streaming.routing import RowRouter
from acidstream.streaming.stats import ConnectionStats
from acidstream.streaming.writers import RecordWriter
from acidstream.txn.heartbeat import Heartbeater, heartbeat_interval
from acidstream.txn.state import TxnState

if TYPE_CHECKING:
    from acidstream.metastore import Metastore

#: Hive's ``hive.txn.max.open.batch``: the metastore refuses larger batches.
MAX_BATCH_SIZE = 1000
OBJECT_STORE_FILESYSTEMS = {"S3FileSystem", "GcsFileSystem", "AzureFileSystem"}


@dataclass(frozen=True)
class StreamingConfig:
    """Tunables with Hive-like defaults; ``with_configuration`` accepts these names as keys."""

    max_buffered_bytes: int = 256 << 20  # auto-flush threshold over all open files of a batch
    parse_batch_records: int = 65536  # records buffered before a bulk parse
    parse_batch_bytes: int = 64 << 20  # or record bytes, whichever fills first
    compression: str | None = None  # default: the table's ``orc.compress`` (ZLIB if unset), as in Hive
    heartbeat_interval: float | None = None  # default: metastore txn timeout / 2
    write_notifications: bool = True  # ACID_WRITE events for replication
    # seconds; while a call works, other threads hand back the GIL sooner (see acidstream.gil); None: leave it
    gil_switch_interval: float | None = DEFAULT_SWITCH_INTERVAL

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> StreamingConfig:
        converters: dict[str, Any] = {
            "max_buffered_bytes": _at_least(0),
            "parse_batch_records": _at_least(1),
            "parse_batch_bytes": _at_least(1),
            "compression": lambda v: str(v).upper(),
            "heartbeat_interval": lambda v: None if v is None else float(v),
            "write_notifications": lambda v: v if isinstance(v, bool) else str(v).lower() in ("1", "true"),
            "gil_switch_interval": _switch_interval,
        }
        unknown = set(values) - set(converters)
        if unknown:
            raise ConnectionError(
                f"unknown configuration keys {sorted(unknown)}; known: {sorted(converters)}"
            )
        converted = {}
        for key, value in values.items():
            try:
                converted[key] = converters[key](value)
            except (TypeError, ValueError) as exc:
                raise ConnectionError(f"configuration {key!r} = {value!r}: {exc}") from exc
        return cls(**converted)


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


@dataclass
class _Batch:
    """Txns of one batch (``txn_ids == [-1]`` in unmanaged mode) and their shared files."""

    txn_ids: list[int]
    write_ids: list[int]
    files: BatchFiles
    states: list[TxnState]
    index: int = -1
    lock_ids: list[int | None] = field(default_factory=list)
    dead: BaseException | None = None
    first_lock: LockResponse | None = None  # requested with the batch's open, for its first txn

    @property
    def remaining(self) -> int:
        return len(self.txn_ids) - self.index - 1

    @property
    def state(self) -> TxnState:
        return self.states[self.index] if self.index >= 0 else TxnState.INACTIVE

    @property
    def txn_id(self) -> int:
        return self.txn_ids[self.index]

    @property
    def write_id(self) -> int:
        return self.write_ids[self.index]

    def unresolved_txns(self) -> list[int]:
        return [
            t
            for t, s in zip(self.txn_ids, self.states, strict=True)
            if s in (TxnState.INACTIVE, TxnState.OPEN)
        ]


class StreamingConnection:
    """A streaming connection to one table; build it with :meth:`builder`."""

    def __init__(
        self,
        *,
        metastore: Metastore | None,
        owns_metastore: bool,
        table: Table,
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
    ) -> None:
        self.table = table
        self.metastore = metastore
        self._owns_metastore = owns_metastore
        self.fs = fs
        self.table_dir = table_dir
        self.agent_info = agent_info
        self.batch_size = batch_size
        self.config = config
        self.unmanaged_write_id = write_id
        self.statement_id = statement_id
        self.static_values = static_values
        self.dynamic = bool(table.partition_keys) and static_values is None
        self.parser: RecordParser = record_writer.bind(
            table.columns, table.partition_keys, dynamic_partitioning=self.dynamic
        )
        self.router = RowRouter(
            table.columns,
            table.bucket_columns,
            table.num_buckets,
            table.bucketing_version,
            static_values=static_values,
            num_partition_keys=len(table.partition_keys),
        )
        compression = config.compression or table.orc_compression
        try:
            self.writer_options = WriterOptions(
                compression=compression, streaming_optimizations=streaming_optimizations
            )
        except ValueError as exc:
            source = "configuration 'compression'" if config.compression else "table property 'orc.compress'"
            raise ConnectionError(f"{table.full_name}: {source} = {compression!r}: {exc}") from exc
        self._line_pattern = record_writer.line_delimiter_pattern
        self._dead_letter_path = dead_letter
        self._dead_letter: IO[str] | None = None
        self._stats = ConnectionStats()
        self._lock = threading.RLock()
        self._gil = ShortSwitchInterval(config.gil_switch_interval)  # held with _lock by every bulk call
        self._closed = False
        self._batch: _Batch | None = None
        self._used_unmanaged = False
        # write()'s per-record path is the buffer's append, as this instance's attribute (it shadows the
        # method below): no Python frame per record. Its room is 0 whenever the connection is closed or the
        # current txn is not OPEN, so every record then goes to _write_slow, which says why it is refused.
        self._pending = new_record_buffer(self._write_slow)
        self.__dict__["write"] = self._pending.append
        self._txn_records = 0  # records handed to this txn so far (parsed or pending)
        self._txn_touched: dict[str, Destination] = {}
        self._destinations: dict[tuple[str, ...], Destination] = {}
        self._all_touched: dict[str, Destination] = {}
        self._heartbeater: Heartbeater | None = None
        self._static_dest = self._resolve_static_destination()
        # Hive's per-txn lock: shared read on the static partition (or the table), agent info attached
        self._lock_component = LockComponent(
            type=LockType.SHARED_READ,
            level=LockLevel.PARTITION if self._static_dest.name else LockLevel.TABLE,
            db=table.db,
            table=table.name,
            partition=self._static_dest.name or None,
            operation=OperationType.INSERT,
            is_dynamic_partition_write=self.dynamic,
        )

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
        return sorted(n for n in self._all_touched if n)

    def stats(self) -> dict[str, int]:
        snap = self._stats.snapshot()
        batch = self._batch
        snap["auto_flushes"] += batch.files.auto_flushes if batch is not None else 0
        return snap

    def to_transaction_string(self) -> str:
        batch = self._batch
        if batch is None:
            return f"TxnStatus[] on {self.table.full_name}"
        pairs = ",".join(f"{t}/{w}" for t, w in zip(batch.txn_ids, batch.write_ids, strict=True))
        codes = "".join(s.code for s in batch.states)
        last = f"txnid:{batch.txn_id}" if batch.index >= 0 else "none"
        return f"TxnId/WriteIds=[{pairs}] on table {self.table.full_name} TxnStatus[{codes}] LastUsed {last}"

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
                batch = self._batch = self._open_batch()
            if batch.dead is not None:
                raise TransactionError(
                    f"Cannot begin next transaction on a closed streaming connection: {batch.dead}"
                ) from batch.dead
            batch.index += 1
            if self.is_managed:
                self._acquire_lock(batch)
            batch.states[batch.index] = TxnState.OPEN
            self._pending.clear()
            self._txn_records = 0
            self._txn_touched = {}
            self._open_write_room()

    def write(self, record: bytes | str) -> None:
        """Buffer one record; parsing happens in bulk every ``parse_batch_records`` records (or
        ``parse_batch_bytes``) and at commit. (Each instance's ``write`` is its record buffer's append.)"""
        self._pending.append(record)

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
        pending = self._pending
        pending.add(data)
        if len(pending) >= self.config.parse_batch_records or pending.nbytes >= self.config.parse_batch_bytes:
            self._drain_pending()

    def _open_write_room(self) -> None:
        """write() takes records without a check up to one below the parse thresholds: the record that fills
        the buffer goes through _write_slow, which parses it."""
        self._pending.set_room(self.config.parse_batch_records - 1, self.config.parse_batch_bytes - 1)

    def write_stream(self, stream: BinaryIO, line_delimiter: str | None = None) -> None:
        """Write every record of a binary stream split on the record writer's delimiter pattern."""
        for chunk in split_records(stream, line_delimiter or self._line_pattern):
            self.write_record_array(chunk)

    def write_record_array(self, records: pa.Array) -> None:
        """Write records already split into one Arrow binary array (one bulk parse, no per-record Python)."""
        self._drain_pending()
        with self._lock, self._gil:
            batch = self._check_writable()
            first = self._txn_records
            self._txn_records += len(records)
            self._stats.bytes_written += record_bytes(records)
            with self._fatal_unless_bad_records(batch):
                self._accept(self.parser.parse_arrow(records, first_index=first))

    def write_batch(self, data: pa.Table | pa.RecordBatch | Any) -> None:
        """Beyond Hive: write an Arrow table/batch or a pandas DataFrame whose columns match the table's."""
        self._drain_pending()
        with self._lock, self._gil:
            txns = self._check_writable()
            batch = to_record_batch(data, self.parser.output_schema, first_index=self._txn_records)
            self._txn_records += batch.num_rows
            self._stats.bytes_written += batch.nbytes
            with self._fatal_unless_bad_records(txns):
                self._route(batch)

    def commit_transaction(
        self,
        partitions: Sequence[Sequence[str]] | None = None,
        key: str | None = None,
        value: str | None = None,
    ) -> None:
        """Commit the current txn; ``key``/``value`` is stored atomically with it (exactly-once sinks).

        ``partitions`` (lists of values) are created first and registered with this txn, as Hive 4 does.
        A :class:`SerializationError` found while parsing the last buffered records leaves the txn open; any
        other failure kills the batch (its txns are aborted) and every later call on it raises.
        """
        with self._lock, self._gil:
            batch = self._check_writable()
            self._drain_pending()
            try:
                if self.is_managed:
                    self._commit_managed(batch, partitions, key, value)
                else:
                    batch.files.flush()
                    batch.files.close()
                    batch.states[batch.index] = TxnState.PREPARED_FOR_COMMIT
            except StreamingException as exc:
                self._mark_dead(batch, exc)
                raise
            except Exception as exc:
                self._mark_dead(batch, exc)
                raise TransactionError(f"Unable to commit transaction txnid:{batch.txn_id}: {exc}") from exc
            self._pending.set_room(0, 0)

    def _commit_managed(
        self,
        batch: _Batch,
        partitions: Sequence[Sequence[str]] | None,
        key: str | None,
        value: str | None,
    ) -> None:
        ms = self._ms()
        for values in partitions or ():
            dest = self._destination(tuple(values))
            self._txn_touched.setdefault(dest.name, dest)
        batch.files.flush()
        txn = batch.txn_id
        try:
            touched = sorted(self._txn_touched)
            if batch.remaining == 0:
                batch.files.close()
            # replication: each file's new range and checksum, after the flush (or the batch's close)
            files = batch.files.written_files(touched) if self.config.write_notifications else {}
            write = TableWrite(
                self.table.full_name,
                batch.write_id,
                components=dict.fromkeys(touched, OperationType.INSERT) if self.dynamic else {},
                files={name or None: files.get(name, []) for name in touched} if files else {},
            )
            self._call(
                ms.commit_txn,
                txn,
                key=key,
                value=value,
                writes=[write] if write.components or write.files else (),
            )
        except NoSuchTxnException as exc:
            raise TransactionError(f"Invalid transaction id : {txn}") from exc
        except TxnAbortedException as exc:
            raise TransactionError(f"Aborted transaction cannot be committed: txnid:{txn}: {exc}") from exc
        batch.files.named(files)
        batch.states[batch.index] = TxnState.COMMITTED
        self._stats.committed_txns += 1

    def abort_transaction(self) -> None:
        """Abort the current txn: rows already written stay in the files but no snapshot ever shows them."""
        with self._lock, self._gil:
            batch = self._require_open_txn()
            self._pending.clear()
            self._pending.set_room(0, 0)
            if self.is_managed:
                try:
                    self._call(self._ms().abort_txn, batch.txn_id)
                except StreamingException as exc:
                    self._mark_dead(batch, exc)
                    raise
            batch.states[batch.index] = TxnState.ABORTED
            self._stats.aborted_txns += 1

    def close(self) -> None:
        """Abort every unused txn of the batch, close the files, stop heartbeats; idempotent, any thread."""
        if self._heartbeater is not None:
            self._heartbeater.stop()  # before taking the lock: a beat in progress may hold it
        with self._lock, self._gil:
            if self._closed:
                return
            self._closed = True
            self._pending.set_room(0, 0)
            errors: list[BaseException] = []
            if self._batch is not None:
                try:
                    self._close_batch(self._batch)
                except Exception as exc:
                    errors.append(exc)
            if self._dead_letter is not None:
                self._dead_letter.close()
            if self._owns_metastore and self.metastore is not None:
                self.metastore.close()
            if errors:
                raise errors[0]

    # --- internals: batches ---------------------------------------------------------------------------

    def _open_batch(self) -> _Batch:
        if not self.is_managed:
            if self._used_unmanaged:
                raise TransactionError(
                    "No more transactions available in the next batch: an unmanaged connection "
                    f"(write id {self.unmanaged_write_id}) has exactly one transaction"
                )
            self._used_unmanaged = True
            wid = int(self.unmanaged_write_id or 0)
            return _Batch([-1], [wid], self._new_files(wid, wid), [TxnState.INACTIVE])
        ms = self._ms()
        pairs, first_lock = self._call(
            ms.open_txns_with_write_ids_and_lock,
            self.batch_size,
            self.table.full_name,
            [self._lock_component],
            agent_info=self.agent_info,
        )
        txn_ids = [t for t, _ in pairs]
        write_ids = [w for _, w in pairs]
        try:
            files = self._new_files(write_ids[0], write_ids[-1])
        except Exception:
            self._call(ms.abort_txns, txn_ids)
            raise
        batch = _Batch(
            txn_ids,
            write_ids,
            files,
            [TxnState.INACTIVE] * len(txn_ids),
            lock_ids=[None] * len(txn_ids),
            first_lock=first_lock,
        )
        self._stats.batches_opened += 1
        self._start_heartbeats()
        return batch

    def _new_files(self, min_wid: int, max_wid: int) -> BatchFiles:
        return BatchFiles(
            self.fs,
            self.table.columns,
            min_write_id=min_wid,
            max_write_id=max_wid,
            statement_id=self.statement_id,
            options=self.writer_options,
            max_buffered_bytes=self.config.max_buffered_bytes,
        )

    def _close_batch(self, batch: _Batch) -> None:
        try:
            self._settle(batch)
        finally:
            self._stats.auto_flushes += batch.files.auto_flushes
            self._stats.files_written.update(batch.files.files)
            batch.files.auto_flushes = 0
            batch.files.close()

    def _settle(self, batch: _Batch) -> None:
        """Abort the batch's txns that are neither committed nor aborted, so that each txn's state here is the
        metastore's. When the metastore cannot be reached they stay as they are (it still says OPEN), and the
        abort is retried at the next heartbeat and at close."""
        unresolved = batch.unresolved_txns() if self.is_managed else []
        if unresolved and self.metastore is not None:
            try:
                self._call(self.metastore.abort_txns, unresolved)
            except MetastoreUnavailable:
                raise
            except MetaException:  # one was committed by a commit whose answer was lost, or cleaned away
                for t in unresolved:
                    state = self._call(self.metastore.get_txn_state, t)
                    if state.name == "OPEN":
                        self._call(self.metastore.abort_txns, [t])
                    batch.states[batch.txn_ids.index(t)] = (
                        TxnState.COMMITTED if state.name == "COMMITTED" else TxnState.ABORTED
                    )
                return
            self._stats.aborted_txns += len(unresolved)
        for i, state in enumerate(batch.states):
            if state in (TxnState.INACTIVE, TxnState.OPEN):
                batch.states[i] = TxnState.ABORTED

    def _mark_dead(self, batch: _Batch, cause: BaseException) -> None:
        """Any failure but a bad record kills the batch (Hive's ``markDead``): remaining txns are aborted."""
        if batch.dead is not None:
            return
        batch.dead = cause
        self._pending.set_room(0, 0)
        with contextlib.suppress(Exception):  # the original failure is what the caller needs to see
            self._close_batch(batch)

    def _acquire_lock(self, batch: _Batch) -> None:
        """The current txn's lock, which must be granted at once (the first txn's came with the batch)."""
        response = batch.first_lock if batch.index == 0 else None
        if response is None:
            txn = batch.txn_ids[batch.index]
            try:
                response = self._call(
                    self._ms().lock,
                    [self._lock_component],
                    txn_id=txn,
                    agent_info=self.agent_info,
                    wait=False,
                    timeout=0,
                )
            except LockTimeoutException as exc:
                self._mark_dead(batch, exc)
                raise TransactionError(f"Unable to acquire lock on {self.table.full_name}: {exc}") from exc
        if str(getattr(response.state, "name", response.state)).upper() != "ACQUIRED":
            exc2 = TransactionError(f"Unable to acquire lock on {self.table.full_name}: {response.state}")
            self._mark_dead(batch, exc2)
            raise exc2
        batch.lock_ids[batch.index] = response.lock_id

    def _start_heartbeats(self) -> None:
        if self._heartbeater is not None:
            return
        timeout = getattr(self.metastore, "txn_timeout", None)
        interval = self.config.heartbeat_interval or heartbeat_interval(timeout)
        self._heartbeater = Heartbeater(
            interval, self._heartbeat, f"acidstream-heartbeat-{self.table.full_name}"
        )
        self._heartbeater.start()

    def _heartbeat(self) -> None:
        with self._lock, self._gil:
            batch = self._batch
            if self._closed or batch is None or self.metastore is None:
                return
            if batch.dead is not None:
                self._settle(batch)  # txns the failure could not abort (the metastore was unreachable)
                return
            live = batch.unresolved_txns()
            if not live:
                return
            response = self._call(self.metastore.heartbeat_txn_range, min(live), max(live))
            aborted = [t for t in response.aborted if t in live]
            missing = [t for t in response.nosuch if t in live]
            if aborted or missing:
                self._mark_dead(batch, HeartBeatFailure(aborted, missing))

    # --- internals: records ---------------------------------------------------------------------------

    def _drain_pending(self) -> None:
        """Parse and route the buffered records."""
        if not self._pending:
            return
        with self._lock, self._gil:
            batch = self._check_writable()
            first = self._txn_records
            self._txn_records += len(self._pending)
            self._stats.bytes_written += self._pending.nbytes
            array = self._pending.take()
            with self._fatal_unless_bad_records(batch):
                self._accept(self.parser.parse_arrow(array, first_index=first))

    @contextmanager
    def _fatal_unless_bad_records(self, batch: _Batch) -> Iterator[None]:
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

    def _accept(self, result: ParseResult) -> None:
        """Route the good rows; dead-letter or raise the bad ones (the txn stays usable either way)."""
        self._route(result.batch)
        if not result.errors:
            return
        self._stats.records_rejected += len(result.errors)
        if self._dead_letter_path is not None:
            self._write_dead_letters(result.errors)
            return
        first = result.errors[0]
        if len(result.errors) > 1:
            first.args = (f"{first.args[0]} (and {len(result.errors) - 1} more bad records in this parse)",)
        raise first

    def _write_dead_letters(self, errors: list[SerializationError]) -> None:
        if self._dead_letter is None:
            assert self._dead_letter_path is not None
            self._dead_letter = open(self._dead_letter_path, "a", encoding="utf-8")  # noqa: SIM115
        batch = self._batch
        for err in errors:
            entry = {
                "table": self.table.full_name,
                "txn_id": batch.txn_id if batch is not None else None,
                "record_index": err.record_index,
                "field": err.field,
                "error": str(err),
                "record": err.record.decode("utf-8", "backslashreplace") if err.record is not None else None,
            }
            self._dead_letter.write(json.dumps(entry) + "\n")
        self._dead_letter.flush()

    def _route(self, batch_rows: pa.RecordBatch) -> None:
        batch = self._batch
        assert batch is not None
        for routed in self.router.route(batch_rows):
            dest = self._static_dest if not self.dynamic else self._destination(routed.partition_values)
            batch.files.insert(dest, routed.bucket_id, batch.write_id, routed.rows)
            self._txn_touched.setdefault(dest.name, dest)
            self._all_touched.setdefault(dest.name, dest)
        self._stats.records_written += batch_rows.num_rows

    def _destination(self, values: tuple[str, ...]) -> Destination:
        """Where a partition's files go, creating the partition on first use (race-safe in the metastore)."""
        dest = self._destinations.get(values)
        if dest is not None:
            return dest
        keys = [k.name for k in self.table.partition_keys]
        if len(values) != len(keys):
            raise InvalidPartition(str(values), f"expected {len(keys)} values for partition keys {keys}")
        if self.metastore is not None and self.is_managed:
            part = self._call(
                self.metastore.add_partition, self.table.full_name, list(values), if_not_exists=True
            )
            dest = Destination(values, part.name, table_filesystem(part.location)[1])
        else:
            dest = Destination(
                values, make_part_name(keys, list(values)), partition_path(self.table_dir, keys, values)
            )
        self._destinations[values] = dest
        return dest

    def _resolve_static_destination(self) -> Destination:
        if not self.table.partition_keys:
            return Destination((), "", self.table_dir)
        if self.static_values is None:
            return Destination((), "", self.table_dir)  # dynamic: never used for rows
        return self._destination(self.static_values)

    # --- internals: checks ----------------------------------------------------------------------------

    def _ms(self) -> Metastore:
        if self.metastore is None:
            raise ConnectionError("this connection has no metastore (unmanaged mode with a table object)")
        return self.metastore

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self._stats.metastore_calls += 1
        return fn(*args, **kwargs)

    def _check_not_closed(self) -> None:
        if self._closed:
            raise ConnectionError("Streaming connection is closed already.")

    def _require_open_txn(self) -> _Batch:
        self._check_not_closed()
        batch = self._batch
        if batch is None:
            raise TransactionError("Transaction batch is null. Missing beginTransaction?")
        if batch.state is not TxnState.OPEN:
            raise TransactionError("Transaction state is not OPEN. Missing beginTransaction?")
        return batch

    def _check_writable(self) -> _Batch:
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
        self._metastore: Metastore | str | None = None
        self._warehouse: str | None = None
        self._batch_size = 1
        self._optimizations = True
        self._writer: RecordWriter | None = None
        self._write_id: int | None = None
        self._statement_id: int | None = None
        self._table_object: Table | None = None
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
        self, metastore: Metastore | str, warehouse: str | None = None
    ) -> StreamingConnectionBuilder:
        """A :class:`Metastore` or its URL (then ``warehouse`` says where table files live)."""
        self._metastore = metastore
        self._warehouse = warehouse
        return self

    def with_transaction_batch_size(self, size: int) -> StreamingConnectionBuilder:
        if not 1 <= size <= MAX_BATCH_SIZE:
            raise ConnectionError(f"transaction batch size must be 1..{MAX_BATCH_SIZE}, got {size}")
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

    def with_table_object(self, table: Table) -> StreamingConnectionBuilder:
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
            raise ConnectionError("record writer cannot be null")
        config = StreamingConfig.from_mapping(self._config)
        raise_open_file_limit()
        ms, owns = self._open_metastore()
        try:
            table = self._resolve_table(ms)
            self._validate(table)
            fs, table_dir = table_filesystem(table.location)
            if self._batch_size > 1 and type(fs).__name__ in OBJECT_STORE_FILESYSTEMS:
                raise ConnectionError(
                    "The backing filesystem only supports transaction batch sizes of 1, "
                    f"but {self._batch_size} was requested."
                )
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
            )
        except BaseException:
            if owns and ms is not None:
                ms.close()
            raise

    def _open_metastore(self) -> tuple[Metastore | None, bool]:
        if isinstance(self._metastore, str):
            if self._warehouse is None:
                raise ConnectionError("with_metastore(url) needs warehouse=... (where the table files live)")
            from acidstream.metastore import Metastore

            return Metastore.connect(self._metastore, warehouse=self._warehouse), True
        if self._metastore is None and self._table_object is None:
            raise ConnectionError("a metastore (object or URL) is required unless a table object is given")
        return self._metastore, False

    def _resolve_table(self, ms: Metastore | None) -> Table:
        if self._table_object is not None:
            if self._write_id is None:
                raise ConnectionError("with_table_object() is for unmanaged mode: give with_write_id() too")
            return self._table_object
        if self._db is None:
            raise ConnectionError("database cannot be null")
        if self._table is None:
            raise ConnectionError("table cannot be null")
        assert ms is not None
        try:
            return ms.table(f"{self._db}.{self._table}")
        except NoSuchObjectException as exc:
            raise InvalidTable(self._db, self._table, "table does not exist") from exc
        except MetaException as exc:
            raise ConnectionError(f"Unable to fetch table {self._db}.{self._table}: {exc}") from exc

    def _validate(self, table: Table) -> None:
        if not table.is_transactional:
            raise InvalidTable(table.db, table.name, f"{table.full_name} is not an Acid table")
        if self._static is not None and not table.partition_keys:
            raise ConnectionError(
                f"{table.full_name}: static partition values {self._static} "
                "specifies partitions for un-partitioned table"
            )
        if self._static is not None and len(self._static) != len(table.partition_keys):
            names = [k.name for k in table.partition_keys]
            raise InvalidPartition(str(self._static), f"table {table.full_name} is partitioned by {names}")
        if self._statement_id is not None and self._write_id is None:
            raise ConnectionError("with_statement_id() needs with_write_id() (unmanaged mode)")


def _default_agent_info() -> str:
    """Hive's default ``<user>:<host>:<thread>``."""
    user, host = client_identity()
    return f"{user}:{host}:{threading.current_thread().name}"
