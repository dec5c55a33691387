"""The cleaner: delete what a published compaction replaced, once no reader can still need it (Hive's ``Cleaner``).

A request is ready once the retention delay has passed since its publication (for readers that do not register)
and every scan registered before the publication has ended or expired (``Metastore.find_ready_to_clean``). The
cleaner then deletes the directories the compaction recorded as replaced, its leftover ``_tmp`` directory, and
the directories of aborted writes up to the compaction's highest write id; before deleting it checks that none of
them is still part of the table's current state. It also deletes the task attempts' directories (hidden, never
read: :mod:`acidstream.acid.attempts`) that a Spark job killed outright, or a losing attempt that outlived it,
left in the table's and the partition's directory, once the transaction they wrote for is over. Finally the aborted
write ids no remaining file can hold stop being snapshot exceptions (``mark_cleaned``).

Tables that no compaction is cleaning get the same for their writes' attempts from :meth:`Cleaner.sweep_attempts`
(the housekeeper's), as Hive's cleaner deletes aborted txns' directories of tables with no compaction: it looks
only where a write can have staged since the table's last compaction (the tables the metastore records a write or
an aborted txn of: the initiator's candidates), with one listing of each one's attempts directory.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from acidstream.acid.attempts import ATTEMPTS_DIR, attempt_over, remove_if_empty
from acidstream.acid.names import ParsedDelta, parse_dir_name
from acidstream.acid.selection import AcidState, get_acid_state
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.compactor.config import CompactorConfig
from acidstream.compactor.plan import top_level_names
from acidstream.compactor.publish import acid_dirs, discard
from acidstream.errors import (
    AcidFormatError,
    AcidStreamError,
    NoSuchObjectException,
    StorageUnavailable,
    reading_from,
)
from acidstream.metastore.models import CompactionInfo
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanOutcome:
    compaction_id: int
    state: str
    removed: tuple[str, ...] = ()
    forgotten_write_ids: tuple[int, ...] = ()
    error: str | None = None


@dataclass
class Cleaner:
    ms: MetastoreFacade
    config: CompactorConfig = field(default_factory=CompactorConfig)

    def run_once(self) -> list[CleanOutcome]:
        """Clean every request that is ready now (and that no other cleaner took meanwhile)."""
        return [
            self.clean(ci)
            for ci in self.ms.find_ready_to_clean(self.config.retention)
            if self.ms.claim_cleaning(ci.id)
        ]

    def sweep_attempts(self) -> list[str]:
        """Delete the write attempts' directories whose txn is over in every table written (or with an aborted
        txn) since its last compaction, one listing of its attempts directory each; the paths deleted. A table
        whose store does not answer waits for the next sweep."""
        removed: list[str] = []
        tables = sorted({c.table_name for c in self.ms.find_potential_compactions(0)})
        if not tables:
            return removed
        txns = self.ms.snapshot()
        for name in tables:
            try:
                location = self.ms.table(name).location
                with reading_from(location):
                    fs, path = table_filesystem(location)
                    write_ids = self.ms.get_valid_write_ids(name, snapshot=txns)
                    removed += _remove_ended_attempts(fs, path, write_ids, txns)
            except NoSuchObjectException:
                continue  # dropped with its files
            except (AcidStreamError, OSError) as exc:
                log.warning("sweeping the task attempts of %s waits: %s", name, exc)
        return removed

    def clean(self, ci: CompactionInfo) -> CleanOutcome:
        """Clean after ``ci``. When its store does not answer, the request stays ready for cleaning (the claim
        lapses, and a later pass cleans it once the store answers); any other failure marks it failed."""
        try:
            with reading_from(ci.meta.get("location") or ci.full_partition_name):
                removed, forgotten = self._clean(ci)
        except StorageUnavailable as exc:
            log.warning("cleaning after compaction %d waits for its store: %s", ci.id, exc)
            return CleanOutcome(ci.id, "ready for cleaning", error=str(exc))
        except (AcidStreamError, OSError) as exc:
            log.exception("cleaning after compaction %d of %s failed", ci.id, ci.full_partition_name)
            message = f"cleaning failed: {type(exc).__name__}: {exc}"
            with contextlib.suppress(AcidStreamError):
                self.ms.mark_failed(ci.id, message)
            return CleanOutcome(ci.id, "failed", error=message)
        self.ms.mark_cleaned(ci.id, forgotten, removed)
        return CleanOutcome(ci.id, "succeeded", tuple(removed), tuple(forgotten))

    def _clean(self, ci: CompactionInfo) -> tuple[list[str], list[int]]:
        location = ci.meta.get("location")
        try:
            table = self.ms.table(ci.table_name)
        except NoSuchObjectException:
            return [], []  # dropped with its files
        if not location:
            return [], []
        fs, path = table_filesystem(location)
        if fs.get_file_info(path).type != pafs.FileType.Directory:
            return [], []  # partition dropped
        discard(fs, ci.meta.get("tmp"))
        # With the txn list, a failed compaction's output written in place (``base_N_vT``, T aborted) that its
        # worker could not remove counts among the aborted directories, and goes with them.
        txns = self.ms.snapshot()
        write_ids = self.ms.get_valid_write_ids(ci.table_name, snapshot=txns)
        state = get_acid_state(fs, path, write_ids, txns)
        for directory in {table_filesystem(table.location)[1], path}:
            _remove_ended_attempts(fs, directory, write_ids, txns)
        highest = ci.highest_write_id if ci.highest_write_id is not None else -1
        doomed = set(ci.meta.get("inputs", ())) | {
            name for name in top_level_names(path, state.aborted) if _max_write_id(name) <= highest
        }
        _check_not_current(path, state, doomed)
        removed = []
        for name in sorted(doomed):
            target = f"{path}/{name}"
            info = fs.get_file_info(target)
            try:
                if info.type == pafs.FileType.Directory:
                    fs.delete_dir(target)
                elif info.type == pafs.FileType.File:
                    fs.delete_file(target)
                else:
                    continue
            except FileNotFoundError:
                continue  # another cleaner (of another request on this partition) got there first
            removed.append(name)
        return removed, _forgettable(fs, path, write_ids, highest, set(ci.meta.get("outputs", ())))


def _remove_ended_attempts(
    fs: pafs.FileSystem, directory: str, write_ids: ValidWriteIdList, txns: ValidTxnList
) -> list[str]:
    """Delete the attempt directories in ``directory``'s attempts directory whose txn is over (no committer
    will move their files any more), and that directory once empty; the paths deleted."""
    attempts = f"{directory}/{ATTEMPTS_DIR}"
    removed = []
    for info in fs.get_file_info(pafs.FileSelector(attempts, allow_not_found=True)):
        if attempt_over(info.base_name, write_ids, txns):
            log.info("removing %s: the transaction it wrote for is over", info.path)
            with contextlib.suppress(FileNotFoundError):
                fs.delete_dir(info.path)
                removed.append(info.path)
    remove_if_empty(fs, attempts)
    return removed


def _max_write_id(name: str) -> int:
    parsed = parse_dir_name(name)
    if parsed is None:
        return -1
    return parsed.max_write_id if isinstance(parsed, ParsedDelta) else parsed.write_id


def _check_not_current(path: str, state: AcidState, doomed: set[str]) -> None:
    """Never delete what the table's current snapshot reads: that would lose committed rows."""
    current = {d.name for d in state.deltas} | {f.path for f in state.original_files}
    if state.base is not None:
        current.add(state.base.name)
    live = doomed & set(top_level_names(path, [f"{path}/{n}" for n in current]))
    if live:
        raise AcidFormatError(
            f"{path}: refusing to delete {sorted(live)}: the current snapshot still reads them"
        )


def _forgettable(
    fs: pafs.FileSystem, path: str, write_ids: ValidWriteIdList, highest: int, outputs: set[str]
) -> list[int]:
    """Aborted write ids up to ``highest`` that no remaining delta of the partition covers (so no file holds
    their rows), below the lowest open write id (no open batch can still write them). The compaction's own
    ``outputs`` do not count: it dropped aborted rows."""
    candidates = [w for w in write_ids.aborted_ids if w <= highest and w < write_ids.min_open_write_id]
    if not candidates:
        return []
    ranges = [
        (parsed.min_write_id, parsed.max_write_id)
        for info, parsed in acid_dirs(fs, path)
        if isinstance(parsed, ParsedDelta) and info.base_name not in outputs
    ]
    return [w for w in candidates if not any(lo <= w <= hi for lo, hi in ranges)]
