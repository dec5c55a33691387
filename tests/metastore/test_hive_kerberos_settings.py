"""Kerberos settings for a Hive Metastore, without a KDC: the service principal as Hive's clients make it, the QOP
names, and settings that cannot work refused before anything is opened."""

from __future__ import annotations

import pytest

from support.deps import import_or_skip

import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")

from acidstream import Metastore  # noqa: E402
from acidstream.errors import MetastoreUrlError  # noqa: E402
from acidstream.metastore.hive.sasl import KerberosLogin, KerberosSettings  # noqa: E402


def test_host_is_the_uri_host_lower_cased_without_a_lookup() -> None:
    settings = KerberosSettings()
    assert settings.service_for("Metastore1.Example.COM") == "hive/metastore1.example.com"
    assert settings.service_for("10.0.0.7") == "hive/10.0.0.7"
    realm = KerberosSettings(service_principal="hive/_HOST@CORP.EXAMPLE")
    assert realm.service_for("hms") == "hive/hms@CORP.EXAMPLE"
    assert KerberosSettings(service_principal="metastore/fixed@R").service_for("hms") == "metastore/fixed@R"


@pytest.mark.parametrize(
    ("given", "qop"),
    [("auth", "auth"), ("authentication", "auth"), ("integrity", "auth-int"), ("privacy", "auth-conf")],
)
def test_hadoop_protection_names_are_sasl_qops(given: str, qop: str) -> None:
    assert KerberosSettings(qop=given).qop == qop


def test_options_to_settings() -> None:
    options: dict[str, object] = {
        "kerberos_principal": "alice",
        "kerberos_keytab": "/k",
        "connect_timeout": 5,
    }
    settings = KerberosSettings.from_options(options)
    assert settings == KerberosSettings(principal="alice", keytab="/k")
    assert options == {"connect_timeout": 5}
    assert KerberosSettings.from_options({}) is None
    assert KerberosSettings.from_options({"kerberos": True}) == KerberosSettings()


def test_repr_names_no_secret() -> None:
    login = KerberosLogin(KerberosSettings(principal="alice", keytab="/etc/alice.keytab"))
    assert repr(login) == "KerberosLogin(alice (keytab /etc/alice.keytab))"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kerberos_qop": "secret"}, r"unknown Kerberos QOP 'secret'"),
        ({"kerberos_keytab": "/k"}, r"a Kerberos keytab needs the principal"),
    ],
)
def test_settings_that_cannot_work_are_refused_before_connecting(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(MetastoreUrlError, match=message):
        Metastore.connect("thrift://127.0.0.1:1", **options)
