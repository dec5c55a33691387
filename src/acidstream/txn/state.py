"""Client-side transaction states, with Hive's one-letter codes (``TxnStatus[CO]``): streaming batches and mutation
transactions share them."""

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
