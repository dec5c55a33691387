"""Who is calling: the user and host Hive's client records with txns and locks."""

from __future__ import annotations

import functools
import getpass
import socket


@functools.cache
def client_identity() -> tuple[str | None, str]:
    """(user, host) recorded with txns and locks when the caller names none, as Hive's client fills them in."""
    try:
        user: str | None = getpass.getuser()
    except (OSError, KeyError, ImportError):  # no login name (e.g. a container's unnamed uid)
        user = None
    return user, socket.gethostname()
