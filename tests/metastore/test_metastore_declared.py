"""What a backend lacks, call by call, on every backend (SQLite, PostgreSQL, Hive 4's metastore): a call whose
capability the backend declares missing raises UnsupportedCapability naming the call and the fallback; a call it
declares present is never refused as unsupported (with the made-up ids here it may fail otherwise)."""

from __future__ import annotations

from typing import Any

import pytest

from acidstream.errors import AcidStreamError, UnsupportedCapability
from acidstream.metastore import MetastoreFacade
from acidstream.metastore.backend import Capability

NONE = 10**9  # an id no test has

CALLS: list[tuple[Capability, str, tuple[Any, ...]]] = [
    (Capability.COMPACTION_SERVICES, "find_ready_to_clean", (0,)),
    (Capability.COMPACTION_SERVICES, "find_abandoned_compactions", ()),
    (Capability.COMPACTION_SERVICES, "find_potential_compactions", (10,)),
    (Capability.COMPACTION_SERVICES, "purge_compaction_history", ()),
    (Capability.COMPACTION_SERVICES, "revert_compaction", (NONE, "worker died", 2)),
    (Capability.COMPACTION_SERVICES, "claim_cleaning", (NONE,)),
    (Capability.COMPACTION_SERVICES, "blocking_readers", (NONE,)),
    (Capability.COMPACTION_SERVICES, "mark_cleaned", (NONE,)),
    (Capability.COMPACTION_SERVICES, "too_many_failed_compactions", ("{db}.u", None, 2, 60.0)),
    (Capability.COMPACTION_SERVICES, "record_compaction_not_initiated", ("{db}.u", None, "skipped")),
    (Capability.NOTIFICATIONS, "notifications", (0,)),
    (Capability.NOTIFICATIONS, "current_notification_event_id", ()),
    (Capability.NOTIFICATIONS, "repl_followers", ()),
    (Capability.NOTIFICATIONS, "repl_write_id_txns", ("{db}.t", [1])),
    (Capability.NOTIFICATIONS, "repl_drop_follower", ("nobody",)),
    (Capability.REPLICA_STATE, "repl_states", ()),
    (Capability.REPLICA_STATE, "repl_file_state", ("/nowhere",)),
    (Capability.REPLICA_STATE, "repl_target_txns", ("policy", [1])),
    (Capability.TXN_REPLACEMENT, "replace_txn", (NONE, "{db}.t")),
]


@pytest.mark.parametrize(("capability", "call", "args"), CALLS, ids=[c for _, c, _ in CALLS])
def test_a_call_is_refused_exactly_when_its_capability_is_declared_missing(
    metastore: MetastoreFacade, db: str, capability: Capability, call: str, args: tuple[Any, ...]
) -> None:
    args = tuple(a.format(db=db) if isinstance(a, str) else a for a in args)
    if metastore.supports(capability):
        try:
            getattr(metastore, call)(*args)
        except AcidStreamError as exc:  # a made-up id may be refused, never as unsupported
            assert not isinstance(exc, UnsupportedCapability)
        return
    with pytest.raises(UnsupportedCapability, match=rf"^{call}: .* has no ") as refused:
        getattr(metastore, call)(*args)
    assert refused.value.capability == capability.name
