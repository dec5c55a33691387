"""Hive Metastore delegation tokens for a Spark job's executors, which have no Kerberos tickets of their own.

When the job's Hive settings (``spark.acidstream.hive.*``) authenticate by Kerberos and its metastore
(``spark.acidstream.metastore``) is a Hive Metastore, the driver gets a delegation token from it (one per
metastore and settings, however often the data source is registered) and the job carries it to every worker
with its other settings (:class:`~acidstream.spark.options.JobSettings`, whose repr shows no value): there a
client connects with the token (SASL DIGEST-MD5) instead of Kerberos. The driver renews its tokens before they
expire while it runs (a long streaming query outlives a token's renew interval, a day by default), and cancels
them when it ends. ``spark.acidstream.hive.delegation_token`` set by the user is used as given, never cancelled.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

from acidstream.errors import AcidStreamError
from acidstream.metastore.location import is_hive

if TYPE_CHECKING:
    from acidstream.metastore.hive.client import HiveMetastoreClient
    from acidstream.metastore.hive.digest import DelegationToken

#: The Hive settings that make a client authenticate by Kerberos.
KERBEROS_SETTINGS = ("kerberos", "kerberos_principal", "kerberos_keytab")
#: A token is renewed once this share of the time to its expiry has passed.
RENEW_AT = 0.5

#: This driver's tokens and the clients that got them, by metastore URL and Hive settings.
_tokens: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[HiveMetastoreClient, DelegationToken]] = {}
_lock = threading.Lock()


def job_token(url: str | None, hive: tuple[tuple[str, Any], ...]) -> str | None:
    """A delegation token of this driver's for the job's workers (its string form), where the job's metastore
    ``url`` is a Hive Metastore its ``hive`` settings reach by Kerberos and name no token; else None."""
    settings = dict(hive)
    if not url or not is_hive(url) or "delegation_token" in settings:
        return None
    if not any(settings.get(k) for k in KERBEROS_SETTINGS):
        return None
    with _lock:
        if (url, hive) not in _tokens:
            from acidstream.metastore.hive.client import HiveMetastoreClient

            backend = HiveMetastoreClient.open(url, **settings)
            token = backend.get_delegation_token()
            if not _tokens:
                atexit.register(cancel_tokens)
            _tokens[url, hive] = backend, token
            threading.Thread(
                target=_renew, args=(backend, token), name="acidstream-token-renewal", daemon=True
            ).start()
        return _tokens[url, hive][1].text


def _renew(backend: HiveMetastoreClient, token: DelegationToken) -> None:
    """Renew ``token`` each time :data:`RENEW_AT` of the time to its expiry has passed, while it is this
    driver's; a failed renewal is tried again a minute later (the metastore may be restarting)."""
    expiry = time.time()
    with contextlib.suppress(AcidStreamError):
        expiry = backend.renew_delegation_token(token)
    while True:
        time.sleep(max(60.0, (expiry - time.time()) * RENEW_AT))
        with _lock:
            if all(held is not token for _, held in _tokens.values()):
                return
        with contextlib.suppress(AcidStreamError):
            expiry = backend.renew_delegation_token(token)


def cancel_tokens() -> None:
    """Cancel the tokens this driver got (at its exit: the job has ended); a metastore that cannot be reached
    then lets them expire."""
    with _lock:
        held = list(_tokens.values())
        _tokens.clear()
    for backend, token in held:
        with contextlib.suppress(AcidStreamError):
            backend.cancel_delegation_token(token)
        backend.close()
