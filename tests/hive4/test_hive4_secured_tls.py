"""TLS to a Hive 4 metastore (``metastore.use.SSL``, a self-signed certificate for localhost that
``scripts/hive.sh start --tls`` makes), which takes SASL PLAIN as it is deployed (``--plain``: Hive 4's
``metastore.authentication=CONFIG``): with its CA file and the user's password the client streams and reads; a
certificate that does not match the host name it is reached by, or one no trusted CA signed, is an
AuthenticationError naming the setting; TLS to a plain metastore says to connect without it. A wrong password is
an AuthenticationError naming the user and the metastore; PLAIN without TLS is refused unless opted in; the
password appears in no message, log line, repr or CLI output."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore
from acidstream.errors import AuthenticationError, MetastoreUnavailable, MetastoreUrlError
from hive4.referee import HiveUnavailable, hive_sh
from hive4.test_hive4_kerberos import stream_and_read
from support.backends import hive_unavailable
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")

#: The user the metastore takes SASL PLAIN from, and its password (which no output may show).
USER, PASSWORD = "etl", "pw-7f3a9c-never-shown"


@pytest.fixture(scope="module")
def tls_metastore(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Hive 4 metastore over TLS of this module's own, taking SASL PLAIN from :data:`USER`: its URI and its CA
    file."""
    state = tmp_path_factory.mktemp("hive4-tls-metastore")
    try:
        uri = hive_sh("start", str(state), "--tls", "--plain", f"{USER}:{PASSWORD}")
    except HiveUnavailable as exc:
        hive_unavailable(str(exc))
        raise
    yield uri, state / "tls" / "ca.pem"
    hive_sh("stop", str(state))


def test_plain_over_tls_streams_and_reads(
    tls_metastore: tuple[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """The CA file and PLAIN's user and password: DDL, a streaming commit and a scan; nothing logged, even at
    DEBUG, and no repr shows the password."""
    uri, ca = tls_metastore
    caplog.set_level(logging.DEBUG)
    with Metastore.connect(
        uri, ssl_ca_file=str(ca), auth_mode="PLAIN", plain_user=USER, plain_password=PASSWORD
    ) as ms:
        assert stream_and_read(ms, "over_plain") == [{"id": 1, "msg": "one"}, {"id": 2, "msg": "two"}]
        connection = ms.backend.connection
        shown = [repr(ms), repr(ms.backend), repr(connection.plain), repr(connection.reconnect_options())]
    assert all(PASSWORD not in text for text in shown) and USER in shown[2]
    assert PASSWORD not in caplog.text


def test_a_wrong_password_names_the_user_and_the_metastore(tls_metastore: tuple[str, Path]) -> None:
    uri, ca = tls_metastore
    wrong = "wrong-" + PASSWORD
    with pytest.raises(
        AuthenticationError, match=r"refused SASL PLAIN for the user etl.*plain_password"
    ) as caught:
        Metastore.connect(uri, ssl_ca_file=str(ca), plain_user=USER, plain_password=wrong)
    assert uri in str(caught.value) and not caught.value.retryable
    assert PASSWORD not in str(caught.value) and wrong not in str(caught.value)


def test_plain_without_tls_is_refused_unless_allowed(
    tls_metastore: tuple[str, Path], hive4_metastore: str
) -> None:
    """Refused before any socket opens; allowed, the password goes out, and a metastore that takes none (the
    open one) closes the connection at the SASL start, a retryable MetastoreUnavailable saying so."""
    with pytest.raises(
        MetastoreUrlError, match=r"password of etl in clear.*allow_plain_without_tls"
    ) as caught:
        Metastore.connect(tls_metastore[0], plain_user=USER, plain_password=PASSWORD)
    assert PASSWORD not in str(caught.value)
    with pytest.raises(MetastoreUnavailable, match=r"during SASL PLAIN authentication.*takes no password"):
        Metastore.connect(
            hive4_metastore, plain_user=USER, plain_password=PASSWORD, allow_plain_without_tls=True
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"auth_mode": "PLAIN", "plain_user": USER}, r"auth_mode PLAIN needs plain_user and plain_password"),
        ({"auth_mode": "NOSASL", "plain_user": USER}, r"go with auth_mode PLAIN, not NOSASL"),
        ({"auth_mode": "NOSASL", "kerberos": True}, r"auth_mode NOSASL with Kerberos settings \(kerberos\)"),
        ({"plain_user": USER, "plain_password": PASSWORD, "kerberos": True}, r"PLAIN and Kerberos settings"),
        ({"auth_mode": "LDAP"}, r"unknown auth_mode 'LDAP' \(known: NOSASL, KERBEROS, PLAIN\)"),
    ],
)
def test_auth_settings_that_cannot_work_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(MetastoreUrlError, match=message) as caught:
        Metastore.connect("thrift://127.0.0.1:1", **options)
    assert PASSWORD not in str(caught.value)


def test_the_command_line_takes_the_password_from_acidstream_toml_only(
    tls_metastore: tuple[str, Path], tmp_path: Path
) -> None:
    """``[hive]``'s ``plain_password`` (no command-line option: other users see a process's arguments); a wrong one
    is exit code 8, and neither output shows a password."""
    uri, ca = tls_metastore
    config = tmp_path / "acidstream.toml"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "acidstream.cli", *args]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    hive = f'[hive]\nssl_ca_file = "{ca}"\nauth_mode = "PLAIN"\nplain_user = "{USER}"\n'
    config.write_text(f'metastore = "{uri}"\n\n{hive}plain_password = "{PASSWORD}"\n')
    done = cli("sql", "CREATE DATABASE IF NOT EXISTS plain_cli")
    assert done.returncode == 0, done.stderr
    done = cli("show", "databases")
    assert "plain_cli" in done.stdout and PASSWORD not in done.stdout + done.stderr
    config.write_text(f'metastore = "{uri}"\n\n{hive}plain_password = "wrong-{PASSWORD}"\n')
    done = cli("show", "databases")
    assert done.returncode == 8 and "refused SASL PLAIN for the user etl" in done.stderr, done.stderr
    assert PASSWORD not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert cli("--plain-password", PASSWORD, "show", "databases").returncode == 2  # no such option


def test_the_spark_configuration_carries_the_password_where_spark_redacts_it(spark: Any) -> None:
    """``spark.acidstream.hive.plain_password`` reaches the job's settings, whose repr shows no value; its name is
    one Spark's ``spark.redaction.regex`` hides in its UI and event logs."""
    import re

    from acidstream.spark.options import job_settings

    key = "spark.acidstream.hive.plain_password"
    job = job_settings({key: PASSWORD, "spark.acidstream.hive.plain_user": USER})
    assert dict(job.hive) == {"plain_password": PASSWORD, "plain_user": USER}
    assert PASSWORD not in repr(job)
    config = getattr(getattr(spark.sparkContext._jvm.org.apache.spark.internal.config, "package$"), "MODULE$")
    pattern = spark.sparkContext._jsc.sc().conf().get(config.SECRET_REDACTION_PATTERN())  # the session's own
    assert re.search(str(pattern), key) and re.search(str(pattern), "plain_password")  # a conf key, an option


def test_a_certificate_for_another_host_is_refused(tls_metastore: tuple[str, Path]) -> None:
    uri, ca = tls_metastore
    by_address = uri.replace("localhost", "127.0.0.1")
    with pytest.raises(AuthenticationError, match=r"does not trust: .*127\.0\.0\.1.*ssl_ca_file") as caught:
        Metastore.connect(by_address, ssl_ca_file=str(ca))
    assert by_address in str(caught.value) and not caught.value.retryable


def test_a_certificate_no_trusted_ca_signed_is_refused(tls_metastore: tuple[str, Path]) -> None:
    with pytest.raises(AuthenticationError, match=r"does not trust: self.signed certificate"):
        Metastore.connect(tls_metastore[0], ssl_enabled=True)


def test_tls_to_a_plain_metastore_says_so(hive4_metastore: str, tls_metastore: tuple[str, Path]) -> None:
    with pytest.raises(MetastoreUnavailable, match=r"no TLS connection.*metastore\.use\.SSL"):
        Metastore.connect(hive4_metastore, ssl_ca_file=str(tls_metastore[1]), connect_timeout=5)


def test_a_missing_ca_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(MetastoreUrlError, match=r"ssl_ca_file .*absent\.pem"):
        Metastore.connect("thrift://localhost:1", ssl_ca_file=str(tmp_path / "absent.pem"))


def test_a_plain_client_of_a_tls_metastore_is_not_told_it_is_kerberized(tls_metastore: Any) -> None:
    with pytest.raises((MetastoreUnavailable, MetastoreUrlError)):
        Metastore.connect(tls_metastore[0], connect_timeout=5)
