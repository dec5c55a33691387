"""``TxnManager``: what a transaction needs of a metastore, as a protocol.

acidstream's own :class:`~acidstream.metastore.warehouse.Metastore` implements it; a Hive Metastore (thrift)
backend would implement the same calls to carry streaming and mutation transactions unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.metastore.models import (
    HeartbeatTxnRangeResponse,
    LockComponent,
    LockResponse,
    TableWrite,
)
from acidstream.metastore.models import TxnState as MetastoreTxnState


class TxnManager(Protocol):
    """Transactions, write ids, locks, heartbeats and snapshots (Hive's ``IMetaStoreClient`` txn calls)."""

    @property
    def txn_timeout(self) -> float: ...

    def open_txns(
        self, n: int = 1, *, user: str | None = None, host: str | None = None, agent_info: str | None = None
    ) -> list[int]: ...

    def allocate_table_write_ids(self, txn_ids: Sequence[int], table_name: str) -> list[tuple[int, int]]: ...

    def open_txns_with_write_ids(
        self,
        n: int,
        table_name: str,
        *,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> list[tuple[int, int]]: ...

    def lock(
        self,
        components: Sequence[LockComponent],
        *,
        txn_id: int | None = None,
        agent_info: str | None = None,
        user: str | None = None,
        host: str | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> LockResponse: ...

    def commit_txn(
        self,
        txn_id: int,
        *,
        key: str | None = None,
        value: str | None = None,
        writes: Sequence[TableWrite] = (),
    ) -> None: ...

    def abort_txns(self, txn_ids: Sequence[int]) -> None: ...

    def heartbeat_txn_range(self, lo: int, hi: int) -> HeartbeatTxnRangeResponse: ...

    def get_txn_state(self, txn_id: int) -> MetastoreTxnState: ...

    def snapshot(self) -> ValidTxnList: ...

    def get_valid_write_ids(
        self, table_name: str, txn_id: int | None = None, *, snapshot: ValidTxnList | None = None
    ) -> ValidWriteIdList: ...
