"""The initiator: decide which tables and partitions need a compaction, and of which kind (Hive's ``Initiator``).

Candidates are the targets committed txns wrote since their last compaction and the targets with more than
``aborted_txn_threshold`` aborted txns. A candidate is skipped when its table is gone or marked
``NO_AUTO_COMPACTION``, when it is the table-level entry of a partitioned table, when a request for it is already
initiated or working, and (recorded as "did not initiate") when its last compactions failed. Otherwise
``determine_compaction_type`` looks at its files with the compactor's snapshot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from acidstream.acid.selection import AcidState, get_acid_state
from acidstream.compactor.config import CompactorConfig, no_auto_compaction
from acidstream.compactor.plan import is_enough_to_compact
from acidstream.errors import AcidStreamError, NoSuchObjectException, StorageUnavailable, reading_from
from acidstream.metastore.identity import client_identity
from acidstream.metastore.models import PotentialCompaction
from acidstream.storage import table_filesystem

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    """What the initiator did with one candidate: ``kind`` queued (request ``compaction_id``) or ``reason``."""

    db: str
    table: str
    partition: str | None
    kind: str | None
    reason: str
    compaction_id: int | None = None


def directory_sizes(fs: pafs.FileSystem, state: AcidState) -> tuple[int, int]:
    """(base size, delta size): the chosen base's files (or the original files) and the current deltas'
    top-level files, as Hive's ``sumDirSize``."""

    def size(path: str) -> int:
        return sum(i.size for i in fs.get_file_info(pafs.FileSelector(path)) if i.type == pafs.FileType.File)

    base = size(state.base.path) if state.base is not None else sum(f.length for f in state.original_files)
    return base, sum(size(d.path) for d in state.deltas)


def determine_compaction_type(
    state: AcidState, base_size: int, delta_size: int, config: CompactorConfig, *, insert_only: bool = False
) -> tuple[str | None, str]:
    """Hive's ``determineCompactionType``: (``"major"``/``"minor"``/None, why)."""
    no_base = base_size == 0 and delta_size > 0
    if not no_base:
        ratio = delta_size / base_size if base_size else 0.0
        multi_base = any(p.rsplit("/", 1)[-1].startswith("base_") for p in state.obsolete)
        if ratio > config.delta_pct_threshold:
            return "major", (
                f"delta size {delta_size} is more than {config.delta_pct_threshold:g} of base size {base_size}"
            )
        if delta_size == 0 and multi_base:
            return "major", "no delta, and bases the current one replaced are left to clean"
    deltas = len(state.deltas)
    if deltas <= config.delta_num_threshold:
        return None, f"{deltas} deltas, threshold {config.delta_num_threshold}"
    why = f"{deltas} deltas, more than {config.delta_num_threshold}"
    if insert_only or no_base:
        return "major", f"{why} and no base" if no_base else why
    return "minor", why


@dataclass
class Initiator:
    ms: MetastoreFacade
    config: CompactorConfig = field(default_factory=CompactorConfig)
    initiator_id: str = field(default_factory=lambda: f"{client_identity()[1]}-initiator")

    def run_once(self) -> list[Decision]:
        """One pass over the candidates; returns a decision for each. A store that does not answer ends the
        pass with :class:`StorageUnavailable` (nothing is recorded against the candidate)."""
        compactions = self.ms.show_compactions()
        current = {(c.db, c.table, c.partition) for c in compactions if c.state in ("initiated", "working")}
        cleaning = {
            (c.db, c.table, c.partition): c.id for c in compactions if c.state == "ready for cleaning"
        }
        decisions = []
        for candidate in self.ms.find_potential_compactions(self.config.aborted_txn_threshold):
            try:
                decisions.append(self._consider(candidate, current, cleaning))
            except StorageUnavailable:
                raise  # an outage, not this candidate's fault: the next pass considers it again
            except AcidStreamError as exc:
                log.exception("cannot decide whether to compact %s", candidate)
                message = f"{type(exc).__name__}: {exc}"
                try:
                    self.ms.record_compaction_not_initiated(
                        candidate.table_name, candidate.partition, message, initiator_id=self.initiator_id
                    )
                except AcidStreamError:
                    log.exception("cannot record that %s was not initiated", candidate)
                decisions.append(self._skip(candidate, message))
        return decisions

    def _skip(self, c: PotentialCompaction, reason: str) -> Decision:
        return Decision(c.db, c.table, c.partition, None, reason)

    def _consider(
        self,
        c: PotentialCompaction,
        current: set[tuple[str, str, str | None]],
        cleaning: dict[tuple[str, str, str | None], int],
    ) -> Decision:
        """``current``: targets with a request initiated or working; ``cleaning``: the request ready for
        cleaning of a target, if any."""
        try:
            table = self.ms.table(c.table_name)
        except NoSuchObjectException:
            return self._skip(c, "table no longer exists")
        if no_auto_compaction(table.properties):
            return self._skip(c, "NO_AUTO_COMPACTION is set")
        if table.is_partitioned and c.partition is None:
            return self._skip(c, "table-level entry of a partitioned table (dynamic partitioning)")
        if (c.db, c.table, c.partition) in current:
            return self._skip(c, "a compaction is already initiated or working")
        threshold = self.config.failed_compacts_threshold
        if self.ms.too_many_failed_compactions(
            c.table_name, c.partition, threshold, self.config.failed_retry_time
        ):
            reason = f"Compaction is not initiated since last {threshold} consecutive compactions failed"
            self.ms.record_compaction_not_initiated(
                c.table_name, c.partition, reason, initiator_id=self.initiator_id
            )
            return self._skip(c, reason)
        location = table.location
        if c.partition is not None:
            partition = next(
                (p for p in self.ms.list_partitions(c.table_name) if p.name == c.partition), None
            )
            if partition is None:
                return self._skip(c, "partition no longer exists")
            location = partition.location
        kind: str | None
        if c.too_many_aborts:
            kind, why = "major", f"more than {self.config.aborted_txn_threshold} aborted txns"
        else:
            fs, path = table_filesystem(location)
            write_ids = self.ms.get_valid_write_ids(c.table_name).for_compactor()
            with reading_from(location):
                if fs.get_file_info(path).type != pafs.FileType.Directory:
                    return self._skip(c, "no files")
                state = get_acid_state(fs, path, write_ids)
                base, deltas = directory_sizes(fs, state)
            kind, why = determine_compaction_type(
                state, base, deltas, self.config.for_table(table.properties)
            )
            pending = cleaning.get((c.db, c.table, c.partition))
            if kind is not None and pending is not None and not is_enough_to_compact(kind, state):
                # the request would only publish nothing for the cleaner, which compaction `pending` has asked
                # for already (the initiator sees its target again until it is cleaned)
                return self._skip(c, f"nothing to compact; compaction {pending} is ready for cleaning")
        if kind is None:
            return self._skip(c, why)
        cq = self.ms.compact(c.table_name, c.partition, kind, initiator_id=self.initiator_id)
        current.add((c.db, c.table, c.partition))
        log.info("requested %s compaction %d of %s: %s", kind, cq, c.table_name, why)
        return Decision(c.db, c.table, c.partition, kind, why, cq)
