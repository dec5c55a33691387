"""Transaction batches: the txns a streaming connection writes through, one at a time.

A :class:`TransactionBatch` opens ``n`` txns with their write ids on one table (and the first txn's lock) in one
metastore call; each txn then begins, commits or aborts on its own. An :class:`UnmanagedTransaction` is one txn
owned elsewhere (a Spark driver) with a fixed write id: it never calls a metastore, and its "commit" means the
files are ready for the owner's commit. A streaming connection drives either through :class:`TxnBatch`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from acidstream.errors import (
    HeartBeatFailure,
    MetaException,
    NoSuchTxnException,
    TransactionError,
    TxnAbortedException,
)
from acidstream.metastore.models import (
    LockComponent,
    LockResponse,
    LockState,
    TableWrite,
    TxnStatus,
)
from acidstream.txn.manager import TxnManager
from acidstream.txn.state import TxnState
from acidstream.txn.transaction import acquire, commit_refusal, range_failures


class TxnBatch(Protocol):
    """What a streaming connection drives: consecutive txns, each begun, then committed or aborted."""

    txn_ids: list[int]
    write_ids: list[int]
    states: list[TxnState]
    index: int
    calls: int

    @property
    def remaining(self) -> int: ...

    @property
    def state(self) -> TxnState: ...

    @property
    def txn_id(self) -> int: ...

    @property
    def write_id(self) -> int: ...

    @property
    def dead(self) -> BaseException | None: ...

    def mark_dead(self, cause: BaseException) -> bool: ...

    def begin_next(self) -> None: ...

    def commit(self, writes: Sequence[TableWrite], key: str | None, value: str | None) -> None: ...

    def abort_current(self) -> None: ...

    def settle(self) -> int: ...

    def heartbeat(self) -> HeartBeatFailure | None: ...

    def describe(self) -> str: ...


class _Txns:
    """Ids, write ids and client-side states of consecutive txns; ``index`` is the current one (-1: none yet)."""

    def __init__(self, txn_ids: list[int], write_ids: list[int]) -> None:
        self.txn_ids = txn_ids
        self.write_ids = write_ids
        self.states = [TxnState.INACTIVE] * len(txn_ids)
        self.index = -1
        self.calls = 0  # metastore calls made so far (a connection's ``metastore_calls``)
        self._dead: BaseException | None = None

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

    @property
    def dead(self) -> BaseException | None:
        """Why no txn of the batch can begin or commit any more (Hive's ``markDead``), or None."""
        return self._dead

    def mark_dead(self, cause: BaseException) -> bool:
        """Record the first failure that killed the batch; False if it was dead already."""
        if self._dead is not None:
            return False
        self._dead = cause
        return True

    def unresolved_txns(self) -> list[int]:
        return [
            t
            for t, s in zip(self.txn_ids, self.states, strict=True)
            if s in (TxnState.INACTIVE, TxnState.OPEN)
        ]

    def describe(self) -> str:
        """Hive's ``TxnId/WriteIds=[...] TxnStatus[...] LastUsed ...`` (without the table)."""
        pairs = ",".join(f"{t}/{w}" for t, w in zip(self.txn_ids, self.write_ids, strict=True))
        codes = "".join(s.code for s in self.states)
        last = f"txnid:{self.txn_id}" if self.index >= 0 else "none"
        return f"TxnId/WriteIds=[{pairs}] TxnStatus[{codes}] LastUsed {last}"

    def _abandon_unresolved(self) -> None:
        for i, state in enumerate(self.states):
            if state in (TxnState.INACTIVE, TxnState.OPEN):
                self.states[i] = TxnState.ABORTED


class TransactionBatch(_Txns):
    """``n`` txns opened together on one table, each locking ``lock`` (no wait) when it begins."""

    def __init__(
        self,
        manager: TxnManager,
        pairs: Sequence[tuple[int, int]],
        lock: LockComponent,
        *,
        agent_info: str,
        first_lock: LockResponse | None = None,
    ) -> None:
        super().__init__([t for t, _ in pairs], [w for _, w in pairs])
        self.manager = manager
        self.calls = 1  # the open
        self.table_name = f"{lock.db}.{lock.table}"
        self.lock_component = lock
        self.agent_info = agent_info
        self._first_lock = first_lock  # requested with the batch's open, for its first txn

    @classmethod
    def open(
        cls, manager: TxnManager, size: int, table_name: str, lock: LockComponent, *, agent_info: str
    ) -> TransactionBatch:
        pairs, first_lock = manager.open_txns_with_write_ids_and_lock(
            size, table_name, [lock], agent_info=agent_info
        )
        return cls(manager, pairs, lock, agent_info=agent_info, first_lock=first_lock)

    def begin_next(self) -> None:
        """The next txn becomes current and OPEN once its lock is granted at once; a refused lock raises
        :class:`TransactionError` (the caller kills the batch)."""
        self.index += 1
        response = self._first_lock if self.index == 0 else None
        refused = f"Unable to acquire lock on {self.table_name}"
        if response is None:
            self.calls += 1
            acquire(
                self.manager,
                [self.lock_component],
                self.txn_id,
                self.agent_info,
                refused,
                wait=False,
                timeout=0,
                state_text=str,
            )
        elif response.state is not LockState.ACQUIRED:
            raise TransactionError(f"{refused}: {response.state}")
        self.states[self.index] = TxnState.OPEN

    def commit(self, writes: Sequence[TableWrite], key: str | None, value: str | None) -> None:
        """Commit the current txn with its writes (partitions, files) and ``key``/``value``."""
        txn = self.txn_id
        self.calls += 1
        try:
            self.manager.commit_txn(txn, key=key, value=value, writes=writes)
        except (NoSuchTxnException, TxnAbortedException) as exc:
            raise commit_refusal(txn, exc) from exc
        self.states[self.index] = TxnState.COMMITTED

    def abort_current(self) -> None:
        self.calls += 1
        self.manager.abort_txns([self.txn_id])
        self.states[self.index] = TxnState.ABORTED

    def settle(self) -> int:
        """Abort the txns that are neither committed nor aborted, so that each txn's state here is the
        metastore's; the number aborted. When the metastore cannot be reached they stay as they are (it still
        says OPEN), and the caller retries at the next heartbeat and at close."""
        unresolved = self.unresolved_txns()
        if not unresolved:
            return 0
        self.calls += 1
        try:
            self.manager.abort_txns(unresolved)
        except MetaException as exc:
            if exc.retryable:  # unreachable: stay as they are
                raise
            # one was committed by a commit whose answer was lost, or cleaned away
            for t in unresolved:
                self.calls += 1
                state = self.manager.get_txn_state(t)
                if state is TxnStatus.OPEN:
                    self.calls += 1
                    self.manager.abort_txns([t])
                self.states[self.txn_ids.index(t)] = (
                    TxnState.COMMITTED if state is TxnStatus.COMMITTED else TxnState.ABORTED
                )
            return 0
        self._abandon_unresolved()
        return len(unresolved)

    def heartbeat(self) -> HeartBeatFailure | None:
        """Keep the unresolved txns alive; the failure if the metastore aborted or lost any of them."""
        live = self.unresolved_txns()
        if not live:
            return None
        self.calls += 1
        aborted, missing = range_failures(self.manager, live)
        return HeartBeatFailure(aborted, missing) if aborted or missing else None


class UnmanagedTransaction(_Txns):
    """One txn owned elsewhere, written under a fixed write id (``txn_ids == [-1]``): no metastore calls; its
    commit leaves it PREPARED_FOR_COMMIT for the owner."""

    def __init__(self, write_id: int) -> None:
        super().__init__([-1], [write_id])

    @staticmethod
    def once(write_id: int) -> Callable[[], UnmanagedTransaction]:
        """A source of batches that yields one such transaction, then refuses: it has exactly one txn."""
        used = False

        def next_batch() -> UnmanagedTransaction:
            nonlocal used
            if used:
                raise TransactionError(
                    "No more transactions available in the next batch: an unmanaged connection "
                    f"(write id {write_id}) has exactly one transaction"
                )
            used = True
            return UnmanagedTransaction(write_id)

        return next_batch

    def begin_next(self) -> None:
        self.index += 1
        self.states[self.index] = TxnState.OPEN

    def commit(self, writes: Sequence[TableWrite], key: str | None, value: str | None) -> None:
        self.states[self.index] = TxnState.PREPARED_FOR_COMMIT

    def abort_current(self) -> None:
        self.states[self.index] = TxnState.ABORTED

    def settle(self) -> int:
        self._abandon_unresolved()
        return 0

    def heartbeat(self) -> HeartBeatFailure | None:
        return None
