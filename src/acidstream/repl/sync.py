"""``sync``: bootstrap a replica if needed, then apply the source's events as they come (both sides live)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from acidstream.errors import reading_from
from acidstream.repl.bootstrap import DEFAULT_OPEN_TXN_TIMEOUT, bootstrap_plan
from acidstream.repl.copy import CopyStats, LiveSource, source_filesystem
from acidstream.repl.loader import DEFAULT_POLICY, Loader

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

log = logging.getLogger(__name__)

#: How long a silent follower holds the source's cleaner back (then it must bootstrap what was cleaned).
DEFAULT_FOLLOWER_LEASE = 24 * 3600.0
EVENTS_PER_PASS = 1000
#: Seconds a replicated compaction's inputs stay for replica readers that do not register (Hive's own).
DEFAULT_RETENTION = 300.0


@dataclass
class SyncResult:
    """What a sync did: events applied, whether it bootstrapped, bytes copied, partitions bootstrapped again."""

    events_applied: int = 0
    last_event_id: int = 0
    bootstrapped: bool = False
    stats: CopyStats = field(default_factory=CopyStats)
    rebootstrapped: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)  # replicated compactions' inputs deleted on the replica


def follower_name(target: MetastoreFacade, policy: str) -> str:
    """How a source knows this replica: its policy and metastore URL (without a password)."""
    return f"{policy}@{make_url(target.url).render_as_string(hide_password=True)}"


def sync(
    source: MetastoreFacade,
    target: MetastoreFacade,
    *,
    policy: str = DEFAULT_POLICY,
    follow: bool = False,
    poll_interval: float = 1.0,
    max_events: int | None = None,
    open_txn_timeout: float = DEFAULT_OPEN_TXN_TIMEOUT,
    follower_lease: float = DEFAULT_FOLLOWER_LEASE,
    cleaner_retention: float = DEFAULT_RETENTION,
    stop: threading.Event | None = None,
) -> SyncResult:
    """Bring ``target`` up to ``source``: bootstrap on first use, then every event published since.

    Without ``follow`` one catch-up pass (at most ``max_events`` events); with it, poll every ``poll_interval``
    seconds until ``stop`` is set. After each pass the source learns how far this replica got, so its cleaner
    keeps the files the replica may still copy (for ``follower_lease`` seconds of silence at most), and the
    replica deletes the inputs of compactions its readers no longer need (``cleaner_retention``: seconds kept
    for readers that do not register, as the compactor's ``retention``).

    A store that does not answer (either side's) is a :class:`StorageUnavailable`; the next sync goes on from
    the last event applied.
    """
    # either side's store failing is an outage (retryable), whichever of its clients saw it
    with reading_from(f"replication from {source.warehouse} to {target.warehouse}"):
        result = SyncResult()
        loader = Loader(target, LiveSource(source_filesystem(source.warehouse)), policy=policy)
        result.stats = loader.copier.stats
        name = follower_name(target, policy)
        last = loader.last_event_id
        if not last:
            with bootstrap_plan(source, open_txn_timeout=open_txn_timeout) as plan:
                source.repl_follower_progress(name, plan.event_id, follower_lease)
                loader.bootstrap(plan)
            result.bootstrapped = True
            last = plan.event_id
            log.info("replication: bootstrapped %s from %s at event %d", target.url, source.url, last)
        result.last_event_id = last
        while stop is None or not stop.is_set():
            limit = (
                EVENTS_PER_PASS
                if max_events is None
                else min(EVENTS_PER_PASS, max_events - result.events_applied)
            )
            events = source.notifications(last, limit) if limit > 0 else []
            if events:
                applied = loader.apply_events(source.url, events)
                result.events_applied += applied.events_applied
                result.rebootstrapped += applied.rebootstrapped
                last = result.last_event_id = applied.last_event_id
                source.repl_follower_progress(name, last, follower_lease)
                continue
            result.cleaned += loader.clean(cleaner_retention)
            if not follow or limit <= 0:
                break
            source.repl_follower_progress(name, last, follower_lease)
            if stop is not None:
                stop.wait(poll_interval)
            else:
                time.sleep(poll_interval)
    return result
