"""The database layer: every metastore transaction runs with a short switch interval (acidstream.gil)."""

from __future__ import annotations

import sys

import pytest

from acidstream.errors import NoSuchObjectException
from acidstream.gil import DEFAULT_SWITCH_INTERVAL
from acidstream.metastore import Metastore
from acidstream.metastore.engine import Database


def test_metastore_transactions_shorten_the_switch_interval_while_they_run(metastore_url: str) -> None:
    """Each statement releases the GIL; beside a busy Python thread each could wait 5 ms to get it back."""
    db = Database(metastore_url)
    try:
        before = sys.getswitchinterval()
        assert db.write(lambda _conn: sys.getswitchinterval()) == pytest.approx(DEFAULT_SWITCH_INTERVAL)
        assert db.read(lambda _conn: sys.getswitchinterval()) == pytest.approx(DEFAULT_SWITCH_INTERVAL)
        assert sys.getswitchinterval() == before
    finally:
        db.dispose()


def test_a_failing_metastore_call_restores_the_switch_interval(ms: Metastore) -> None:
    before = sys.getswitchinterval()
    with pytest.raises(NoSuchObjectException, match=r"db\.no_such_table does not exist"):
        ms.table("db.no_such_table")
    assert sys.getswitchinterval() == before
