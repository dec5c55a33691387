"""Replication between warehouses, open transaction batches included (Hive's REPL DUMP/LOAD).

``sync(source, target)`` bootstraps a replica and then applies the source's events; ``dump``/``load`` do the
same through a directory. A replica's readers see, after each applied event, what the source's saw at it.
"""

from acidstream.repl.dump import DumpInfo, dump, dump_follower_name, load
from acidstream.repl.loader import DEFAULT_POLICY, Loader, LoadResult
from acidstream.repl.status import ReplStatus, status
from acidstream.repl.sync import SyncResult, sync

__all__ = [
    "DEFAULT_POLICY",
    "DumpInfo",
    "LoadResult",
    "Loader",
    "ReplStatus",
    "SyncResult",
    "dump",
    "dump_follower_name",
    "load",
    "status",
    "sync",
]
