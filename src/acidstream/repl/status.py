"""Where a replica stands: last event applied, and its lag behind the source in events and seconds."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from acidstream.metastore.replops import ReplState
from acidstream.repl.loader import DEFAULT_POLICY

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade


@dataclass(frozen=True)
class ReplStatus(ReplState):
    """The replica's :class:`ReplState`; ``lag_events``/``lag_seconds`` are known when the source was given:
    events published but not applied, and the age of the oldest of them (0 when caught up)."""

    source_event_id: int | None = None
    lag_events: int | None = None
    lag_seconds: float | None = None


def status(
    target: MetastoreFacade, source: MetastoreFacade | None = None, *, policy: str = DEFAULT_POLICY
) -> ReplStatus | None:
    """The replica's state for ``policy`` (None if it never loaded anything), with its lag if ``source`` is given."""
    state = target.repl_state(policy)
    if state is None:
        return None
    out = ReplStatus(**asdict(state))
    if source is None:
        return out
    current = source.current_notification_event_id()
    pending = source.notifications(state.last_event_id, 1) if current > state.last_event_id else []
    lag_seconds = max(0.0, time.time() - pending[0].event_time / 1000) if pending else 0.0
    return replace(
        out, source_event_id=current, lag_events=current - state.last_event_id, lag_seconds=lag_seconds
    )
