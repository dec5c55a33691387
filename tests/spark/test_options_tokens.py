"""Kerberos given only as the data source's options (the session's configuration names no metastore and no
Hive settings): the planner gets a metastore delegation token for the job, and the tasks connect with it, as
executors without tickets must (``JobSettings``' Hive settings carry it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acidstream.catalog import Metastore
from acidstream.spark.options import JobSettings, resolve
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")


def test_options_alone_get_the_job_a_token(hive4_kerberos_metastore: str, kdc: Any, tmp_path: Path) -> None:
    keytab = {"kerberos_principal": "alice", "kerberos_keytab": str(kdc.dir / "alice.keytab")}
    with Metastore.connect(hive4_kerberos_metastore, **keytab) as ms:
        ms.execute("CREATE DATABASE IF NOT EXISTS secured")
        ms.execute(
            "CREATE TABLE IF NOT EXISTS secured.option_tokens (id int) STORED AS ORC "
            "TBLPROPERTIES ('transactional'='true')"
        )
    options = {"metastore": hive4_kerberos_metastore, "table": "secured.option_tokens", **keytab}
    target = resolve(options, writable=True, job=JobSettings())
    hive = dict(target.job.hive)
    assert hive["delegation_token"]  # what the tasks connect with: a token, not the keytab
    assert hive["delegation_token"] not in repr(target.job)
    with Metastore.connect(hive4_kerberos_metastore, delegation_token=hive["delegation_token"]) as worker:
        assert worker.table("secured.option_tokens").is_transactional
