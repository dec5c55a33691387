"""The ACID event schema and the user-metadata values Hive keeps per file (docs/format.md, Event files)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt
import pyarrow as pa

#: top-level field names of every full-ACID ORC file, in order (OrcRecordUpdater / SchemaEvolution)
EVENT_FIELDS = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")
META_FIELDS = EVENT_FIELDS[:5]
KEY_FIELDS = ("originalTransaction", "bucket", "rowId")

ACID_KEY_INDEX = "hive.acid.key.index"
ACID_STATS = "hive.acid.stats"
ACID_VERSION = "hive.acid.version"


class EventKind(IntEnum):
    """``operation`` codes (OrcRecordUpdater); split-update files only hold INSERT or DELETE."""

    INSERT = 0
    UPDATE = 1
    DELETE = 2


def event_schema(row_type: pa.StructType) -> pa.Schema:
    """The 6 event columns wrapping rows of ``row_type``; ``row`` is null for delete events."""
    return pa.schema(
        [
            pa.field("operation", pa.int32()),
            pa.field("originalTransaction", pa.int64()),
            pa.field("bucket", pa.int32()),
            pa.field("rowId", pa.int64()),
            pa.field("currentTransaction", pa.int64()),
            pa.field("row", row_type),
        ]
    )


RecordKey = tuple[int, int, int]


def unsorted_at(o: npt.NDArray[np.int64], b: npt.NDArray[np.int32], r: npt.NDArray[np.int64]) -> int:
    """Index of the first key followed by a smaller one in ``(originalTransaction, bucket, rowId)`` order,
    -1 when the keys are sorted (vectorised). Every batch a writer, a merge or a delete set takes is checked:
    comparisons only (no differences, no sign arrays: 25 times faster on a compactor's stripe of 250k events),
    and three passes for the many batches of one (originalTransaction, bucket)."""
    n = len(o)
    if n < 2:
        return -1
    if o[0] == o[-1] and b[0] == b[-1] and (o == o[0]).all() and (b == b[0]).all():
        down = r[1:] < r[:-1]
        return int(np.argmax(down)) if down.any() else -1
    o1, o0, r_down = o[1:], o[:-1], r[1:] < r[:-1]
    same = o1 == o0
    if b[0] == b[-1] and (b == b[0]).all():  # one bucket file's events: comparisons of o and r decide
        bad = (o1 < o0) | (same & r_down)
    else:
        b1, b0 = b[1:], b[:-1]
        bad = (o1 < o0) | (same & ((b1 < b0) | ((b1 == b0) & r_down)))
    return int(np.argmax(bad)) if bad.any() else -1


@dataclass(frozen=True)
class KeyIndex:
    """``hive.acid.key.index``: the last (originalTransaction, bucket, rowId) of each stripe."""

    entries: tuple[RecordKey, ...] = ()

    def encode(self) -> str:
        """Hive's text form: ``"2,536870912,1;3,536870912,1;"`` (a ``;`` after every entry)."""
        return "".join(f"{t},{b},{r};" for t, b, r in self.entries)

    @classmethod
    def parse(cls, text: str) -> KeyIndex:
        """Parse like ``OrcRawRecordMerger.parseKeyIndex``; raises ValueError on a malformed entry."""
        entries: list[RecordKey] = []
        for piece in text.split(";"):
            if not piece:
                continue
            parts = piece.split(",")
            if len(parts) != 3:
                raise ValueError(f"bad key index entry {piece!r}")
            entries.append((int(parts[0]), int(parts[1]), int(parts[2])))
        return cls(tuple(entries))


def format_acid_stats(inserts: int, updates: int, deletes: int) -> str:
    return f"{inserts},{updates},{deletes}"


def parse_acid_stats(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    if len(parts) != 3:
        raise ValueError(f"bad {ACID_STATS} value {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])
