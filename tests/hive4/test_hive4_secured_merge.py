"""A merge split over forked worker processes on a kerberized Hive 4 metastore: each worker asks the metastore
for its txn's state as the merging process connects, whether with a keytab or with a ticket cache named after
the fork server started (its workers would otherwise look in the server's cache, and find no ticket)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from acidstream import Metastore
from acidstream.metastore.probe import MetastoreProbe
from acidstream.mutate.forkserver import fork_server
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")


def merge_in_two_processes(ms: Any, table: str) -> None:
    ms.execute("CREATE DATABASE IF NOT EXISTS secured")
    ms.execute(
        f"CREATE TABLE secured.{table} (a int, b string) CLUSTERED BY (a) INTO 4 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')"
    )
    t = ms.table(f"secured.{table}")
    t.merge(pd.DataFrame({"a": pd.array(range(8), "int32"), "b": [f"v{i}" for i in range(8)]}), on=["a"])
    source = pd.DataFrame({"a": pd.array(range(4, 12), "int32"), "b": [f"w{i}" for i in range(4, 12)]})
    assert t.merge(source, on=["a"], workers=2) == {"inserted": 4, "updated": 4, "deleted": 0}
    rows = t.scan().to_arrow().sort_by("a").to_pylist()
    assert rows == [{"a": i, "b": f"v{i}" if i < 4 else f"w{i}"} for i in range(12)]


@pytest.fixture
def ticket_after_the_fork_server(kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fork server up first (with the test process's environment of then), then a ticket in a cache of
    the test's own named by KRB5CCNAME."""
    assert fork_server().ready(wait=True)
    ccache = tmp_path / "krb5cc"
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    kdc.kinit("alice", kdc.dir / "alice.keytab", ccache)
    return ccache


def test_forked_merge_workers_use_the_ticket_cache_of_the_merging_process(
    hive4_kerberos_metastore: str, ticket_after_the_fork_server: Path
) -> None:
    with Metastore.connect(hive4_kerberos_metastore, kerberos=True) as ms:
        merge_in_two_processes(ms, "merged_by_cache")


def test_forked_merge_workers_log_in_from_the_keytab(
    hive4_kerberos_metastore: str, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'empty'}")
    keytab = str(kdc.dir / "alice.keytab")
    with Metastore.connect(
        hive4_kerberos_metastore, kerberos_principal="alice", kerberos_keytab=keytab
    ) as ms:
        merge_in_two_processes(ms, "merged_by_keytab")
        probe = MetastoreProbe.of(ms)
    assert keytab not in repr(probe) and "empty" not in repr(probe)
    assert pickle.loads(pickle.dumps(probe)) == probe
