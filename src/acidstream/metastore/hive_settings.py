"""How to reach a Hive Metastore beyond its URL: the names and kinds of ``Metastore.connect``'s Hive options.

One list for every place that takes them: ``acidstream.toml``'s ``[hive]`` table, the command line's
``--kerberos-principal`` and the like, and the Spark data source's options and ``spark.acidstream.hive.*``
configuration, which carry them as strings. Kept out of :mod:`acidstream.metastore.hive`, which needs the
``hive`` extra: the command line and Spark read these settings before any metastore is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acidstream.errors import MetastoreUrlError

#: ``Metastore.connect``'s options for a Hive Metastore, by name, with their kind.
HIVE_SETTINGS: dict[str, type] = {
    "kerberos": bool,
    "kerberos_service_principal": str,
    "kerberos_principal": str,
    "kerberos_keytab": str,
    "kerberos_qop": str,
    "uri_selection": str,
    "delegation_token": str,
    "ssl_enabled": bool,
    "ssl_ca_file": str,
    "auth_mode": str,
    "plain_user": str,
    "plain_password": str,
    "allow_plain_without_tls": bool,
}
#: The settings that are secrets: never a command-line option (other users see a process's arguments), never
#: shown in a repr or a message.
SECRET_SETTINGS = frozenset({"delegation_token", "plain_password"})
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def hive_settings_of(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The Hive settings among ``options`` (other keys ignored; names compared lower-cased, as Spark passes
    them), booleans parsed from their text; :class:`MetastoreUrlError` naming ``where`` and the key for a
    value that is no boolean or an empty string."""
    settings: dict[str, Any] = {}
    for key, value in options.items():
        name = key.lower()
        kind = HIVE_SETTINGS.get(name)
        if kind is None or value is None:
            continue
        if kind is bool and isinstance(value, str):
            text = value.strip().lower()
            if text not in (*_TRUE, *_FALSE):
                raise MetastoreUrlError(f"{where}{key} must be true or false, not {value!r}")
            value = text in _TRUE
        if not isinstance(value, kind) or value == "":
            raise MetastoreUrlError(
                f"{where}{key} must be a {'boolean' if kind is bool else 'non-empty string'}"
            )
        settings[name] = value
    return settings
