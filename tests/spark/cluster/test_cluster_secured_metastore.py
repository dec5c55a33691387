"""A Spark job on the standalone cluster against a kerberized Hive 4 metastore: the driver logs in from a keytab
(``spark.acidstream.hive.*``), its executors have no Kerberos at all (no ticket cache, no krb5.conf: the
workers' environment is their own) and reach the metastore with the delegation token the job carries; a batch
append, a merge and a read go through, and the driver cancels its token when it ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acidstream.catalog import Metastore
from support.deps import import_or_skip
from support.sparkcluster import DDL, SCHEMA, SparkCluster, rows, run_job

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.hive4]

import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")


def tokens(ms: Any) -> set[str]:
    """The identifiers of the tokens the metastore holds."""
    return set(
        ms.backend.connection.call(
            "get_all_token_identifiers", lambda c: c.get_all_token_identifiers(), idempotent=True
        )
    )


def test_executors_without_tickets_append_merge_and_read_with_the_jobs_token(
    cluster: SparkCluster,
    hive4_kerberos_metastore: str,
    kdc: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-ticket'}")  # the driver too: its keytab only
    keytab = str(kdc.dir / "alice.keytab")
    url = hive4_kerberos_metastore
    with Metastore.connect(url, kerberos_principal="alice", kerberos_keytab=keytab) as ms:
        ms.execute("CREATE DATABASE IF NOT EXISTS secured_cluster")
        ms.execute(DDL.format(db="secured_cluster"))
        before = tokens(ms)
        conf = {
            "spark.acidstream.metastore": url,
            "spark.acidstream.hive.kerberos_principal": "alice",
            "spark.acidstream.hive.kerberos_keytab": keytab,
        }
        merge = {"merge": [[i, f"n{i}"] for i in range(150, 250)], "on": ["id"]}
        job = {"conf": conf, "options": {"metastore": url}, "table": "secured_cluster.events",
               "schema": SCHEMA, "append": rows(0, 200), "slices": 2, "steps": [merge], "read": True}  # fmt: skip
        answer = run_job(cluster, tmp_path, job)
        expected = [[i, f"m{i}"] for i in range(150)] + [[i, f"n{i}"] for i in range(150, 250)]
        assert sorted(answer["rows"]) == expected
        assert sorted(ms.table("secured_cluster.events").scan().to_arrow()["id"].to_pylist()) == list(
            range(250)
        )
        assert tokens(ms) == before  # the driver's token was cancelled as it ended
