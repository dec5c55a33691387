"""The dead-letter file: records that do not parse go here, one JSON line each, instead of raising."""

from __future__ import annotations

import json
from typing import IO

from acidstream.errors import SerializationError


class DeadLetterSink:
    """A JSON-lines file opened (for append) on the first bad record; each line names the table, txn, record
    index and field, with the error and the record itself."""

    def __init__(self, path: str, table_name: str) -> None:
        self.path = path
        self.table_name = table_name
        self._file: IO[str] | None = None

    def write(self, errors: list[SerializationError], txn_id: int | None) -> None:
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        for err in errors:
            entry = {
                "table": self.table_name,
                "txn_id": txn_id,
                "record_index": err.record_index,
                "field": err.field,
                "error": str(err),
                "record": err.record.decode("utf-8", "backslashreplace") if err.record is not None else None,
            }
            self._file.write(json.dumps(entry) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
