"""A merge split by bucket over several workers (coordinators) equals the merge done in one process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from mutatehelpers import each_split_action

from acidstream.catalog import Metastore
from acidstream.errors import InvalidObjectException
from acidstream.mutate.bucket_merge import BucketMerge, splits_by_bucket
from acidstream.mutate.changes import MergeActions
from acidstream.mutate.coordinator import MutatorCoordinator
from acidstream.mutate.merge import TableMutation
from support.accounts import ACCOUNTS_DDL, frame, table_frame


def split_merge(ms: Metastore, table: str, source: pd.DataFrame, actions: MergeActions) -> dict[str, int]:
    """The merge as two workers run it: each gets some buckets' source rows and writes them with its own
    statement id; the driver commits both summaries."""
    with TableMutation(ms, table) as m:
        aligned = m.changes.align_source(pa.Table.from_pandas(source, preserve_index=False), ["id"])
        target_columns = tuple(m.changes.target_columns(aligned.column_names, ["id"], actions))
        with m.scan(target_columns) as scan:
            plan = scan.plan_files()
            split = BucketMerge(
                m.changes, actions, ("id",), target_columns, plan.write_ids, plan.tasks, m.known_partitions()
            )
            buckets = split.bucket_ids(aligned)
            summaries = []
            for worker, mine in enumerate((buckets % 2 == 0, buckets % 2 == 1)):
                coordinator = MutatorCoordinator(m.acid_table, metastore=ms, statement_id=worker + 1)
                split.write_buckets(coordinator, aligned.filter(mine), buckets[mine])
                summaries.append(coordinator.close())
        return m.commit(summaries)


@each_split_action
def test_a_merge_split_over_workers_equals_the_merge_in_one_process(
    ms: Metastore, actions: MergeActions
) -> None:
    for name in ("split", "whole"):
        ms.execute(ACCOUNTS_DDL.format(f"testing.{name}"))
        ms.table(f"testing.{name}").merge(frame(list(range(100)), "a"), on=["id"])
    rng = np.random.default_rng(5)
    source = pd.concat(
        [frame(sorted(rng.choice(100, 30, replace=False).tolist()), "b"), frame(list(range(100, 120)), "n")]
    )
    counts = split_merge(ms, "testing.split", source, actions)
    expected = ms.table("testing.whole").merge(
        source, on=["id"], when_matched=actions.when_matched, when_not_matched=actions.when_not_matched
    )
    assert counts == expected and sum(counts.values()) > 0
    pd.testing.assert_frame_equal(table_frame(ms, "testing.split"), table_frame(ms, "testing.whole"))
    written = Path(ms.table("testing.split").location).glob("*/*delta_0000002_*")
    assert {d.name.rsplit("_", 1)[1] for d in written} == {"0001", "0002"}  # both workers wrote


def test_two_source_rows_matching_one_target_row_are_refused_within_a_bucket(ms: Metastore) -> None:
    ms.execute(ACCOUNTS_DDL.format("testing.dup"))
    ms.table("testing.dup").merge(frame(list(range(10)), "a"), on=["id"])
    with pytest.raises(InvalidObjectException, match=r"both match the target row with \{'id': 3\}"):
        split_merge(ms, "testing.dup", frame([3, 5, 3], "b"), MergeActions())
    assert table_frame(ms, "testing.dup").name.tolist() == [f"a{i}" for i in range(10)]


def test_only_merges_whose_matches_stay_in_a_bucket_split(ms: Metastore) -> None:
    ms.execute(ACCOUNTS_DDL.format("testing.acc"))  # clustered by id into 4 buckets
    ms.execute(
        "CREATE TABLE testing.flat (id bigint, name string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    acc, flat = ms.table("testing.acc"), ms.table("testing.flat")
    assert splits_by_bucket(acc, ["id"], MergeActions())
    assert splits_by_bucket(acc, ["ID", "name"], MergeActions("delete", None))
    assert not splits_by_bucket(acc, ["name"], MergeActions())  # a key's rows may lie in any bucket
    assert not splits_by_bucket(acc, ["id"], MergeActions(when_not_matched_by_source="delete"))
    assert not splits_by_bucket(flat, ["id"], MergeActions())
