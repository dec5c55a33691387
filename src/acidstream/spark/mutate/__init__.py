"""Merge, update and delete by key on Spark: one transaction, the driver's; Spark tasks write the mutations.

The driver opens the txn as the Python API does (:class:`~acidstream.mutate.merge.TableMutation`: shared-write
lock, the snapshot taken after it, heartbeats) and plans the target's scan at that snapshot. A merge then runs
one of two ways:

* **Split by bucket** (the table is bucketed on merge keys only, and unmatched target rows are left alone:
  :func:`~acidstream.mutate.bucket_merge.splits_by_bucket`): matches never cross buckets, so each Spark task
  takes some buckets (spread by file bytes), receives those buckets' source rows and reads those buckets' target
  rows itself, matching and writing with the Python merge's own code (:class:`BucketMerge`). One Spark job: a
  source Spark estimates under ``spark.sql.autoBroadcastJoinThreshold`` is collected once and shipped to the
  tasks, as Spark broadcasts a small join side; a larger one is bucketed by a Python stage and shuffled to them.
* **Join** (any other merge): Spark tasks read the target's keys and ROW__IDs bucket by bucket (for a merge
  whose source has at most ``MAX_PUSHED_KEYS`` distinct keys, collected to the driver first, only the rows those
  keys may match: the target is never shipped to Spark whole), and Spark joins them with the source. A Python
  stage turns each joined batch into mutation rows with the Python merge's code
  (:class:`~acidstream.mutate.changes.Changes`: updates keep their ROW__ID, inserts get their bucket attached).
  Spark then repartitions the mutations by (partition, bucket) and sorts each task's rows as Hive's API requires
  — partition, bucket, then ROW__ID, inserts last — and each task writes them through a
  :class:`MutatorCoordinator` built from the pickled ``AcidTable``.

Either way each writing task uses its Spark partition id as statement id and returns its ``MutationSummary``;
the driver commits with every summary. Nothing is visible until that commit: a failed job aborts the txn, and
a driver killed outright stops heartbeating, so the metastore aborts its txn after the txn timeout. Errors a
task raises on purpose (a row that would move between buckets, two source rows of one key) reach
the caller as the same exception classes the Python API raises. Each task *attempt* writes below a hidden
directory of its own (:mod:`acidstream.acid.attempts`), so a retry and a speculative copy of one task never
touch each other's files; the driver moves in the files of the attempts Spark took, commits once, and deletes
every attempt's directory (:func:`.driver.publish`).

The package is split by where code runs: :mod:`.driver` opens the txn, plans and commits (and runs update and
delete); :mod:`.by_bucket` and :mod:`.join` build the two Spark jobs a merge runs as; :mod:`.stages` holds the
``mapInArrow`` functions Spark pickles and runs on its executors' Python workers.
"""

from __future__ import annotations

from acidstream.spark.mutate.driver import delete, merge, update

__all__ = ["delete", "merge", "update"]
