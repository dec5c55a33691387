"""Transaction states of a streaming connection, with Hive's one-letter codes (``TxnStatus[CO]``)."""

from __future__ import annotations

import enum


class TxnState(enum.Enum):
    INACTIVE = "I"
    OPEN = "O"
    COMMITTED = "C"
    ABORTED = "A"
    PREPARED_FOR_COMMIT = "P"

    @property
    def code(self) -> str:
        return self.value
