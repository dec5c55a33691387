"""Hive 4 judges tables on HDFS, open and kerberized: what we stream, merge and compact into a warehouse on the
session's MiniDFSCluster, Hive's reader (the referee's JVM, Hadoop's own HDFS client) reads as ours does, row
mode and vectorized, through its default and its footer-reading ETL split generation; and what Hive's writer
writes there, we read as Hive does.

On the kerberized cluster we reach WebHDFS by SPNEGO from alice's keytab, and the referee runs the reads and
writes as alice logged in from the same keytab (``UserGroupInformation``), with the cluster's client
configuration (Kerberos RPC, the NameNode's principal, SASL on the DataNode's data transfer), as a Hive job
does there.
"""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from acidstream import Metastore
from acidstream.storage import configure_stores
from hive4.judge import judge
from hive4.referee import Referee
from hive4.storecases import SALES_DDL, hive_writes_into_ours, stream_with_an_open_txn
from support.deps import import_or_skip
from support.hdfscluster import MiniHdfs

pytestmark = pytest.mark.hive4


def _client_conf(cluster: MiniHdfs) -> dict[str, str]:
    """The cluster's Hadoop client configuration (``conf_dir``'s site files) as settings."""
    conf = {}
    for site in ("core-site.xml", "hdfs-site.xml"):
        for prop in ET.parse(cluster.conf_dir / site).getroot().iter("property"):
            conf[prop.findtext("name", "")] = prop.findtext("value", "")
    return conf


@pytest.fixture(params=["open", "kerberos"])
def on_hdfs(
    request: pytest.FixtureRequest, hive4: Referee, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Metastore, Referee]]:
    """A SQLite metastore whose warehouse is a new directory of the session's open or kerberized HDFS, and the
    referee reading and writing there (on the kerberized one, both as alice from her keytab)."""
    if request.param == "open":
        cluster: MiniHdfs = request.getfixturevalue("hdfs_namenode")
        referee = hive4.on_hadoop(_client_conf(cluster))
        stores = {}
    else:
        import_or_skip("requests_gssapi")
        cluster = request.getfixturevalue("hdfs_kerberos_namenode")
        kdc = request.getfixturevalue("kdc")
        keytab = str(kdc.dir / "alice.keytab")
        monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'ccache'}")  # empty: the keytab only
        # the DataNode asks for SASL on its data transfer (as a secure cluster's hdfs-site.xml says to clients)
        conf = {**_client_conf(cluster), "dfs.data.transfer.protection": "authentication"}
        login = {"principal": f"alice@{kdc.realm}", "keytab": keytab, "krb5conf": str(kdc.krb5_conf)}
        referee = hive4.on_hadoop(conf, login)
        stores = {"kerberos": True, "kerberos_principal": "alice", "kerberos_keytab": keytab}
    monkeypatch.setenv("HADOOP_CONF_DIR", str(cluster.conf_dir))
    previous = configure_stores(hdfs=stores)
    warehouse = f"{cluster.uri}/{uuid.uuid4().hex[:12]}/wh"
    try:
        with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
            yield ms, referee
    finally:
        configure_stores(**previous)


def test_hive_reads_what_we_stream_merge_and_compact(on_hdfs: tuple[Metastore, Referee]) -> None:
    ms, referee = on_hdfs
    ms.execute(SALES_DDL.format(db="default"))
    # the batch's files are still open: Hive reads their committed prefix by the side files
    committed = stream_with_an_open_txn(ms, referee, "default", splits=("etl",))
    changes = pd.DataFrame({"id": [10, 99], "amount": [-1, 9900], "region": ["us", "eu"]})
    ms.table("sales").merge(changes, on=["id"])
    committed |= {10: (10, -1, "us"), 99: (99, 9900, "eu")}
    judge(referee, ms, "default.sales", expected=committed.values())
    ms.compact("default.sales", "region=eu", kind="major", wait=True)
    assert any(p.name.startswith("base_") for p in _listing(ms, "region=eu"))
    judge(referee, ms, "default.sales", expected=committed.values())


def _listing(ms: Metastore, partition: str) -> list[Path]:
    from pyarrow import fs as pafs

    from acidstream.storage import table_filesystem

    filesystem, path = table_filesystem(ms.table("sales").location)
    return [Path(i.path) for i in filesystem.get_file_info(pafs.FileSelector(f"{path}/{partition}"))]


def test_we_read_what_hive_writes(on_hdfs: tuple[Metastore, Referee]) -> None:
    """Hive's writer, through Hadoop's HDFS client: :func:`hive_writes_into_ours`."""
    hive_writes_into_ours(*on_hdfs)
