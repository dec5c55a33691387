"""Dumps: the replication stream through a directory (Hive's REPL DUMP / REPL LOAD), for replicas that cannot
reach the source's metastore.

``dump(source, to)`` writes a bootstrap dump (``bootstrap-<event>``: the plan and every file it names) on first
use, ``dump(source, to, from_event=E)`` an incremental one (``events-<first>-<last>``: the events after ``E`` and
the byte ranges they name — a batch file's new range only, checked against the commit's CRC-32 at dump time; a
file whose range does not check out is dumped whole). ``_dump.json`` is written last: a dump without it is
incomplete and never loaded. ``load(target, dir)`` applies every complete dump under ``dir`` that follows the
replica's last event; a bootstrap dump newer than that replaces what the replica holds (``Loader.replace``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from acidstream.acid.checksum import crc32_of_chunks
from acidstream.errors import NoSuchObjectException, ReplicationError
from acidstream.metastore.models import NotificationEvent, TableDefinition, WrittenFile
from acidstream.repl.bootstrap import DEFAULT_OPEN_TXN_TIMEOUT, bootstrap_plan
from acidstream.repl.copy import LiveSource, source_filesystem
from acidstream.repl.loader import DEFAULT_POLICY, Loader, LoadResult
from acidstream.repl.plan import (
    BootstrapFile,
    BootstrapPlan,
    event_from_json,
    event_to_json,
    source_partition_dir,
    table_with_location,
)
from acidstream.repl.sync import DEFAULT_FOLLOWER_LEASE
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)

MANIFEST = "_dump.json"


@dataclass(frozen=True)
class DumpInfo:
    """A complete dump: where, what kind, and the events it covers (a bootstrap covers up to its event)."""

    path: str
    kind: str  # 'bootstrap' | 'incremental'
    first_event_id: int
    last_event_id: int
    bytes: int


def dump(
    source: MetastoreFacade,
    to: str,
    from_event: int | None = None,
    *,
    max_events: int | None = None,
    open_txn_timeout: float = DEFAULT_OPEN_TXN_TIMEOUT,
    copy_files: FileCopyJob | None = None,
    follower: str | None = None,
    follower_lease: float = DEFAULT_FOLLOWER_LEASE,
) -> DumpInfo:
    """Dump ``source`` under directory ``to`` (local path or URI): a bootstrap without ``from_event``, else the
    events after it (at most ``max_events``; none: nothing is written and the info's range is empty).
    ``copy_files`` copies a bootstrap's files (in parallel, e.g. :func:`acidstream.spark.repl.spark_file_copier`);
    by default this process copies them one by one.

    The replica the dumps feed is a follower of the source (``follower``, by default named after ``to``), as a
    ``sync`` replica is: from its first dump on, the source's cleaner keeps what the next dump copies, for
    ``follower_lease`` seconds of silence at most. A file gone all the same (cleaned before any dump, or after
    the lease ran out) is not an error: its partition's current files are dumped whole, and loaded instead.
    """
    fs, root = table_filesystem(to)
    fs.create_dir(root, recursive=True)
    live = LiveSource(source_filesystem(source.warehouse))
    name = follower or dump_follower_name(to)
    if from_event is None:
        with bootstrap_plan(source, open_txn_timeout=open_txn_timeout) as plan:
            source.repl_follower_progress(name, plan.event_id, follower_lease)
            path = f"{root}/bootstrap-{plan.event_id:012d}"
            blobs = {f.source_path: [f"data/{i}", 0, f.length] for i, f in enumerate(plan.files)}
            jobs = [(f.source_path, f"{path}/data/{i}", f.length) for i, f in enumerate(plan.files)]
            copied = (copy_files or _copy_here(live))(jobs)
            _write_json(fs, f"{path}/plan.json", {"plan": plan.to_json(), "blobs": blobs})
            info = DumpInfo(path, "bootstrap", plan.event_id, plan.event_id, copied)
    else:
        current = source.current_notification_event_id()
        if from_event > current:
            raise ReplicationError(
                f"--from {from_event} is beyond the source's last event {current}: that replica follows "
                "another source, or this source was recreated"
            )
        source.repl_follower_progress(name, from_event, follower_lease)  # the cleaner waits from here on
        events = source.notifications(from_event, max_events or 1_000_000_000)
        if not events:
            return DumpInfo("", "incremental", from_event + 1, from_event, 0)
        last = events[-1].event_id
        path = f"{root}/events-{from_event + 1:012d}-{last:012d}"
        writer = _EventBlobs(fs, path, live, source)
        lines = [json.dumps(writer.record(event), sort_keys=True) for event in events]
        _write_blob(fs, f"{path}/events.jsonl", iter([("\n".join(lines) + "\n").encode()]))
        info = DumpInfo(path, "incremental", from_event + 1, last, live.bytes_read)
    _write_json(
        fs,
        f"{path}/{MANIFEST}",
        {
            "kind": info.kind,
            "source": source.url,
            "source_warehouse": source.warehouse,
            "first_event_id": info.first_event_id,
            "last_event_id": info.last_event_id,
            "bytes": info.bytes,
        },
    )
    # the dump holds every byte its events need: the cleaner may go on up to its last event
    source.repl_follower_progress(name, info.last_event_id, follower_lease)
    return info


def dump_follower_name(to: str) -> str:
    """How a source knows the replica that dumps under ``to`` feed."""
    return f"dump:{to if '://' in to else os.path.abspath(to)}"


#: Copies files whole: (source path, destination path or URI, length) each; returns the bytes copied.
FileCopyJob = Callable[[Sequence[tuple[str, str, int]]], int]


def _copy_here(live: LiveSource) -> FileCopyJob:
    def run(jobs: Sequence[tuple[str, str, int]]) -> int:
        return sum(copy_prefix(live, source, destination, length) for source, destination, length in jobs)

    return run


def copy_prefix(live: LiveSource, source: str, destination: str, length: int) -> int:
    """Bytes ``[0, length)`` of ``source`` into a new file ``destination`` (both paths or URIs)."""
    fs, inner = table_filesystem(destination)
    _write_blob(fs, inner, live.read(source, 0, length))
    return length


class _EventBlobs:
    """An incremental dump's blobs: the byte ranges each event names; where a file an event names is gone from
    the source, the whole current files of its partition instead (listed once per dump)."""

    def __init__(self, fs: pafs.FileSystem, path: str, live: LiveSource, source: MetastoreFacade) -> None:
        self.fs, self.path, self.live, self.source = fs, path, live, source
        self._dumped_dirs: set[str] = set()

    def record(self, event: NotificationEvent) -> dict[str, Any]:
        """The event as a line of ``events.jsonl``: ``blobs`` (source path → [blob, first byte, end]), and for
        gone files ``gone`` (their paths) and ``current`` (partition directory → [[file, blob], ...])."""
        record = event_to_json(event)
        blobs: dict[str, list[Any]] = {}
        gone: list[str] = []
        current: dict[str, list[Any]] = {}
        for i, w in enumerate(self._named_files(event, gone)):
            try:
                blobs[w.path] = self._range(f"data/{event.event_id}-{i}", w)
            except FileNotFoundError:
                gone.append(w.path)
        for path in gone:
            self._dump_current(event, path, current)
        record["blobs"] = blobs
        if gone:
            record["gone"], record["current"] = gone, current
        return record

    def _named_files(self, event: NotificationEvent, gone: list[str]) -> list[WrittenFile]:
        message = event.message
        files: list[WrittenFile] = []
        if event.event_type == "ACID_WRITE":
            files = [WrittenFile.from_json(v) for v in message.get("written", ())]
            known = {w.path for w in files}
            for named in message.get(
                "files", ()
            ):  # named by path only (older writers): the file as it is now
                if named in known:
                    continue
                try:
                    size = self.live.size(named)
                    files.append(WrittenFile(named, size, crc32_of_chunks(self.live.read(named, 0, size))))
                except FileNotFoundError:
                    gone.append(named)
        elif event.event_type == "COMPACTED":
            location = message.get("location")
            for name, described in message.get("files", {}).items():
                for v in described:
                    w = WrittenFile.from_json(v)
                    files.append(WrittenFile(f"{location}/{name}/{w.path}", w.length, w.crc32))
        return files

    def _range(self, blob: str, w: WrittenFile) -> list[Any]:
        start = w.start
        value = crc32_of_chunks(self.live.read(w.path, start, w.length), w.start_crc32)
        if value != w.crc32:  # the range does not continue the recorded checksum: dump the file whole
            log.warning("dump: %s's new range fails its CRC-32 check: dumping the file whole", w.path)
            start = 0
        _write_blob(self.fs, f"{self.path}/{blob}", self.live.read(w.path, start, w.length))
        return [blob, start, w.length]

    def _dump_current(self, event: NotificationEvent, path: str, current: dict[str, list[Any]]) -> None:
        """Dump the current files of the partition ``path`` was in (what a load copies in its place)."""
        try:
            table = self.source.table(f"{event.db}.{event.table}")
        except NoSuchObjectException:
            return  # dropped since: the drop follows in the stream
        location, directory = source_partition_dir(path, len(table.partition_keys), event.partition)
        if directory in self._dumped_dirs:
            return  # dumped for an earlier event of this dump: it holds this file's rows too
        self._dumped_dirs.add(directory)
        log.warning(
            "dump: source file %s is gone (cleaned before this replica copied it): dumping %s's current files",
            path,
            directory,
        )
        listed = []
        for i, f in enumerate(self.live.current_files(table_with_location(table, location), directory)):
            blob = f"data/{event.event_id}-current-{i}"
            _write_blob(self.fs, f"{self.path}/{blob}", self.live.read(f.source_path, 0, f.length))
            listed.append([f.to_json(), [blob, 0, f.length]])
        current[directory] = listed


def _write_blob(fs: pafs.FileSystem, path: str, chunks: Iterator[bytes]) -> None:
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as out:
        for chunk in chunks:
            out.write(chunk)


def _write_json(fs: pafs.FileSystem, path: str, value: Any) -> None:
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(json.dumps(value, sort_keys=True).encode())


def _read_json(fs: pafs.FileSystem, path: str) -> Any:
    with fs.open_input_stream(path) as f:
        return json.loads(f.read())


class DumpSource:
    """Source bytes from a dump's blobs; a range the dump lacks is read from the source's files if they are
    reachable from here (a copy that must start over), else the load stops with ReplicationError."""

    def __init__(self, fs: pafs.FileSystem, path: str, source_warehouse: str | None) -> None:
        self.fs, self.path = fs, path
        self.blobs: dict[tuple[int | None, str], list[Any]] = {}
        self.gone: set[tuple[int, str]] = set()  # files gone from the source when the dump was made
        self.current: dict[tuple[int, str], list[tuple[BootstrapFile, list[Any]]]] = {}
        self._current_blobs: dict[tuple[int, str], list[Any]] = {}
        self._live = LiveSource(source_filesystem(source_warehouse) if source_warehouse else None)

    def add_event(self, record: dict[str, Any]) -> None:
        """Take an ``events.jsonl`` record's blobs, gone files and current listings (removing them from it)."""
        event_id = int(record["event_id"])
        for p, b in record.pop("blobs", {}).items():
            self.blobs[(event_id, p)] = b
        self.gone.update((event_id, p) for p in record.pop("gone", ()))
        for directory, listed in record.pop("current", {}).items():
            files = [(BootstrapFile.from_json(f), b) for f, b in listed]
            self.current[(event_id, directory)] = files
            self._current_blobs.update(((event_id, f.source_path), b) for f, b in files)

    def current_files(
        self, table: TableDefinition, directory: str, *, event_id: int | None = None
    ) -> list[BootstrapFile]:
        if event_id is not None and (event_id, directory) in self.current:
            return [f for f, _ in self.current[(event_id, directory)]]
        return self._live.current_files(table, directory)

    def _blob(self, path: str, start: int, end: int, event_id: int | None) -> list[Any] | None:
        candidates = [self.blobs.get((event_id, path)), self.blobs.get((None, path))]
        if event_id is not None:
            candidates.append(self._current_blobs.get((event_id, path)))
        return next((b for b in candidates if b is not None and b[1] <= start and end <= b[2]), None)

    def _gone(self, path: str, event_id: int | None) -> None:
        if event_id is not None and (event_id, path) in self.gone:
            raise FileNotFoundError(f"{path} (gone from the source when the dump {self.path} was made)")

    def read(self, path: str, start: int, end: int, *, event_id: int | None = None) -> Iterator[bytes]:
        found = self._blob(path, start, end, event_id)
        if found is not None:
            blob, first = found[0], found[1]
            return _blob_range(self.fs, f"{self.path}/{blob}", start - first, end - first)
        self._gone(path, event_id)
        try:
            fs, inner = table_filesystem(path) if "://" in path else (self._live.filesystem, path)
            if fs.get_file_info(inner).type != pafs.FileType.File:
                raise FileNotFoundError(path)
        except (OSError, ValueError) as exc:
            raise ReplicationError(
                f"the dump {self.path} lacks bytes [{start}, {end}) of {path} and the source file is not "
                f"reachable ({exc}): dump again from the replica's last event"
            ) from exc
        return self._live.read(path, start, end)

    def size(self, path: str, *, event_id: int | None = None) -> int:
        found = self.blobs.get((event_id, path)) or self.blobs.get((None, path))
        if found is not None:
            return int(found[2])
        self._gone(path, event_id)
        return self._live.size(path)


def _blob_range(fs: pafs.FileSystem, path: str, start: int, end: int) -> Iterator[bytes]:
    from acidstream.acid.checksum import read_range

    yield from read_range(fs, path, start, end)


def complete_dumps(fs: pafs.FileSystem, root: str) -> list[tuple[str, dict[str, Any]]]:
    """(path, manifest) of the complete dumps at ``root`` (itself a dump, or a directory of them), in order."""
    if fs.get_file_info(f"{root}/{MANIFEST}").type == pafs.FileType.File:
        return [(root, _read_json(fs, f"{root}/{MANIFEST}"))]
    found = []
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if (
            info.type == pafs.FileType.Directory
            and fs.get_file_info(f"{info.path}/{MANIFEST}").type == pafs.FileType.File
        ):
            found.append((info.path, _read_json(fs, f"{info.path}/{MANIFEST}")))
    return sorted(found, key=lambda d: (d[1]["first_event_id"], d[1]["kind"] != "bootstrap"))


def load(
    target: MetastoreFacade, directory: str, *, policy: str = DEFAULT_POLICY, cleaner_retention: float = 300.0
) -> LoadResult:
    """Apply the complete dumps in ``directory`` that the replica has not applied yet, in event order (a bootstrap
    dump after the replica's last event replaces its tables, see :meth:`Loader.replace`); then delete the inputs
    of replicated compactions and the replaced tables' directories that the replica's readers no longer need
    (see ``sync``)."""
    fs, root = table_filesystem(directory)
    dumps = complete_dumps(fs, root)
    if not dumps:
        raise ReplicationError(f"{directory} holds no complete dump (no {MANIFEST})")
    state = target.repl_state(policy)
    total = LoadResult(last_event_id=state.last_event_id if state is not None else 0)
    for path, manifest in dumps:
        source_bytes = DumpSource(fs, path, manifest.get("source_warehouse"))
        loader = Loader(target, source_bytes, policy=policy)
        state = target.repl_state(policy)
        last = state.last_event_id if state is not None else None
        if manifest["kind"] == "bootstrap":
            event = int(manifest["last_event_id"])
            if state is not None and last and event <= last:
                # a newer one than the replica's own would take it back; its own, and older ones, pass quietly
                if event > state.bootstrap_event_id:
                    log.warning(
                        "load: skipping bootstrap dump %s (event %d): the replica already replicates up to "
                        "event %d; load the incremental dumps after it, or bootstrap a new replica",
                        path,
                        event,
                        last,
                    )
                    total.skipped.append(path)
                continue
            content = _read_json(fs, f"{path}/plan.json")
            source_bytes.blobs = {(None, p): b for p, b in content["blobs"].items()}
            plan = BootstrapPlan.from_json(content["plan"])
            if last:  # a newer bootstrap: it replaces what it covers
                loader.replace(plan, total)
            else:
                loader.bootstrap(plan)
            total.bootstrapped = True
            total.last_event_id = int(manifest["last_event_id"])
            continue
        if last is not None and manifest["last_event_id"] <= last:
            continue
        with fs.open_input_stream(f"{path}/events.jsonl") as f:
            records = [json.loads(line) for line in f.read().decode().splitlines() if line]
        for record in records:
            source_bytes.add_event(record)
        result = loader.apply_events(str(manifest["source"]), [event_from_json(r) for r in records])
        total.events_applied += result.events_applied
        total.rebootstrapped += result.rebootstrapped
        total.last_event_id = result.last_event_id
    Loader(target, LiveSource(), policy=policy).clean(cleaner_retention)
    return total
