"""A kerberized Hive 4 metastore (SASL/GSSAPI, ``hadoop.rpc.protection`` privacy and authentication) against the
tests' own MIT KDC: connecting with a keytab and with a ticket cache, DDL, a streaming commit and a read through
it with QOP auth-conf and auth; and each credential it refuses as a typed :class:`AuthenticationError` from
``Metastore.connect``, before any transaction can open, naming the principal, the server and what to do."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.errors import AuthenticationError, MetastoreUnavailable
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")


def stream_and_read(ms: Any, table: str) -> list[dict[str, Any]]:
    """DDL, one streaming commit and a read through ``ms``."""
    ms.execute("CREATE DATABASE IF NOT EXISTS secured")
    ms.execute(
        f"CREATE TABLE secured.{table} (id int, msg string) STORED AS ORC TBLPROPERTIES ('transactional'='true')"
    )
    writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
    with (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("secured")
        .with_table(table)
        .with_record_writer(writer)
        .connect()
    ) as conn:
        conn.begin_transaction()
        conn.write(b"1,one")
        conn.write(b"2,two")
        conn.commit_transaction()
    rows: list[dict[str, Any]] = ms.table(f"secured.{table}").scan().to_arrow().sort_by("id").to_pylist()
    return rows


def test_a_keytab_streams_and_reads_with_auth_conf(
    hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path
) -> None:
    """alice's keytab, no ticket cache: SASL with every message sealed (auth-conf), as DDL, a streaming commit and
    a scan need; the ticket stays in memory, the caller's cache untouched."""
    keytab = kdc.dir / "alice.keytab"
    with Metastore.connect(
        hive4_kerberos_metastore,
        kerberos_principal="alice",
        kerberos_keytab=str(keytab),
        kerberos_qop="auth-conf",
    ) as ms:
        assert stream_and_read(ms, "by_keytab") == [{"id": 1, "msg": "one"}, {"id": 2, "msg": "two"}]
    assert not no_ticket.exists()


def test_a_ticket_cache_streams_and_reads_with_auth(
    hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path
) -> None:
    """``kinit`` then ``kerberos=True``: the cache's principal, QOP auth (the metastore offers both)."""
    kdc.kinit("alice", kdc.dir / "alice.keytab", no_ticket)
    with Metastore.connect(hive4_kerberos_metastore, kerberos=True) as ms:
        assert stream_and_read(ms, "by_cache") == [{"id": 1, "msg": "one"}, {"id": 2, "msg": "two"}]


def test_no_ticket_says_kinit(hive4_kerberos_metastore: str, no_ticket: Path) -> None:
    with pytest.raises(
        AuthenticationError, match=r"no Kerberos credentials.*ticket cache.*Run kinit"
    ) as caught:
        Metastore.connect(hive4_kerberos_metastore, kerberos=True)
    assert hive4_kerberos_metastore in str(caught.value)
    assert not caught.value.retryable


def test_an_expired_ticket_says_kinit(hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path) -> None:
    """A ticket cache whose ticket expired: refused before anything is sent, saying so and what to do."""
    kdc.kinit("alice", kdc.dir / "alice.keytab", no_ticket, lifetime="2s")
    while kdc.has_ticket(no_ticket):
        time.sleep(0.5)
    with pytest.raises(AuthenticationError, match=r"ticket cache .*credential has expired.*Run kinit"):
        Metastore.connect(hive4_kerberos_metastore, kerberos=True)


def test_a_stale_keytab_is_refused(
    hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path, tmp_path: Path
) -> None:
    """A keytab whose keys the KDC replaced since (``ktadd`` again): refused, naming the principal and keytab."""
    stale = tmp_path / "bob.keytab"
    shutil.copy(kdc.keytab("bob"), stale)
    kdc.keytab("bob")
    with pytest.raises(AuthenticationError, match=r"bob \(keytab .*bob.keytab\).*klist -kt") as caught:
        Metastore.connect(hive4_kerberos_metastore, kerberos_principal="bob", kerberos_keytab=str(stale))
    assert hive4_kerberos_metastore in str(caught.value)


def test_a_missing_keytab_is_refused(hive4_kerberos_metastore: str, tmp_path: Path) -> None:
    with pytest.raises(AuthenticationError, match=r"the keytab .*absent.keytab does not exist"):
        Metastore.connect(
            hive4_kerberos_metastore,
            kerberos_principal="alice",
            kerberos_keytab=str(tmp_path / "absent.keytab"),
        )


def test_a_service_principal_the_kdc_does_not_know(
    hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path
) -> None:
    """The URI's host as written makes ``hive/_HOST``: 127.0.0.1 is no principal of the realm."""
    url = hive4_kerberos_metastore.replace("localhost", "127.0.0.1")
    keytab = str(kdc.dir / "alice.keytab")
    with pytest.raises(
        AuthenticationError, match=r"for the service hive/127\.0\.0\.1 failed.*kerberos_service_principal"
    ):
        Metastore.connect(url, kerberos_principal="alice", kerberos_keytab=keytab)


def test_a_service_principal_the_metastore_is_not(
    hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path
) -> None:
    """A ticket for another service of the realm: the metastore ends the negotiation (GSS initiate failed)."""
    kdc.keytab("hive/elsewhere")
    keytab = str(kdc.dir / "alice.keytab")
    with pytest.raises(
        AuthenticationError, match=r"hive/elsewhere failed: the metastore ended the SASL negotiation"
    ):
        Metastore.connect(
            hive4_kerberos_metastore,
            kerberos_principal="alice",
            kerberos_keytab=keytab,
            kerberos_service_principal="hive/elsewhere",
        )


def test_a_qop_the_metastore_does_not_offer(hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path) -> None:
    keytab = str(kdc.dir / "alice.keytab")
    with pytest.raises(
        AuthenticationError, match=r"offers QOP auth, auth-conf, this client asks for auth-int"
    ):
        Metastore.connect(
            hive4_kerberos_metastore,
            kerberos_principal="alice",
            kerberos_keytab=keytab,
            kerberos_qop="integrity",
        )


def test_no_kerberos_settings_names_them(hive4_kerberos_metastore: str) -> None:
    """Hive 4 closes a plain call unanswered, as a server that is not serving yet would: retryable, naming both."""
    with pytest.raises(
        MetastoreUnavailable, match=r"not serving yet, or it requires Kerberos.*kerberos=True"
    ):
        Metastore.connect(hive4_kerberos_metastore, connect_timeout=5)


def test_kerberos_to_an_open_metastore_is_not_an_authentication_error(hive4_metastore: str, kdc: Any) -> None:
    """A metastore without SASL closes the connection at the client's SASL start: unreachable, saying why."""
    keytab = str(kdc.dir / "alice.keytab")
    url = hive4_metastore.replace("127.0.0.1", "localhost")
    with pytest.raises(
        MetastoreUnavailable, match=r"during Kerberos \(SASL\) authentication.*not kerberized"
    ):
        Metastore.connect(url, kerberos_principal="alice", kerberos_keytab=keytab, connect_timeout=5)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acidstream.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_the_command_line_takes_kerberos_from_acidstream_toml(
    hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path, tmp_path: Path
) -> None:
    """``[hive]`` in acidstream.toml (a keytab relative to the file); without a ticket, exit code 8."""
    shutil.copy(kdc.dir / "alice.keytab", tmp_path / "alice.keytab")
    (tmp_path / "acidstream.toml").write_text(
        f'metastore = "{hive4_kerberos_metastore}"\n\n'
        '[hive]\nkerberos_principal = "alice"\nkerberos_keytab = "alice.keytab"\nkerberos_qop = "privacy"\n'
    )
    done = cli("sql", "CREATE DATABASE IF NOT EXISTS secured_cli", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "secured_cli" in cli("show", "databases", cwd=tmp_path).stdout

    (tmp_path / "acidstream.toml").write_text(
        f'metastore = "{hive4_kerberos_metastore}"\n\n[hive]\nkerberos = true\n'
    )
    done = cli("show", "databases", cwd=tmp_path)
    assert done.returncode == 8, done.stderr
    assert "Run kinit" in done.stderr and "Traceback" not in done.stderr
