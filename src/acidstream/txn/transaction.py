"""``MetastoreTxn``: one metastore transaction, as streaming batches, mutations and Spark jobs use it.

It holds what a txn is on the client side — its id, a write id per table it writes, its locks, its state and
the snapshot it reads at — and maps the metastore's answers to the client's states and errors, so each user
of a transaction does not re-implement them. Heartbeats for any number of transactions come from one
:class:`TxnHeartbeat` thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import (
    AcidStreamError,
    HeartBeatFailure,
    LockTimeoutException,
    NoSuchTxnException,
    TransactionError,
    TxnAbortedException,
    WriteConflictException,
)
from acidstream.metastore.models import LockComponent, LockState, TableWrite, TxnStatus
from acidstream.txn.heartbeat import Heartbeater, heartbeat_interval
from acidstream.txn.manager import TxnManager
from acidstream.txn.state import TxnState

#: Called from the heartbeat thread when a txn was found aborted or missing: (txn id, the failure).
FailureListener = Callable[[int, BaseException], None]


def acquire(
    manager: TxnManager,
    components: Sequence[LockComponent],
    txn_id: int,
    agent_info: str | None,
    refused: str,
    *,
    wait: bool = True,
    timeout: float | None = None,
    state_text: Callable[[LockState], str] = lambda state: state.name,
) -> int:
    """Lock ``components`` for ``txn_id``; the lock id, or :class:`TransactionError` reading ``refused: why``
    when the lock timed out or was not granted (each caller keeps its own Hive wording)."""
    try:
        response = manager.lock(components, txn_id=txn_id, agent_info=agent_info, wait=wait, timeout=timeout)
    except LockTimeoutException as exc:
        raise TransactionError(f"{refused}: {exc}") from exc
    if response.state is not LockState.ACQUIRED:
        raise TransactionError(f"{refused}: {state_text(response.state)}")
    return response.lock_id


def commit_refusal(txn_id: int, exc: TxnAbortedException | NoSuchTxnException) -> TransactionError:
    """The client's error (Hive's words) when the metastore refuses to commit ``txn_id``: aborted or unknown."""
    if isinstance(exc, NoSuchTxnException):
        return TransactionError(f"Invalid transaction id : {txn_id}")
    return TransactionError(f"Aborted transaction cannot be committed: txnid:{txn_id}: {exc}")


def range_failures(manager: TxnManager, ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """Heartbeat ``ids`` in one call (Hive's ``heartbeatTxnRange``); those of them found aborted, and missing."""
    response = manager.heartbeat_txn_range(min(ids), max(ids))
    return [t for t in response.aborted if t in ids], [t for t in response.nosuch if t in ids]


class MetastoreTxn:
    """A txn opened in the metastore: INACTIVE until :meth:`begin`, then OPEN until committed or aborted.

    Not thread-safe, except that the heartbeat thread may :meth:`mark_dead` it at any time; a dead txn cannot be
    committed (its locks and its write ids may already belong to nobody).
    """

    def __init__(
        self,
        manager: TxnManager,
        txn_id: int,
        *,
        agent_info: str | None = None,
        write_ids: Mapping[str, int] | None = None,
    ) -> None:
        self.manager = manager
        self.txn_id = txn_id
        self.agent_info = agent_info
        self.state = TxnState.INACTIVE
        self._write_ids = {t.lower(): w for t, w in (write_ids or {}).items()}
        self._snapshot: ValidTxnList | None = None
        self._dead: BaseException | None = None
        self._guard = threading.Lock()

    @classmethod
    def open(
        cls, manager: TxnManager, tables: Sequence[str] = (), *, agent_info: str | None = None
    ) -> MetastoreTxn:
        """Open one txn and allocate its write id on each of ``tables``; nothing stays open if that fails.
        With one table both happen in one metastore round trip."""
        if len(tables) == 1:
            [(txn_id, write_id)] = manager.open_txns_with_write_ids(1, tables[0], agent_info=agent_info)
            return cls(manager, txn_id, agent_info=agent_info, write_ids={tables[0]: write_id})
        [txn_id] = manager.open_txns(1, agent_info=agent_info)
        txn = cls(manager, txn_id, agent_info=agent_info)
        try:
            for table in tables:
                txn.allocate_write_id(table)
        except BaseException:
            with contextlib.suppress(Exception):  # the allocation's failure is what the caller needs to see
                txn.abort()
            raise
        return txn

    def __repr__(self) -> str:
        return f"MetastoreTxn(txnid:{self.txn_id}, {self.state.name}, write ids {dict(self._write_ids)})"

    # --- write ids, locks, snapshot --------------------------------------------------------------------

    @property
    def write_ids(self) -> Mapping[str, int]:
        """Write id per table (``db.table``) allocated to this txn."""
        return MappingProxyType(self._write_ids)

    def write_id(self, table: str) -> int:
        try:
            return self._write_ids[table.lower()]
        except KeyError:
            raise TransactionError(f"txnid:{self.txn_id} has no write id on {table}") from None

    def allocate_write_id(self, table: str) -> int:
        """The txn's write id on ``table``, allocated on first request (idempotent, as in Hive)."""
        table = table.lower()
        if table not in self._write_ids:
            self._check_usable()
            [(_, write_id)] = self.manager.allocate_table_write_ids([self.txn_id], table)
            self._write_ids[table] = write_id
        return self._write_ids[table]

    def lock(
        self, components: Sequence[LockComponent], *, wait: bool = True, timeout: float | None = None
    ) -> int:
        """Acquire ``components`` for this txn (released by commit or abort); raises if not granted."""
        self._check_usable()
        return acquire(
            self.manager,
            components,
            self.txn_id,
            self.agent_info,
            f"Unable to acquire lock for txnid:{self.txn_id}",
            wait=wait,
            timeout=timeout,
        )

    def snapshot(self) -> ValidTxnList:
        """The point in time this txn reads at, taken on first use: it never sees its own writes, nor
        commits made after it."""
        if self._snapshot is None:
            self._snapshot = self.manager.snapshot()
        return self._snapshot

    def valid_write_ids(self, table: str) -> ValidWriteIdList:
        """``table``'s write-id list at this txn's snapshot."""
        return self.manager.get_valid_write_ids(table, snapshot=self.snapshot())

    # --- states ----------------------------------------------------------------------------------------

    def begin(self) -> None:
        """INACTIVE → OPEN: the caller took the locks it needs; writes may start."""
        self._check_usable()
        if self.state is not TxnState.INACTIVE:
            raise TransactionError(f"txnid:{self.txn_id} cannot begin: it is {self.state.name}")
        self.state = TxnState.OPEN

    @property
    def dead(self) -> BaseException | None:
        """Why the txn can no longer commit (a heartbeat found it aborted or gone), or None."""
        return self._dead

    def mark_dead(self, cause: BaseException) -> bool:
        """Record why the txn cannot commit; False if it had ended meanwhile (a commit or abort holds the guard
        across its metastore call, so a heartbeat racing with it sees the outcome)."""
        with self._guard:
            if self._dead is not None or self.state not in (TxnState.INACTIVE, TxnState.OPEN):
                return False
            self._dead = cause
            return True

    def commit(
        self, *, key: str | None = None, value: str | None = None, writes: Sequence[TableWrite] = ()
    ) -> None:
        """Commit; ``writes`` (partitions written and their operation, files) are recorded with it.

        A write conflict aborts the txn and raises :class:`WriteConflictException`; an aborted or unknown txn
        raises :class:`TransactionError`. When the metastore's answer is lost (connection gone mid-commit), the
        txn's state is asked again: committed means done, open raises the original (retryable) error.
        """
        with self._guard:
            self._commit(key, value, writes)

    def _commit(self, key: str | None, value: str | None, writes: Sequence[TableWrite]) -> None:
        if self.state is not TxnState.OPEN:
            raise TransactionError(f"txnid:{self.txn_id} cannot commit: it is {self.state.name}")
        self._check_usable()
        try:
            self.manager.commit_txn(self.txn_id, key=key, value=value, writes=writes)
        except WriteConflictException:
            self.state = TxnState.ABORTED
            raise
        except (TxnAbortedException, NoSuchTxnException) as exc:
            self.state = TxnState.ABORTED
            raise commit_refusal(self.txn_id, exc) from exc
        except AcidStreamError:
            if not self._settled_after_lost_answer():
                raise
        self.state = TxnState.COMMITTED

    def _settled_after_lost_answer(self) -> bool:
        """After a failed commit call: True if the commit happened anyway; marks an aborted txn ABORTED."""
        try:
            state = self.manager.get_txn_state(self.txn_id)
        except AcidStreamError:
            return False
        if state is TxnStatus.ABORTED:
            self.state = TxnState.ABORTED
        return state is TxnStatus.COMMITTED

    def abort(self) -> None:
        """Abort unless already ended; the rows it wrote stay on disk, invisible to every snapshot."""
        with self._guard:
            if self.state in (TxnState.ABORTED, TxnState.COMMITTED):
                return
            self.manager.abort_txns([self.txn_id])
            self.state = TxnState.ABORTED

    def _check_usable(self) -> None:
        if self._dead is not None:
            self.state = TxnState.ABORTED  # the metastore aborted it (or no longer knows it)
            raise TransactionError(f"txnid:{self.txn_id} is dead: {self._dead}") from self._dead


class TxnHeartbeat:
    """One thread keeping any number of transactions alive (Hive's ``heartbeatTxnRange``).

    ``transactions()`` names the txns to keep alive at each beat (those not yet committed or aborted are
    beaten). A txn found aborted (e.g. by the housekeeper's timeout) or missing is marked dead and reported to
    ``on_failure`` once, from the heartbeat thread.
    """

    def __init__(
        self,
        manager: TxnManager,
        transactions: Callable[[], Sequence[MetastoreTxn]],
        *,
        interval: float | None = None,
        on_failure: FailureListener | None = None,
        name: str = "acidstream-heartbeat",
    ) -> None:
        self.manager = manager
        self._transactions = transactions
        self._on_failure = on_failure
        self._thread = Heartbeater(interval or heartbeat_interval(manager.txn_timeout), self.beat, name)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._thread.stop()

    def beat(self) -> None:
        """One heartbeat now (the thread calls it every interval)."""
        live = [
            t
            for t in self._transactions()
            if t.state in (TxnState.INACTIVE, TxnState.OPEN) and t.dead is None
        ]
        if not live:
            return
        aborted_ids, missing_ids = range_failures(self.manager, [t.txn_id for t in live])
        aborted, missing = set(aborted_ids), set(missing_ids)
        for txn in live:
            if txn.txn_id in aborted or txn.txn_id in missing:
                failure = HeartBeatFailure(
                    [txn.txn_id] if txn.txn_id in aborted else [],
                    [txn.txn_id] if txn.txn_id in missing else [],
                )
                if txn.mark_dead(failure) and self._on_failure is not None:
                    self._on_failure(txn.txn_id, failure)
