"""A connection's records in: buffer → parse → route → the current transaction's files.

Records handed to ``write`` wait in a :class:`RecordBuffer` until a bulk parse (a full buffer, the commit);
parsed rows are routed to their (partition, bucket) and inserted under the current write id. Bad records are
raised as :class:`SerializationError` or go to the dead-letter sink; the transaction stays usable either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from acidstream.acid.tabular import to_record_batch
from acidstream.errors import InvalidPartition
from acidstream.metastore.models import TableDefinition
from acidstream.streaming.deadletter import DeadLetterSink
from acidstream.streaming.files import BatchFiles, Destination
from acidstream.streaming.records import ParseResult, RecordParser
from acidstream.streaming.records.buffer import Overflow, RecordBuffer, new_record_buffer
from acidstream.streaming.routing import RowRouter
from acidstream.streaming.stats import ConnectionStats
from acidstream.streaming.writers import RecordWriter

#: Where a partition's files go, given its values (creating it in the metastore where the txn is managed).
Locate = Callable[[tuple[str, ...]], Destination]


class RecordIngest:
    """Buffering, parsing and routing for one connection; the connection holds its lock around every call."""

    def __init__(
        self,
        table: TableDefinition,
        record_writer: RecordWriter,
        *,
        table_dir: str,
        static_values: tuple[str, ...] | None,
        locate: Locate,
        overflow: Overflow,
        room: tuple[int, int],
        stats: ConnectionStats,
        dead_letters: DeadLetterSink | None,
    ) -> None:
        self.table = table
        self.router = RowRouter(
            table.columns,
            table.bucket_columns,
            table.num_buckets,
            table.bucketing_version,
            static_values=static_values,
            num_partition_keys=len(table.partition_keys),
        )
        self.dynamic = self.router.dynamic  # partition values come with each record
        self.parser: RecordParser = record_writer.bind(
            table.columns, table.partition_keys, dynamic_partitioning=self.dynamic
        )
        #: The records handed to ``write`` and not parsed yet; its ``append`` is the connection's ``write``.
        self.buffer: RecordBuffer = new_record_buffer(overflow)
        self._room = room
        self._locate = locate
        self._stats = stats
        self.dead_letters = dead_letters
        self._destinations: dict[tuple[str, ...], Destination] = {}
        self.txn_touched: dict[str, Destination] = {}  # partitions the current txn wrote (by name)
        self.all_touched: dict[str, Destination] = {}  # ... and every txn of the connection
        self.records = 0  # records handed to this txn so far (parsed or pending)
        self._files: BatchFiles | None = None
        self._write_id = 0
        self._txn_id: int | None = None
        if static_values is not None and table.partition_keys:
            self.static_dest = self.destination(static_values)
        else:  # unpartitioned, or dynamic (never used for rows)
            self.static_dest = Destination((), "", table_dir)

    def start(self, files: BatchFiles, write_id: int, txn_id: int) -> None:
        """A new txn: rows go to ``files`` under ``write_id``; ``write`` takes records without a check up to one
        below the parse thresholds (the record that fills the buffer goes to the overflow, which parses it)."""
        self._files, self._write_id, self._txn_id = files, write_id, txn_id
        self.buffer.clear()
        self.records = 0
        self.txn_touched = {}
        self.buffer.set_room(self._room[0] - 1, self._room[1] - 1)

    def refuse(self) -> None:
        """Every later record goes to the overflow (which says why it is refused)."""
        self.buffer.set_room(0, 0)

    def add(self, data: bytes | bytearray | memoryview) -> bool:
        """Buffer one record from the overflow path; True when the buffer is due for a parse."""
        self.buffer.add(data)
        return len(self.buffer) >= self._room[0] or self.buffer.nbytes >= self._room[1]

    def take_pending(self) -> tuple[pa.Array, int]:
        """The buffered records and the txn index of the first."""
        first = self.count(len(self.buffer), self.buffer.nbytes)
        return self.buffer.take(), first

    def count(self, records: int, nbytes: int) -> int:
        """Account for records about to be parsed; the txn index of the first."""
        first = self.records
        self.records += records
        self._stats.bytes_written += nbytes
        return first

    def parse(self, records: pa.Array, first: int) -> None:
        """Parse records split into one Arrow binary array and route the good rows."""
        self.accept(self.parser.parse_arrow(records, first_index=first))

    def rows(self, data: pa.Table | pa.RecordBatch | Any) -> pa.RecordBatch:
        """Arrow or pandas rows as the table's batch, counted as this txn's records."""
        batch = to_record_batch(data, self.parser.output_schema, first_index=self.records)
        self.count(batch.num_rows, batch.nbytes)
        return batch

    def accept(self, result: ParseResult) -> None:
        """Route the good rows; dead-letter or raise the bad ones (the txn stays usable either way)."""
        self.route(result.batch)
        self._stats.records_short += result.short
        if not result.errors:
            return
        self._stats.records_rejected += len(result.errors)
        if self.dead_letters is not None:
            self.dead_letters.write(result.errors, self._txn_id)
            return
        first = result.errors[0]
        if len(result.errors) > 1:
            first.args = (f"{first.args[0]} (and {len(result.errors) - 1} more bad records in this parse)",)
        raise first

    def route(self, rows: pa.RecordBatch) -> None:
        files = self._files
        assert files is not None
        for routed in self.router.route(rows):
            dest = self.destination(routed.partition_values) if self.dynamic else self.static_dest
            files.insert(dest, routed.bucket_id, self._write_id, routed.rows, routed.nbytes)
            self.txn_touched.setdefault(dest.name, dest)
            self.all_touched.setdefault(dest.name, dest)
        self._stats.records_written += rows.num_rows

    def destination(self, values: tuple[str, ...]) -> Destination:
        """Where a partition's files go, located on first use."""
        dest = self._destinations.get(values)
        if dest is not None:
            return dest
        keys = [k.name for k in self.table.partition_keys]
        if len(values) != len(keys):
            raise InvalidPartition(str(values), f"expected {len(keys)} values for partition keys {keys}")
        dest = self._destinations[values] = self._locate(values)
        return dest

    def close(self) -> None:
        self.refuse()
        if self.dead_letters is not None:
            self.dead_letters.close()
