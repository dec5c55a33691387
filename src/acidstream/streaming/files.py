"""The files of one transaction batch: one ORC event writer per (partition, bucket).

Hive's layout: all transactions of a batch go to the same ``delta_min_max[_stmt]/bucket_N`` file per
partition and bucket, kept open across commits and published through side files (docs/format.md, Side files).
Where a filesystem cannot publish an open file's prefix (object stores), each transaction writes its own
``delta_w_w`` instead, closed before its commit (docs/s3.md, Transaction batches). Buffered rows are bounded
per batch: past ``max_buffered_bytes`` every writer is flushed (Hive's auto-flush), which is safe because
readers filter rows by write id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from acidstream.acid.checksum import FilePrefix
from acidstream.acid.codec import BucketCodec
from acidstream.acid.names import ORC_ACID_VERSION_FILE, bucket_file, delta_dir, side_file_path
from acidstream.acid.orc import AcidWriter, WriterOptions, prepare_directory_once
from acidstream.acid.orc.sharded import encode_sharded
from acidstream.acid.types import Column
from acidstream.errors import StreamingIOFailure
from acidstream.metastore.models import WrittenFile
from acidstream.runtime import file_pool
from acidstream.storage import sync_files


@dataclass(frozen=True)
class Destination:
    """A partition (or the table itself): its values, Hive name ('' if unpartitioned) and directory."""

    values: tuple[str, ...]
    name: str
    location: str


class BatchFiles:
    """Lazily opened writers for one batch; ``flush`` publishes a readable prefix of every file."""

    def __init__(
        self,
        fs: pafs.FileSystem,
        columns: Sequence[Column],
        *,
        min_write_id: int,
        max_write_id: int,
        statement_id: int | None,
        options: WriterOptions,
        max_buffered_bytes: int,
        delta_per_txn: bool = False,
    ) -> None:
        self.fs = fs
        self.columns = tuple(columns)
        self.min_write_id = min_write_id
        self.max_write_id = max_write_id
        self.statement_id = statement_id
        self.options = options
        self.max_buffered_bytes = max_buffered_bytes
        #: each txn writes its own ``delta_w_w`` (see :meth:`begin`); its files are closed at its end
        self.delta_per_txn = delta_per_txn
        self._earlier_paths: list[str] = []  # files of the batch's earlier txns (per-txn deltas)
        self._writers: dict[tuple[str, int], AcidWriter] = {}
        self._paths: dict[tuple[str, int], str] = {}
        self._unflushed: set[tuple[str, int]] = set()  # files with rows inserted since the last flush
        self._unflushed_bytes = 0  # those rows' bytes
        self._ready_dirs: set[str] = set()  # delta directories made (with their version file) for this batch
        # A local file is made or closed in microseconds: inline (a hand-over to a pool thread costs more).
        # Elsewhere each is a round trip: in the file pool, overlapping the routing of the other rows, or each
        # other at close.
        self._io_pool = None if isinstance(fs, pafs.LocalFileSystem) else file_pool()
        self.auto_flushes = 0
        self.closed = False
        self._named: dict[str, tuple[FilePrefix, bool]] = {}  # per path: as the last commit named it, open
        self._synced: dict[str, int] = {}  # per path: the length the last sync made durable
        self._synced_dirs: set[str] = set()  # delta directories whose version file was synced

    def begin(self, write_id: int) -> None:
        """A txn of the batch starts. With per-txn deltas its rows go to a new ``delta_w_w`` through new
        writers (the previous txn's were closed at its commit or abort); in Hive's layout nothing changes."""
        if not self.delta_per_txn:
            return
        self._earlier_paths += self._paths.values()
        self._writers.clear()
        self._paths.clear()
        self._unflushed.clear()
        self._unflushed_bytes = 0
        self.min_write_id = self.max_write_id = write_id
        self.closed = False

    def end_txn(self, *, abort: bool, last: bool) -> None:
        """The current txn is about to commit (after its final flush) or was aborted: close what it alone
        wrote (per-txn deltas: a committed delta is then complete; an aborted one loses its files), or the
        batch's files after its last txn."""
        if self.delta_per_txn:
            self.close(abort=abort)
        elif last and not abort:
            self.close()

    @property
    def delta_name(self) -> str:
        return delta_dir(self.min_write_id, self.max_write_id, self.statement_id)

    def path_for(self, dest: Destination, bucket_id: int) -> str:
        return f"{dest.location}/{self.delta_name}/{bucket_file(bucket_id)}"

    def insert(
        self,
        dest: Destination,
        bucket_id: int,
        write_id: int,
        rows: pa.RecordBatch,
        nbytes: int | None = None,
    ) -> None:
        """Buffer ``rows`` (``nbytes`` bytes, if the caller knows) for (partition, bucket), opening its file
        on first use."""
        if nbytes is None:
            nbytes = rows.nbytes
        key = (dest.name, bucket_id)
        writer = self._writers.get(key)
        if writer is None:
            writer = self._open(dest, bucket_id)
        bucket_property = BucketCodec.V1.encode(bucket_id, self.statement_id if self.statement_id else 0)
        try:
            writer.insert(write_id, bucket_property, rows, nbytes=nbytes)
        except OSError as exc:
            raise StreamingIOFailure(f"writing {self._paths[key]}: {exc}") from exc
        size = nbytes
        if size:
            self._unflushed.add(key)
        self._unflushed_bytes += size
        if self._unflushed_bytes > self.max_buffered_bytes:
            self.flush()
            self.auto_flushes += 1

    def _open(self, dest: Destination, bucket_id: int) -> AcidWriter:
        """A writer for (partition, bucket); its directory is made once per batch, here."""
        path = self.path_for(dest, bucket_id)
        directory = path.rsplit("/", 1)[0]
        try:
            prepare_directory_once(self.fs, directory, self._ready_dirs)
        except OSError as exc:
            raise StreamingIOFailure(f"cannot create {directory}: {exc}") from exc
        writer = AcidWriter(
            self.fs,
            path,
            self.columns,
            options=self.options,
            side_file=self.min_write_id != self.max_write_id,
            create_in=self._io_pool,
            directory_ready=True,
        )
        key = (dest.name, bucket_id)
        self._writers[key] = writer
        self._paths[key] = path
        return writer

    def flush(self) -> None:
        """Intermediate footer (and side-file entry) on every file with new rows.

        The buffered rows are encoded side by side (:func:`encode_sharded`), then this thread stitches each
        encoded file in turn.
        """
        keys = [key for key in self._writers if key in self._unflushed]
        self._unflushed.clear()
        self._unflushed_bytes = 0
        taken = [(key, t) for key in keys if (t := self._writers[key].take_pending_events()) is not None]
        encoded = dict(
            zip(
                (key for key, _ in taken),
                encode_sharded([(self._writers[key], t) for key, t in taken]),
                strict=True,
            )
        )
        failures: list[tuple[tuple[str, int], Exception]] = []
        for key in keys:
            try:
                self._writers[key].flush_encoded([encoded[key]] if key in encoded else [])
            except (OSError, StreamingIOFailure) as exc:
                failures.append((key, exc))
        if failures:
            raise StreamingIOFailure(
                "flushing batch files failed: " + self._describe(failures)
            ) from failures[0][1]

    @property
    def files(self) -> list[str]:
        return [*self._earlier_paths, *self._paths.values()]

    # --- replication: what a commit names -------------------------------------------------------------

    def written_files(self, partitions: Sequence[str]) -> dict[str, list[WrittenFile]]:
        """The files of ``partitions`` (names) that changed since the last commit named them, each with the
        range a replica appends (after the flush, or the close that ends the batch): a commit costs no read.
        A file closed since then is named again (its replica's side file goes). Call :meth:`named` once the
        commit succeeded."""
        wanted = set(partitions)
        out: dict[str, list[WrittenFile]] = {}
        still_open = not self.closed and self.min_write_id != self.max_write_id
        for key, writer in self._writers.items():
            if key[0] not in wanted or writer.rows_written == 0:
                continue
            path, prefix = self._paths[key], writer.written_prefix
            before, was_open = self._named.get(path, (FilePrefix(0, 0), True))
            if prefix == before and was_open == still_open:
                continue
            out.setdefault(key[0], []).append(
                WrittenFile(path, prefix.length, prefix.crc32, before.length, before.crc32, still_open)
            )
        return out

    def sync(self, root: str) -> None:
        """fsync every file written since the last sync (a batch's open files with their side files), then
        the directories up to ``root`` (the table's directory) holding them: a commit must not name bytes a
        machine crash could still take back."""
        still_open = not self.closed and self.min_write_id != self.max_write_id
        paths: list[str] = []
        for writer in self._writers.values():
            length = writer.written_prefix.length
            if writer.rows_written == 0 or self._synced.get(writer.path) == length:
                continue
            self._synced[writer.path] = length
            paths += [writer.path, side_file_path(writer.path)] if still_open else [writer.path]
            directory = writer.path.rsplit("/", 1)[0]
            if directory not in self._synced_dirs:  # new this batch: its version file too
                self._synced_dirs.add(directory)
                paths.append(f"{directory}/{ORC_ACID_VERSION_FILE}")
        try:
            sync_files(self.fs, paths, root)
        except OSError as exc:
            raise StreamingIOFailure(f"fsync before the commit failed: {exc}") from exc

    def named(self, written: dict[str, list[WrittenFile]]) -> None:
        """The commit naming ``written`` succeeded: later commits name what changes after it."""
        for files in written.values():
            for f in files:
                self._named[f.path] = (FilePrefix(f.length, f.crc32), f.open)

    def close(self, *, abort: bool = False) -> None:
        """Final footers, side files deleted (Hive's ``close(false)``); idempotent. Every file is closed even
        when one fails."""
        if self.closed:
            return
        self.closed = True
        failures = _each(
            list(self._writers),
            lambda key: self._writers[key].abort_close() if abort else self._writers[key].close(),
            self._io_pool,
        )
        if failures:
            raise StreamingIOFailure("closing batch files failed: " + self._describe(failures)) from failures[
                0
            ][1]

    def _describe(self, failures: list[tuple[tuple[str, int], Exception]]) -> str:
        return "; ".join(f"{self._paths[key]}: {exc}" for key, exc in failures)


def _each(
    keys: list[tuple[str, int]], action: Callable[[tuple[str, int]], object], pool: Executor | None
) -> list[tuple[tuple[str, int], Exception]]:
    """Run ``action`` on every key (each writer in one thread at a time), in ``pool`` if given and there is
    more than one key; the I/O failures, per key."""

    def run(key: tuple[str, int]) -> Exception | None:
        try:
            action(key)
        except (OSError, StreamingIOFailure) as exc:
            return exc
        return None

    results = list(pool.map(run, keys)) if pool is not None and len(keys) > 1 else [run(k) for k in keys]
    return [(k, exc) for k, exc in zip(keys, results, strict=True) if exc is not None]
