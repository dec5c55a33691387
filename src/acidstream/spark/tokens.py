"""Delegation tokens for a Spark job's executors, which have no Kerberos tickets of their own: the Hive
Metastore's and HDFS's.

When the job's Hive settings (``spark.acidstream.hive.*``, or the data source's options) authenticate by
Kerberos and its metastore is a Hive Metastore, the driver gets a delegation token from it (one per metastore and
settings, however often the data source is registered); when its HDFS settings reach a kerberized namenode
(``[hdfs] kerberos``, or ``hadoop.security.authentication = kerberos`` in the Hadoop configuration) and name no
token, it gets an HDFS delegation token (WebHDFS ``GETDELEGATIONTOKEN``) from the namenode of the job's
warehouse, or of the default filesystem where the tables' locations are a Hive Metastore's. The job carries them
to every worker with its other settings (:class:`~acidstream.spark.options.JobSettings`, whose repr shows no
value): there a client connects with the token (SASL DIGEST-MD5, ``delegation=``) instead of Kerberos. The
process that got a token renews it before it expires while it runs (a long streaming query outlives a token's
renew interval, a day by default), and cancels it when the job ends: the driver at its exit; a planner (a
Spark Python worker, whose end says nothing of the job's) through a process of its own that cancels the tokens
once the SparkSession has stopped or the driver has ended (:mod:`acidstream.spark.tokenwatch`). A token the user
set (``spark.acidstream.hive.delegation_token``, ``[hdfs] delegation_token``) is used as given, never cancelled.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acidstream.errors import AcidStreamError
from acidstream.metastore.location import is_hive

#: The Hive settings that make a client authenticate by Kerberos.
KERBEROS_SETTINGS = ("kerberos", "kerberos_principal", "kerberos_keytab")
#: A token is renewed once this share of the time to its expiry has passed.
RENEW_AT = 0.5
#: Seconds before a failed renewal is tried again (the server may be restarting).
RETRY_AFTER = 60.0


@dataclass(frozen=True, eq=False)
class _Token:
    """A token this process got: its string form, how to renew it (its new expiry, seconds since the epoch)
    and how to end it, here and (picklable, with settings only) in another process. Its repr shows no secret."""

    text: str = field(repr=False)
    renew: Callable[[], float] = field(repr=False)
    cancel: Callable[[], None] = field(repr=False)
    cancel_elsewhere: Callable[[], None] = field(repr=False)


#: This process's tokens, by what they are for: ("hive", metastore URL, Hive settings) or ("hdfs", location).
_tokens: dict[tuple[Any, ...], _Token] = {}
_lock = threading.Lock()


def job_token(url: str | None, hive: tuple[tuple[str, Any], ...]) -> str | None:
    """A Hive Metastore delegation token of this process's for the job's workers (its string form), where the
    job's metastore ``url`` is a Hive Metastore its ``hive`` settings reach by Kerberos and name no token; else
    None."""
    settings = dict(hive)
    if not url or not is_hive(url) or "delegation_token" in settings:
        return None
    if not any(settings.get(k) for k in KERBEROS_SETTINGS):
        return None

    def get() -> _Token:
        from acidstream.metastore.hive.client import HiveMetastoreClient

        backend = HiveMetastoreClient.open(url, **settings)
        token = backend.get_delegation_token()

        def cancel() -> None:
            try:
                backend.cancel_delegation_token(token)
            finally:
                backend.close()

        elsewhere = functools.partial(_cancel_hive, url, hive, token.text)
        return _Token(token.text, lambda: backend.renew_delegation_token(token), cancel, elsewhere)

    return _held(("hive", url, hive), get)


def _cancel_hive(url: str, hive: tuple[tuple[str, Any], ...], text: str) -> None:
    """Cancel Hive Metastore token ``text`` with a client of the settings that got it."""
    from acidstream.metastore.hive.client import HiveMetastoreClient
    from acidstream.metastore.hive.digest import DelegationToken

    backend = HiveMetastoreClient.open(url, **dict(hive))
    try:
        backend.cancel_delegation_token(DelegationToken(text))
    finally:
        backend.close()


def hdfs_job_token(warehouse: str | None, metastore: str | None) -> str | None:
    """An HDFS delegation token of this process's for the job's workers, where HDFS is reached by Kerberos
    with this process's HDFS settings and they name no token: from the namenode of ``warehouse`` when it is on
    HDFS, else, for a Hive ``metastore`` (whose tables' locations are its own), of the Hadoop configuration's
    default filesystem when that is HDFS; else None."""
    from acidstream.errors import StorageLocationError
    from acidstream.storage import current_stores, hdfs_client

    if warehouse and warehouse.startswith(("hdfs://", "webhdfs://")):
        location = warehouse
    elif metastore and is_hive(metastore):
        location = "hdfs:///"
    else:
        return None
    try:
        client = hdfs_client(location)
    except StorageLocationError:
        if location == "hdfs:///":
            return None  # no HDFS default filesystem: the tables are elsewhere
        raise
    if client.login is None:  # an open cluster, or a token given
        return None

    def get() -> _Token:
        text = client.get_delegation_token()
        return _Token(
            text,
            lambda: client.renew_delegation_token(text) / 1000,
            lambda: client.cancel_delegation_token(text),
            functools.partial(_cancel_hdfs, location, current_stores()["hdfs"], text),
        )

    return _held(("hdfs", client.url), get)


def _cancel_hdfs(location: str, settings: dict[str, Any], text: str) -> None:
    """Cancel HDFS token ``text`` on ``location``'s namenode, with the HDFS settings that got it."""
    from acidstream.storage import configure_stores, hdfs_client

    configure_stores(hdfs=settings)
    hdfs_client(location).cancel_delegation_token(text)


def _held(key: tuple[Any, ...], get: Callable[[], _Token]) -> str:
    """The token this process holds for ``key``, got (and renewed from then on) the first time."""
    with _lock:
        if key not in _tokens:
            token = get()
            if in_spark_worker():
                _watcher_of_this_worker(token)
            elif not _tokens:
                atexit.register(cancel_tokens)
            _tokens[key] = token
            threading.Thread(
                target=_renew, args=(token,), name="acidstream-token-renewal", daemon=True
            ).start()
        return _tokens[key].text


def in_spark_worker() -> bool:
    """Whether this process is one of Spark's Python workers (a planner's, a task's), which Spark started with
    the secret of its worker factory, rather than a driver."""
    return "PYTHON_WORKER_FACTORY_SECRET" in os.environ


_watcher: subprocess.Popen[bytes] | None = None


def _watcher_of_this_worker(token: _Token) -> None:
    """Hand ``token``'s cancellation to the process that cancels this worker's tokens once its parent (Spark's
    Python daemon, or the driver's JVM) has ended, started the first time (:mod:`acidstream.spark.tokenwatch`).
    Without it (it could not start, or died), the token expires unrenewed once this worker is gone."""
    global _watcher
    with contextlib.suppress(OSError, pickle.PicklingError):
        if _watcher is None or _watcher.poll() is not None:
            _watcher = subprocess.Popen(
                [sys.executable, "-m", "acidstream.spark.tokenwatch", str(os.getppid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Spark's SIGHUP to its workers' process group does not reach it
            )
        assert _watcher.stdin is not None
        pickle.dump(token.cancel_elsewhere, _watcher.stdin)
        _watcher.stdin.flush()


def _renew(token: _Token) -> None:
    """Renew ``token`` each time :data:`RENEW_AT` of the time to its expiry has passed, while it is this
    process's; a failed renewal is tried again :data:`RETRY_AFTER` seconds later."""
    while True:
        try:
            wait = max(1.0, (token.renew() - time.time()) * RENEW_AT)
        except (AcidStreamError, OSError):
            wait = RETRY_AFTER
        time.sleep(wait)
        with _lock:
            if all(held is not token for held in _tokens.values()):
                return


def cancel_tokens() -> None:
    """Cancel the tokens this process got (at its exit: the job has ended); a server that cannot be reached
    then lets them expire."""
    with _lock:
        held = list(_tokens.values())
        _tokens.clear()
    for token in held:
        with contextlib.suppress(AcidStreamError, OSError):
            token.cancel()
