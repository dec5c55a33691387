"""TLS to a Hive 4 metastore (``metastore.use.SSL``, a self-signed certificate for localhost that
``scripts/hive.sh start --tls`` makes): with its CA file the client streams and reads; a certificate that does
not match the host name it is reached by, or one no trusted CA signed, is an AuthenticationError naming the
setting; TLS to a plain metastore says to connect without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore
from acidstream.errors import AuthenticationError, MetastoreUnavailable, MetastoreUrlError
from hive4.referee import HiveUnavailable, hive_sh
from support.backends import hive_unavailable
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")


@pytest.fixture(scope="module")
def tls_metastore(hive4_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Hive 4 metastore over TLS of this module's own: its URI and its CA file."""
    state = tmp_path_factory.mktemp("hive4-tls-metastore")
    try:
        uri = hive_sh("start", str(state), "--tls")
    except HiveUnavailable as exc:
        hive_unavailable(str(exc))
        raise
    yield uri, state / "tls" / "ca.pem"
    hive_sh("stop", str(state))


def test_the_metastores_ca_file_lets_the_client_in(tls_metastore: tuple[str, Path]) -> None:
    uri, ca = tls_metastore
    with Metastore.connect(uri, ssl_ca_file=str(ca)) as ms:
        ms.execute("CREATE DATABASE IF NOT EXISTS over_tls")
        assert "over_tls" in ms.list_databases()


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
