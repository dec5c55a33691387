"""Where task attempts write before a commit publishes them, and whose they are.

Spark may run one task twice at once (a speculative copy) or again after losing its executor, and each attempt
must write where no reader looks and no other attempt writes: a directory of its own below
``_acidstream_attempts/`` (hidden from every reader by its leading ``_``, as Hive's ``hiddenFileFilter`` hides
it). The committer moves the files of the attempts Spark took into place and deletes the rest; a driver killed
outright leaves them, and the cleaner deletes them once the transaction they were written for is over, which
their directory's name tells:

* ``w<write id>_s<statement>_<attempt>``: a write's task (batch write, sink, merge/update/delete), in the
  table's directory;
* ``<output directory>.<attempt>``: a compaction's bucket job, beside its output directory (in the request's
  ``_tmp`` directory, or in the partition's for outputs written in place, named ``…_v<compactor txn>``).
"""

from __future__ import annotations

import contextlib
import os
import re

import pyarrow.fs as pafs

from acidstream.acid.names import parse_dir_name
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList
from acidstream.errors import AcidFormatError
from acidstream.storage import is_object_store, local_path

#: The directory where task attempts write (hidden: its name starts with ``_``).
ATTEMPTS_DIR = "_acidstream_attempts"

_WRITE_RE = re.compile(r"w(\d+)_s\d+_.+")


def write_attempts_prefix(write_id: int) -> str:
    """The start of the names of every attempt directory of ``write_id``'s tasks."""
    return f"w{write_id}_s"


def write_attempt(write_id: int, statement_id: int, attempt: str) -> str:
    """The directory name of task attempt ``attempt`` (unique in its job) writing ``statement_id``."""
    return f"{write_attempts_prefix(write_id)}{statement_id}_{attempt}"


def output_attempt(output: str, attempt: str) -> str:
    """The directory name of task attempt ``attempt`` writing a file of output directory ``output``."""
    return f"{output}.{attempt}"


def attempt_over(name: str, write_ids: ValidWriteIdList, txns: ValidTxnList) -> bool:
    """Whether the transaction attempt directory ``name`` wrote for has ended (committed or aborted), so that
    no committer will move its files any more; False for names it cannot tell (they stay)."""
    match = _WRITE_RE.fullmatch(name)
    if match is not None:
        write_id = int(match[1])
        return write_ids.is_write_id_valid(write_id) or write_ids.is_write_id_aborted(write_id)
    try:
        parsed = parse_dir_name(name.split(".", 1)[0])
    except AcidFormatError:
        return False
    txn = parsed.visibility_txn_id if parsed is not None else 0
    return txn > 0 and (txns.is_txn_valid(txn) or txns.is_txn_aborted(txn))


def remove_if_empty(fs: pafs.FileSystem, directory: str) -> None:
    """Delete ``directory`` if it is empty, in one operation that refuses a non-empty one (another job's attempts
    may be writing in it: a listing and then a recursive delete would race them): ``rmdir`` on a local disk,
    HDFS's non-recursive ``DELETE`` there. An object store has no empty directories: nothing to delete."""
    local = local_path(fs, directory)
    with contextlib.suppress(OSError):
        if local is not None:
            os.rmdir(local)
        elif not is_object_store(fs):
            fs.delete_file(
                directory
            )  # WebHDFS: DELETE recursive=false, refused for a directory that holds any
