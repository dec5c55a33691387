"""A Kerberos ticket that expires in the middle of a streaming batch, on a kerberized Hive 4 metastore: with a
keytab, the commit's new connection logs in from it again and commits; with a ticket cache only, the commit
fails before anything is sent (an AuthenticationError saying the ticket expired) and nothing is committed."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.errors import AcidStreamError, AuthenticationError
from acidstream.metastore.models import TxnStatus
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")

LIFETIME = 8  # seconds: a connect, the DDL and a write fit in it on a loaded machine, mostly; see expired()


def create(ms: Any, table: str) -> None:
    ms.execute("CREATE DATABASE IF NOT EXISTS secured")
    ms.execute(
        f"CREATE TABLE secured.{table} (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )


def connection(ms: Any, table: str) -> StreamingConnection:
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    builder = StreamingConnection.builder().with_metastore(ms).with_database("secured").with_table(table)
    return builder.with_record_writer(writer).connect()


def expired(since: float) -> None:
    """Wait until a ticket got at ``since`` has expired, then drop the client's sockets: the next call opens
    (and authenticates) a new one."""
    time.sleep(max(0.0, since + LIFETIME + 1 - time.monotonic()))


def test_a_keytab_logs_in_again_when_the_ticket_expires_mid_batch(
    hive4_kerberos_metastore: str, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'none'}")
    keytab = kdc.keytab("shortlived")
    kdc.maxlife("shortlived", LIFETIME)
    since = time.monotonic()
    with Metastore.connect(
        hive4_kerberos_metastore, kerberos_principal="shortlived", kerberos_keytab=str(keytab)
    ) as ms:
        create(ms, "renewed")
        with connection(ms, "renewed") as conn:
            conn.begin_transaction()
            conn.write(b"1,one")
            expired(since)
            ms.backend.connection.close()
            conn.commit_transaction()
        assert ms.table("secured.renewed").scan().to_arrow().to_pylist() == [{"id": 1, "msg": "one"}]


def test_an_expired_ticket_cache_fails_the_commit_with_nothing_committed(
    hive4_kerberos_metastore: str, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ccache = tmp_path / "krb5cc"
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    since = time.monotonic()
    kdc.kinit("alice", kdc.dir / "alice.keytab", ccache, lifetime=f"{LIFETIME}s")
    ms = Metastore.connect(hive4_kerberos_metastore, kerberos=True)
    create(ms, "expired")
    conn = connection(ms, "expired")
    conn.begin_transaction()
    txn_id = conn.current_transaction_id()
    conn.write(b"1,one")
    expired(since)
    ms.backend.connection.close()
    with pytest.raises(AuthenticationError, match=r"credential has expired.*Run kinit"):
        conn.commit_transaction()
    keytab = str(kdc.dir / "alice.keytab")
    with Metastore.connect(
        hive4_kerberos_metastore, kerberos_principal="alice", kerberos_keytab=keytab
    ) as other:
        assert other.get_txn_state(txn_id) is not TxnStatus.COMMITTED
        assert other.table("secured.expired").scan().to_arrow().num_rows == 0
    with contextlib.suppress(AcidStreamError):  # its abort cannot authenticate either: Hive times the txn out
        conn.close()
    ms.close()
