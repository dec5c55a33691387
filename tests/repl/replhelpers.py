"""Comparing what readers see on a source and on its replica, event by event."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acidstream import StreamingConnection, StrictDelimitedInputWriter, repl
from acidstream.catalog import Metastore

View = list[tuple[Any, ...]]


def view(ms: Metastore, tables: list[str]) -> dict[str, View]:
    """Every row of each table with its ROW__ID, in a canonical order, at one snapshot."""
    snapshot = ms.snapshot()
    out = {}
    for name in tables:
        rows = ms.table(name).scan(with_row_id=True, snapshot=snapshot).to_arrow().to_pylist()
        out[name] = sorted((tuple(sorted(r.items(), key=lambda kv: kv[0])) for r in rows), key=repr)
    return out


@dataclass
class Timeline:
    """What a source reader saw after each step, with the last event id at that moment."""

    source: Metastore
    tables: list[str]
    points: list[tuple[int, dict[str, View]]] = field(default_factory=list)

    def record(self) -> None:
        self.points.append((self.source.current_notification_event_id(), view(self.source, self.tables)))

    def expected_at(self, event_id: int) -> dict[str, View]:
        """The view of the latest step whose events are all at or before ``event_id``."""
        seen = [v for e, v in self.points if e <= event_id]
        assert seen, f"no recorded point at or before event {event_id}"
        return seen[-1]

    def replay_checking(self, replica: Metastore) -> int:
        """Apply the source's events to ``replica`` one by one; after each, the replica's readers must see what
        the source's saw at that event. Returns the number of events applied."""
        applied = 0
        while True:
            result = repl.sync(self.source, replica, max_events=1)
            if result.events_applied == 0:
                return applied
            applied += 1
            got = view(replica, self.tables)
            want = self.expected_at(result.last_event_id)
            assert got == want, f"after event {result.last_event_id}"


def stream(ms: Metastore, table: str, batch: int = 1, **config: object) -> StreamingConnection:
    """A delimited-text streaming connection to ``db.table`` with transaction batches of ``batch``."""
    db, name = table.split(".")
    builder = (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database(db)
        .with_table(name)
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(batch)
    )
    if config:
        builder = builder.with_configuration(config)
    return builder.connect()
