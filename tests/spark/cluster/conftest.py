"""The Spark standalone cluster of the test session (tests/support/sparkcluster.py), started by the first test
that asks for it and stopped at the session's end."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from support.sparkcluster import SparkCluster, SparkClusterUnavailable, spark_cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    try:
        with spark_cluster(tmp_path_factory.mktemp("spark-cluster")) as running:
            yield running
    except SparkClusterUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the Spark cluster is unavailable under CI: {exc}")
        pytest.skip(f"the Spark cluster is unavailable: {exc}")
