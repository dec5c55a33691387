"""The replica side: apply a bootstrap plan, then source events one by one (Hive's REPL LOAD).

Each event is applied in two steps: first its bytes are copied (data files, then side files), then its metastore
effect and its id are recorded in one DB transaction of the replica — the commit that makes rows visible comes
last. Killed anywhere, a loader re-applies from the first event not recorded: copies resume from the replica
files' physical lengths (no byte is appended twice) and every metastore operation tolerates its effect already
being there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from acidstream.acid.names import ParsedBase, ParsedDelta, parse_dir_name, without_visibility
from acidstream.acid.partitions import parse_part_name
from acidstream.acid.writeids import RangeResponse
from acidstream.errors import NoSuchObjectException, ReplicationError
from acidstream.metastore import replops as r
from acidstream.metastore.models import NotificationEvent, TableDefinition, WrittenFile
from acidstream.metastore.names import table_location
from acidstream.repl.copy import Copied, FileCopier, SourceBytes, crash_window
from acidstream.repl.plan import BootstrapPlan, relative_path, source_partition_dir, table_with_location
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)

DEFAULT_POLICY = "default"


@dataclass
class LoadResult:
    """What one load pass did."""

    events_applied: int = 0
    last_event_id: int = 0
    bootstrapped: bool = False
    rebootstrapped: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # tables a newer bootstrap copied afresh
    dropped: list[str] = field(default_factory=list)  # tables a newer bootstrap no longer has
    skipped: list[str] = field(default_factory=list)  # bootstrap dumps behind the replica's last event


class Loader:
    """Applies a source's replication stream to the replica metastore ``target`` and its warehouse."""

    def __init__(self, target: MetastoreFacade, source: SourceBytes, *, policy: str = DEFAULT_POLICY) -> None:
        self.target = target
        self.policy = policy
        self.copier = FileCopier(source)
        self._tables: dict[str, TableDefinition] = {}
        self._rebootstrapped: set[str] = set()  # partitions copied again from the source's current files

    @property
    def last_event_id(self) -> int | None:
        state = self.target.repl_state(self.policy)
        return None if state is None else state.last_event_id

    # --- bootstrap -----------------------------------------------------------------------------------------------

    def bootstrap(self, plan: BootstrapPlan) -> None:
        state = self.target.repl_state(self.policy)
        if state is not None and state.last_event_id > 0:  # 0: a bootstrap killed half-way, done again
            raise ReplicationError(
                f"the replica {self.target.url} already replicates (policy {self.policy!r}, last event "
                f"{self.last_event_id}): a bootstrap would mix two histories; load incremental dumps, or a "
                "newer bootstrap, instead"
            )
        catalog_ops = [
            op for op in plan.ops if isinstance(op, (r.CreateDatabase, r.CreateTable, r.AddPartition))
        ]
        self.target.repl_apply(self.policy, plan.source, 0, 0, catalog_ops, bootstrap=True)
        states = []
        for f in plan.files:
            table = self._table(f.db, f.table)
            fs, root = table_filesystem(table.location)
            target = f"{root.rstrip('/')}/{f.relative}"
            written = WrittenFile(f.source_path, f.length, 0, open=f.open)
            states.append(self._copy_whole(fs, target, written))
        ops = [op for op in plan.ops if op not in catalog_ops]
        ops.append(r.FileStates(tuple((c.path, c.length, c.crc32) for c in states)))
        self.target.repl_apply(self.policy, plan.source, plan.event_id, plan.event_time, ops, bootstrap=True)

    def replace(self, plan: BootstrapPlan, result: LoadResult) -> None:
        """Load a bootstrap newer than the replica's last event: its tables replace this policy's, this policy's
        tables it no longer has go, and this policy's replica txns it does not carry as open are aborted. The
        replica's local tables and other policies' stay; one named as a table of the dump is refused.

        Each table's files are copied first into a directory of its own (``<table>-<event id>``, emptied of
        what a killed attempt left), unseen by readers; then one DB transaction swaps the catalog over, moves
        the replication state to the plan's event and records the old directories for the replica's cleaning
        pass, which deletes them once no reader may still be scanning them (:meth:`clean`). A reader sees
        the old rows up to that commit and the new ones after it."""
        last = self.last_event_id or 0
        if plan.event_id <= last:
            raise ReplicationError(
                f"the bootstrap at event {plan.event_id} is not newer than the replica {self.target.url}'s last "
                f"event {last} (policy {self.policy!r})"
            )
        held = self._policies()
        wanted = {op.name for op in plan.ops if isinstance(op, r.CreateDatabase)}
        locations = {
            f"{op.db}.{op.name}": f"{table_location(self.target.warehouse, op.db, op.name)}-{plan.event_id:012d}"
            for op in plan.ops
            if isinstance(op, r.CreateTable)
        }
        if clash := [
            f"{db}.{name}"
            for db, tables in held.items()
            for name, policy in tables.items()
            if policy != self.policy and f"{db}.{name}" in locations
        ]:
            raise ReplicationError(
                f"the bootstrap at event {plan.event_id} carries {', '.join(clash)}, which the replica "
                f"{self.target.url} holds as tables replication policy {self.policy!r} did not create (local "
                "tables, or another policy's): nothing was loaded; rename or drop them on the replica first"
            )
        for location in locations.values():
            _delete(*table_filesystem(location))
        states = []
        for f in plan.files:
            fs, root = table_filesystem(locations[f"{f.db}.{f.table}"])
            written = WrittenFile(f.source_path, f.length, 0, open=f.open)
            states.append(self._copy_whole(fs, f"{root}/{f.relative}", written))
            crash_window()
        retire: list[r.ReplOp] = []
        for db, tables in held.items():
            for name in (name for name, p in tables.items() if p == self.policy):
                retire += [*self._forget_table(db, name), r.RetireTable(db, name, plan.event_id)]
                if f"{db}.{name}" not in locations:
                    result.dropped.append(f"{db}.{name}")
        # a database goes when the dump lacks it and it held only this policy's tables (an empty one may be
        # the replica's own: it stays)
        gone = [
            db
            for db, tables in held.items()
            if db not in wanted and tables and set(tables.values()) == {self.policy}
        ]
        ops: list[r.ReplOp] = [
            r.AbortUncarried(plan.carried_open),
            *retire,
            *(r.DropDatabase(db) for db in gone),
            *(
                dataclasses.replace(op, location=locations[f"{op.db}.{op.name}"])
                if isinstance(op, r.CreateTable)
                else op
                for op in plan.ops
            ),
            r.FileStates(tuple((c.path, c.length, c.crc32) for c in states)),
        ]
        crash_window()
        self.target.repl_apply(self.policy, plan.source, plan.event_id, plan.event_time, ops, bootstrap=True)
        self._tables.clear()
        result.replaced += sorted(locations)

    def _policies(self) -> dict[str, dict[str, str | None]]:
        """Each database's tables with the policy whose replication created them (None: a local table)."""
        return {
            db: {
                name: self.target.table(f"{db}.{name}").properties.get(r.POLICY_PROPERTY)
                for name in self.target.list_tables(db)
            }
            for db in self.target.list_databases()
        }

    def _copy_whole(
        self, fs: pafs.FileSystem, target: str, written: WrittenFile, event_id: int | None = None
    ) -> Copied:
        """A file of the source's current state (no checksum recorded for it: copied as it is)."""
        return self.copier.copy_whole(fs, target, written, event_id=event_id, verify=False)

    # --- events --------------------------------------------------------------------------------------------------

    def apply_events(self, source: str, events: Iterable[NotificationEvent]) -> LoadResult:
        result = LoadResult()
        last = self.last_event_id
        if last is None:
            raise ReplicationError(
                f"the replica {self.target.url} has not been bootstrapped (policy {self.policy!r})"
            )
        result.last_event_id = last
        for event in events:
            if event.event_id <= last:
                continue
            if event.event_id != last + 1:
                raise ReplicationError(
                    f"event {event.event_id} does not follow the replica's last event {last}: events are missing"
                )
            self.apply(source, event, result)
            last = result.last_event_id = event.event_id
            result.events_applied += 1
        return result

    def apply(self, source: str, event: NotificationEvent, result: LoadResult | None = None) -> None:
        ops = self._effects(event, result)
        crash_window()
        self.target.repl_apply(self.policy, source, event.event_id, event.event_time, ops)

    def _effects(self, e: NotificationEvent, result: LoadResult | None) -> list[r.ReplOp]:
        """Copy the event's bytes; return its metastore operations (applied with the event's id)."""
        m = e.message
        kind = e.event_type
        if kind == "CREATE_DATABASE" and e.db:
            return [r.CreateDatabase(e.db)]
        if kind == "DROP_DATABASE" and e.db:
            try:
                tables = self.target.list_tables(e.db)
            except NoSuchObjectException:
                tables = []
            forget = [op for t in tables for op in self._forget_table(e.db, t)]
            return [*forget, r.DropDatabase(e.db)]
        if kind == "CREATE_TABLE" and e.db and e.table:
            return [
                r.CreateTable(
                    e.db,
                    e.table,
                    tuple((str(n), str(t)) for n, t in m["columns"]),
                    tuple((str(n), str(t)) for n, t in m.get("partition_keys", ())),
                    tuple(m.get("bucket_columns", ())),
                    int(m.get("num_buckets", 0)),
                    tuple(sorted(m.get("properties", {}).items())),
                )
            ]
        if kind == "DROP_TABLE" and e.db and e.table:
            return [*self._forget_table(e.db, e.table), r.DropTable(e.db, e.table)]
        if kind == "ALTER_TABLE" and e.db and e.table:
            self._tables.pop(f"{e.db}.{e.table}", None)
            columns = tuple((str(n), str(t)) for n, t in m.get("columns", ()))
            return [r.AlterTable(e.db, e.table, tuple(sorted(m.get("properties", {}).items())), columns)]
        if kind in ("ADD_PARTITION", "DROP_PARTITION") and e.db and e.table and e.partition:
            values = tuple(parse_part_name(e.partition).values())
            op = r.AddPartition if kind == "ADD_PARTITION" else r.DropPartition
            return [op(e.db, e.table, values)]
        if kind == "OPEN_TXN":
            return [r.OpenTxns(tuple(m["txn_ids"]))]
        if kind == "ALLOC_WRITE_ID" and e.db and e.table:
            return [r.AllocWriteIds(e.db, e.table, tuple((int(t), int(w)) for t, w in m["txn_to_write_id"]))]
        if kind == "COMMIT_TXN" and e.txn_id is not None:
            return [r.CommitTxn(e.txn_id)]
        if kind == "ABORT_TXN":
            return [r.AbortTxns(tuple(m["txn_ids"]))]
        if kind == "ACID_WRITE" and e.db and e.table:
            return self._acid_write(e, result)
        if kind == "COMPACTED" and e.db and e.table:
            return self._compacted(e, result)
        if kind == "CLEANED" and e.db and e.table:
            return self._cleaned(e)
        return []  # events a replica has nothing to do for

    def _forget_table(self, db: str, name: str) -> list[r.ReplOp]:
        """A dropped table's files leave ``repl_files`` (a table created again under its name starts afresh)."""
        self._tables.pop(f"{db}.{name}", None)
        try:
            location = self.target.table(f"{db}.{name}").location
        except NoSuchObjectException:
            return []
        return [r.FileStates(forget=(table_filesystem(location)[1].rstrip("/") + "/",))]

    def _table(self, db: str, name: str) -> TableDefinition:
        key = f"{db}.{name}"
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = self.target.table(key)
        return table

    def _partition_dir(self, table: TableDefinition, partition: str | None) -> tuple[pafs.FileSystem, str]:
        fs, root = table_filesystem(table.location)
        return fs, root.rstrip("/") + (f"/{partition}" if partition else "")

    def _acid_write(self, e: NotificationEvent, result: LoadResult | None) -> list[r.ReplOp]:
        assert e.db and e.table
        try:
            table = self._table(e.db, e.table)
        except NoSuchObjectException:
            return []  # dropped later on the source (the drop follows)
        fs, root = table_filesystem(table.location)
        depth = len(table.partition_keys) + 2
        states = []
        described = [WrittenFile.from_json(v) for v in e.message.get("written", ())]
        known = {w.path for w in described}
        for path in e.message.get(
            "files", ()
        ):  # named by path only (older writers): copied whole, as it is now
            if path not in known:
                try:
                    described.append(WrittenFile(path, self.copier.source.size(path, event_id=e.event_id), 0))
                except FileNotFoundError as exc:
                    return self._file_states(self._rebootstrap(table, e, path, exc, result))
        for written in described:
            target = f"{root.rstrip('/')}/{relative_path(written.path, depth)}"
            have = self.target.repl_file_state(target)
            try:
                if written.crc32 or written.path in known:
                    states.append(self.copier.copy(fs, target, written, have, event_id=e.event_id))
                else:
                    states.append(
                        self.copier.copy_whole(fs, target, written, event_id=e.event_id, verify=False)
                    )
            except FileNotFoundError as exc:
                states.extend(self._rebootstrap(table, e, written.path, exc, result))
                break
        return self._file_states(states)

    @staticmethod
    def _file_states(states: list[Copied]) -> list[r.ReplOp]:
        return [r.FileStates(tuple((c.path, c.length, c.crc32) for c in states))] if states else []

    def _rebootstrap(
        self,
        table: TableDefinition,
        e: NotificationEvent,
        path: str,
        exc: Exception,
        result: LoadResult | None,
    ) -> list[Copied]:
        """A source file is gone before this replica copied it (cleaned after a compaction while the follower was
        away): copy the partition's current files again. Rows stay invisible until their write ids commit here."""
        partition = e.partition
        where = table.full_name + (f"/{partition}" if partition else "")
        if where in self._rebootstrapped:
            return []  # its current files, copied already, hold what this file held
        self._rebootstrapped.add(where)
        log.warning(
            "replication: source file %s is gone (%s): it was cleaned before this replica copied it; "
            "bootstrapping %s again from the source's current files",
            path,
            exc,
            where,
        )
        if result is not None:
            result.rebootstrapped.append(where)
        source_location, source_dir = source_partition_dir(path, len(table.partition_keys), partition)
        source_table = table_with_location(table, source_location)
        fs, root = table_filesystem(table.location)
        copied = []
        for f in self.copier.source.current_files(source_table, source_dir, event_id=e.event_id):
            target = f"{root.rstrip('/')}/{f.relative}"
            if self.target.repl_file_state(target) is not None and not f.open:
                continue  # a closed file is never rewritten: the copy is complete
            current = WrittenFile(f.source_path, f.length, 0, open=f.open)
            copied.append(self._copy_whole(fs, target, current, e.event_id))
        return copied

    def _compacted(self, e: NotificationEvent, result: LoadResult | None) -> list[r.ReplOp]:
        """Copy the compaction's output directories into a hidden directory, then rename each into place —
        delete deltas first, then deltas, then the base, so that a reader listing meanwhile never finds an
        output that hides inputs whose deletes it does not carry yet. The inputs stay for the replica's own
        readers (see :meth:`clean`)."""
        assert e.db and e.table
        try:
            table = self._table(e.db, e.table)
        except NoSuchObjectException:
            return []
        m = e.message
        fs, directory = self._partition_dir(table, e.partition)
        source_dir = str(m.get("location") or "")
        tmp = f"{directory}/_tmp_repl_{e.event_id}"  # hidden; what a killed attempt left is redone
        with contextlib.suppress(FileNotFoundError):
            fs.delete_dir(tmp)
        states: list[Copied] = []
        outputs = sorted(m.get("outputs", ()), key=_publication_order)
        try:
            for name in outputs:
                # the source's compactor txn means nothing here: the output is visible once moved into place
                here = without_visibility(name)
                final = f"{directory}/{here}"
                described = [WrittenFile.from_json(v) for v in m.get("files", {}).get(name, ())]
                if fs.get_file_info(final).type == pafs.FileType.Directory:
                    states.extend(Copied(f"{final}/{w.path}", w.length, w.crc32) for w in described)
                    continue  # moved into place by an earlier attempt
                for w in described:
                    source = WrittenFile(f"{source_dir}/{name}/{w.path}", w.length, w.crc32)
                    try:
                        self.copier.copy_whole(fs, f"{tmp}/{here}/{w.path}", source, event_id=e.event_id)
                    except (
                        FileNotFoundError
                    ) as exc:  # cleaned after a later compaction: copy what is there now
                        gone = self._rebootstrap(table, e, source.path, exc, result)
                        return self._file_states(states + gone)
                fs.move(f"{tmp}/{here}", final)
                states.extend(Copied(f"{final}/{w.path}", w.length, w.crc32) for w in described)
        finally:
            with contextlib.suppress(FileNotFoundError):
                fs.delete_dir(tmp)
        meta = {
            "location": table.location.rstrip("/") + (f"/{e.partition}" if e.partition else ""),
            "inputs": [without_visibility(name) for name in m.get("inputs", ())],
            "outputs": [without_visibility(name) for name in outputs],
            "replicated": m.get("compaction_id"),
        }
        record = r.RecordCompaction(
            e.db, e.table, e.partition, str(m.get("kind", "major")), e.write_id, tuple(sorted(meta.items()))
        )
        return [*self._file_states(states), record]

    def _cleaned(self, e: NotificationEvent) -> list[r.ReplOp]:
        """What the source's cleaner deleted: directories of aborted writes go now (no reader reads them); a
        compaction's inputs wait for the replica's readers (:meth:`clean`)."""
        assert e.db and e.table
        try:
            table = self._table(e.db, e.table)
        except NoSuchObjectException:
            return []
        fs, directory = self._partition_dir(table, e.partition)
        write_ids = self.target.get_valid_write_ids(table.full_name)
        forget = []
        for name in e.message.get("removed", ()):
            target = f"{directory}/{without_visibility(name)}"
            forget.append(target + "/")
            parsed = parse_dir_name(name)
            if parsed is None or isinstance(parsed, ParsedBase):
                continue
            if (
                write_ids.is_write_id_range_aborted(parsed.min_write_id, parsed.max_write_id)
                is RangeResponse.ALL
            ):
                _delete(fs, target)
        return [r.FileStates(forget=tuple(forget))] if forget else []

    # --- the replica's cleaning ------------------------------------------------------------------------------------

    def clean(self, retention: float) -> list[str]:
        """Delete the inputs of replicated compactions that no replica reader can need any more (registered
        scans that started before the outputs arrived are waited for, unregistered readers get ``retention``
        seconds), as the compactor's cleaner does for the replica's own compactions. Returns what went."""
        removed_all = []
        for ci in self.target.find_ready_to_clean(retention):
            if ci.meta.get("replicated") is None or not self.target.claim_cleaning(ci.id):
                continue
            fs, directory = table_filesystem(str(ci.meta["location"]))
            removed = [name for name in ci.meta.get("inputs", ()) if _delete(fs, f"{directory}/{name}")]
            self.target.mark_cleaned(ci.id, (), removed)
            removed_all += [f"{ci.full_partition_name}/{name}" for name in removed]
        return removed_all


def _publication_order(name: str) -> tuple[int, str]:
    parsed = parse_dir_name(name)
    if isinstance(parsed, ParsedDelta):
        return (0 if parsed.is_delete else 1), name
    return 2, name


def _delete(fs: pafs.FileSystem, path: str) -> bool:
    """Remove a directory or file; False if it was not there."""
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            fs.delete_dir(path)
        elif info.type == pafs.FileType.File:
            fs.delete_file(path)
        else:
            return False
    except FileNotFoundError:
        return False
    return True
