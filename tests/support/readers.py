"""Test helper for reader registrations: make one look silent without sleeping."""

from __future__ import annotations

from sqlalchemy import update

from acidstream.metastore import MetastoreFacade
from acidstream.metastore.sql import schema as s
from acidstream.metastore.sql.counters import now_ms


def age_reader(ms: MetastoreFacade, reader_id: int, seconds: float) -> None:
    """Pretend registration ``reader_id`` last heartbeated ``seconds`` ago."""
    sr = s.snapshot_readers.c
    ms.backend._write(
        lambda c: c.execute(
            update(s.snapshot_readers)
            .where(sr.sr_id == reader_id)
            .values(sr_last_heartbeat=now_ms() - int(seconds * 1000))
        )
    )
