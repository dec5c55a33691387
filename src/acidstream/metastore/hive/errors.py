"""Hive Metastore thrift exceptions as acidstream's errors (same names, see :mod:`acidstream.errors`).

Hive reports a first-committer-wins conflict as ``TxnAbortedException`` whose message says "write conflict"
(``TxnHandler.commitTxn``); it becomes :class:`~acidstream.errors.WriteConflictException`, a subclass.
"""

from __future__ import annotations

from hive_metastore import ttypes
from thrift.Thrift import TException

from acidstream import errors

#: Hive's exception class → ours; checked in order (none of Hive's subclasses another).
_BY_CLASS: tuple[tuple[type[TException], type[errors.MetaException]], ...] = (
    (ttypes.NoSuchTxnException, errors.NoSuchTxnException),
    (ttypes.TxnAbortedException, errors.TxnAbortedException),
    (ttypes.TxnOpenException, errors.TxnOpenException),
    (ttypes.NoSuchLockException, errors.NoSuchLockException),
    (ttypes.NoSuchObjectException, errors.NoSuchObjectException),
    (ttypes.AlreadyExistsException, errors.AlreadyExistsException),
    (ttypes.InvalidObjectException, errors.InvalidObjectException),
    (ttypes.InvalidOperationException, errors.InvalidOperationException),
)


def translate(exc: TException, call: str, url: str) -> errors.MetaException:
    """The acidstream error for a thrift exception the metastore at ``url`` raised in ``call``."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    if isinstance(exc, ttypes.TxnAbortedException) and "write conflict" in message.lower():
        return errors.WriteConflictException(message)
    for hive_class, ours in _BY_CLASS:
        if isinstance(exc, hive_class):
            return ours(message)
    return errors.MetaException(f"{call} at the Hive Metastore {url}: {type(exc).__name__}: {message}")
