"""Partitions of Hive's TestMutations, and the merge actions a split merge is compared under, shared by the
mutation tests."""

import pytest

from acidstream.mutate.changes import MergeActions

ASIA_INDIA = ["Asia", "India"]
EUROPE_UK = ["Europe", "UK"]
EUROPE_FRANCE = ["Europe", "France"]

#: A merge split by bucket (over coordinators or processes) against the merge in one process, for each of these.
each_split_action = pytest.mark.parametrize(
    "actions",
    [MergeActions(), MergeActions("delete", None), MergeActions(None, "insert")],
    ids=["upsert", "delete matched", "insert new only"],
)
