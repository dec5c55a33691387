"""Hive Metastore delegation tokens on a kerberized Hive 4 metastore: a client with a keytab gets one, a process
without any Kerberos credentials authenticates with it (SASL DIGEST-MD5) and streams and reads; renewing pushes its
expiry on; once cancelled, or to a client without Kerberos, it is a typed AuthenticationError. And the token
string's codec (Hadoop's variable-length integers) against an encoder written from Hadoop's description."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.errors import AuthenticationError, MetastoreUrlError
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")

from hive_metastore.ttypes import GetTableRequest  # noqa: E402

from acidstream.metastore.hive.digest import DelegationToken, TokenError  # noqa: E402


def vint(value: int) -> bytes:
    """Hadoop's ``WritableUtils.writeVLong``."""
    if -112 <= value <= 127:
        return value.to_bytes(1, "big", signed=True)
    length = -112
    if value < 0:
        value, length = ~value, -120
    size = (value.bit_length() + 7) // 8
    return (length - size).to_bytes(1, "big", signed=True) + value.to_bytes(size, "big")


def token_text(identifier: bytes, password: bytes, kind: bytes, service: bytes) -> str:
    data = b"".join(vint(len(f)) + f for f in (identifier, password, kind, service))
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@given(st.binary(max_size=600), st.binary(max_size=300), st.binary(max_size=40), st.binary(max_size=40))
def test_a_token_string_decodes_as_hadoop_encodes_it(id_: bytes, pw: bytes, kind: bytes, svc: bytes) -> None:
    kind, svc = kind.decode("latin-1").encode(), svc.decode("latin-1").encode()
    token = DelegationToken(token_text(id_, pw, kind, svc))
    assert token.parts() == (id_, pw, kind.decode(), svc.decode())
    assert repr(token) == f"DelegationToken({kind.decode() or 'token'} {token.fingerprint()})"  # no password


def test_a_bad_token_string_is_refused_without_showing_it() -> None:
    with pytest.raises(TokenError, match="not a Hadoop delegation token") as caught:
        DelegationToken("c2VjcmV0LXRva2Vu")
    assert "c2VjcmV0" not in str(caught.value)
    with pytest.raises(MetastoreUrlError, match="not a Hadoop delegation token"):
        Metastore.connect("thrift://127.0.0.1:1", delegation_token="c2VjcmV0LXRva2Vu")


def commit_one_row(ms: Any, table: str) -> list[dict[str, Any]]:
    """One streaming commit of one row into ``secured.{table}``, and the table read back."""
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    builder = StreamingConnection.builder().with_metastore(ms).with_database("secured").with_table(table)
    with builder.with_record_writer(writer).connect() as conn:
        conn.begin_transaction()
        conn.write(b"1,one")
        conn.commit_transaction()
    rows: list[dict[str, Any]] = ms.table(f"secured.{table}").scan().to_arrow().to_pylist()
    return rows


@pytest.fixture
def keytab_client(hive4_kerberos_metastore: str, kdc: Any) -> Any:
    keytab = str(kdc.dir / "alice.keytab")
    with Metastore.connect(
        hive4_kerberos_metastore, kerberos_principal="alice", kerberos_keytab=keytab
    ) as ms:
        yield ms


@pytest.fixture
def no_kerberos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ticket cache, and no krb5.conf: a process with no Kerberos of its own at all."""
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'none'}")
    monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "no-krb5.conf"))


def test_a_process_without_kerberos_streams_and_reads_with_a_token(
    hive4_kerberos_metastore: str, keytab_client: Any, no_kerberos: None
) -> None:
    token = keytab_client.backend.get_delegation_token()
    assert "ACIDSTREAM" not in repr(token) and token.text not in repr(token)
    with Metastore.connect(hive4_kerberos_metastore, delegation_token=token.text) as ms:
        ms.execute("CREATE DATABASE IF NOT EXISTS secured")
        ms.execute(
            "CREATE TABLE secured.by_token (id int, msg string) STORED AS ORC "
            "TBLPROPERTIES ('transactional'='true')"
        )
        assert commit_one_row(ms, "by_token") == [{"id": 1, "msg": "one"}]
        with pytest.raises(
            AuthenticationError, match="handed out only to a client authenticated by Kerberos"
        ):
            ms.backend.get_delegation_token()
    keytab_client.backend.cancel_delegation_token(token)


def test_renewing_pushes_the_expiry_on_and_a_cancelled_token_is_refused(
    hive4_kerberos_metastore: str, keytab_client: Any, no_kerberos: None
) -> None:
    token = keytab_client.backend.get_delegation_token()
    assert keytab_client.backend.renew_delegation_token(token) > time.time()
    keytab_client.backend.cancel_delegation_token(token)
    with pytest.raises(AuthenticationError, match=r"DIGEST-MD5.*expired or been cancelled") as caught:
        Metastore.connect(hive4_kerberos_metastore, delegation_token=token.text)
    assert token.text not in str(caught.value) and hive4_kerberos_metastore in str(caught.value)
    assert not caught.value.retryable


def test_a_token_seals_every_message_where_the_metastore_asks_privacy(
    hive4_kerberos_metastore: str, keytab_client: Any, no_kerberos: None
) -> None:
    """QOP auth-conf over DIGEST-MD5 (the metastore's ``hadoop.rpc.protection`` privacy: 3DES, as Java's client
    picks it): DDL whose message is larger than the server's 64 KiB buffer, a table read back through sealed
    answers, a streaming commit; QOP auth-int, which the metastore does not offer, is refused naming its offer."""
    token = keytab_client.backend.get_delegation_token()
    big = "x" * 200_000
    with Metastore.connect(
        hive4_kerberos_metastore, delegation_token=token.text, kerberos_qop="auth-conf"
    ) as ms:
        ms.execute("CREATE DATABASE IF NOT EXISTS secured")
        ms.execute(
            "CREATE TABLE secured.by_sealed_token (id int, msg string) STORED AS ORC "
            f"TBLPROPERTIES ('transactional'='true', 'big'='{big}')"
        )
        request = GetTableRequest(dbName="secured", tblName="by_sealed_token")
        assert ms.backend._call("get_table_req", request).table.parameters["big"] == big
        (_, client), *_ = ms.backend.connection._idle
        assert client._iprot.trans.qop == "auth-conf"  # agreed, not the auth the metastore offers too
        assert commit_one_row(ms, "by_sealed_token") == [{"id": 1, "msg": "one"}]
    with pytest.raises(
        AuthenticationError, match=r"offers QOP auth-conf, auth .*asks for auth-int.*kerberos_qop"
    ):
        Metastore.connect(hive4_kerberos_metastore, delegation_token=token.text, kerberos_qop="integrity")
    keytab_client.backend.cancel_delegation_token(token)
