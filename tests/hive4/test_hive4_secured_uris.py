"""A list of metastores (``thrift://h1:9083,thrift://h2:9083``) tried in turn as Hive's clients try them, on an
open and on a kerberized Hive 4 metastore: a closed loopback port first in the list is passed over, Kerberos's
``_HOST`` is each entry's own host, and a list where nothing answers names every entry."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore
from acidstream.errors import MetastoreUnavailable, MetastoreUrlError
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("selection", ["sequential", "random"])
def test_a_closed_port_first_in_the_list_is_passed_over(hive4_metastore: str, selection: str) -> None:
    url = f"thrift://127.0.0.1:{closed_port()},{hive4_metastore}"
    with Metastore.connect(url, uri_selection=selection, connect_timeout=5) as ms:
        assert "default" in ms.list_databases()


def test_no_metastore_of_the_list_answering_names_each() -> None:
    first, second = (f"thrift://127.0.0.1:{closed_port()}" for _ in range(2))
    with pytest.raises(MetastoreUnavailable, match="cannot reach any of the Hive Metastores") as caught:
        Metastore.connect(f"{first}, {second}", uri_selection="sequential", connect_timeout=5)
    assert f"cannot reach the Hive Metastore at {first}" in str(caught.value)
    assert f"cannot reach the Hive Metastore at {second}" in str(caught.value)
    assert caught.value.retryable


@pytest.mark.parametrize("url", ["thrift://127.0.0.1:9083,", "thrift://127.0.0.1:9083,http://h:1"])
def test_a_bad_entry_in_the_list_is_a_url_error(url: str) -> None:
    with pytest.raises(MetastoreUrlError):
        Metastore.connect(url)


def test_an_unknown_uri_selection_is_refused() -> None:
    with pytest.raises(MetastoreUrlError, match=r"unknown uri_selection 'roundrobin'.*random, sequential"):
        Metastore.connect(f"thrift://127.0.0.1:{closed_port()}", uri_selection="roundrobin")


def test_kerberos_passes_a_closed_port_and_takes_host_per_entry(
    hive4_kerberos_metastore: str, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First a closed port, then the metastore as 127.0.0.1 (``hive/127.0.0.1`` is no principal of the realm:
    refused), then as localhost (``hive/localhost``, the metastore's own): the third authenticates."""
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'krb5cc'}")
    by_address = hive4_kerberos_metastore.replace("localhost", "127.0.0.1")
    url = f"thrift://127.0.0.1:{closed_port()},{by_address},{hive4_kerberos_metastore}"
    keytab = str(kdc.dir / "alice.keytab")
    options = {"kerberos_principal": "alice", "kerberos_keytab": keytab, "connect_timeout": 5}
    with Metastore.connect(url, uri_selection="sequential", **options) as ms:
        ms.execute("CREATE DATABASE IF NOT EXISTS secured_list")
        assert "secured_list" in ms.list_databases()
