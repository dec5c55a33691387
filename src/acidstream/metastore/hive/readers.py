"""Snapshot readers on a Hive Metastore: each holds an open read-only txn, as Hive's own queries do.

Hive's metastore has no reader registrations; its cleaner instead keeps every file that a txn opened before a
compaction's commit may read (it waits for the lowest open txn to pass the compaction's). A scan that opens a
txn before it takes its snapshot, heartbeats it while it reads and commits it when done is therefore protected
exactly as a registered reader of acidstream's own metastore.

Hive lists open txns without their agent info, so only the client that registered a reader knows its table and
tag: :meth:`HiveReaderTxns.active_readers` and :meth:`HiveReaderTxns.unregister_readers` see this client's
readers; another process's end when it ends them or, if it died, after the metastore's txn timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hive_metastore import ttypes

from acidstream.errors import NoSuchTxnException, TxnAbortedException
from acidstream.metastore.hive.host import HiveHost
from acidstream.metastore.models import ReaderRegistration
from acidstream.metastore.names import split_name

if TYPE_CHECKING:
    from acidstream.acid.writeids import ValidTxnList

#: The agent info of a reader's txn (``SHOW TRANSACTIONS`` in Hive's own tools): ``acidstream-reader <db.table>``.
READER_AGENT = "acidstream-reader"


class HiveReaderTxns(HiveHost):
    """Reader registrations of the Hive backend (mixed into
    :class:`~acidstream.metastore.hive.client.HiveMetastoreClient`): a registration is a read-only txn."""

    #: txn id → (db, table, agent info given) of the readers this client registered
    _readers: dict[int, tuple[str, str, str]]

    @property
    def reader_lease(self) -> float:
        """A reader's txn lives as long as any txn without a heartbeat: the metastore's txn timeout."""
        return self.txn_timeout

    def register_reader(
        self, table_name: str, agent_info: str | None = None, *, snapshot: ValidTxnList | None = None
    ) -> ReaderRegistration:
        """Open the reader's txn, then take the snapshot (or the table's at ``snapshot``): the cleaner keeps
        what it reads until :meth:`unregister_reader`."""
        db, name = split_name(table_name)
        (txn_id,) = self.open_txns(1, agent_info=f"{READER_AGENT} {db}.{name}")
        self._readers[txn_id] = (db, name, agent_info or "")
        try:
            at = snapshot if snapshot is not None else self.snapshot()
            return ReaderRegistration(txn_id, self.get_valid_write_ids(f"{db}.{name}", snapshot=at), at)
        except BaseException:
            self.unregister_reader(txn_id)
            raise

    def heartbeat_readers(self, reader_ids: Sequence[int], *, lease: float | None = None) -> list[int]:
        """Heartbeat each reader's txn (the metastore's timeout applies, whatever ``lease`` says); returns those
        the metastore no longer has open."""
        expired = []
        for txn_id in reader_ids:
            try:
                self._call("heartbeat", ttypes.HeartbeatRequest(txnid=txn_id))
            except (NoSuchTxnException, TxnAbortedException):  # timed out
                expired.append(txn_id)
        return expired

    def unregister_reader(self, reader_id: int) -> None:
        """Commit the reader's read-only txn (a txn the metastore already aborted needs nothing)."""
        with contextlib.suppress(NoSuchTxnException, TxnAbortedException):
            self._call("commit_txn", ttypes.CommitTxnRequest(txnid=reader_id), idempotent=False)
        self._readers.pop(reader_id, None)

    def unregister_readers(self, agent_info: str) -> int:
        ended = [t for t in self._reader_txns() if t[3] == agent_info]
        for txn_id, *_ in ended:
            self.unregister_reader(txn_id)
        return len(ended)

    def active_readers(self, table_name: str | None = None) -> list[tuple[int, str, str]]:
        """(txn id, db, table) of the open reader txns, oldest first."""
        wanted = None if table_name is None else ".".join(split_name(table_name))
        return [
            (txn_id, db, name)
            for txn_id, db, name, _ in self._reader_txns()
            if wanted is None or f"{db}.{name}" == wanted
        ]

    def _reader_txns(self) -> list[tuple[int, str, str, str]]:
        """(txn id, db, table, agent info given) of this client's readers whose txns are still open."""
        open_txns = {t.txn_id for t in self.show_txns() if t.state.name == "OPEN"}
        return sorted((t, *reader) for t, reader in self._readers.items() if t in open_txns)
