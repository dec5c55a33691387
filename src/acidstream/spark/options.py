"""What every acidstream Spark entry point needs to know: which metastore, which warehouse, which table.

Options travel as strings through Spark (keys lower-cased); they are resolved once, on the driver side, into a
picklable :class:`ResolvedTable` that tasks and commit workers use without re-reading the options. Each Python worker
keeps one metastore client per URL, because Spark reuses workers across tasks and batches.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from acidstream.errors import InvalidTable, StreamingConnectionError
from acidstream.metastore.location import (
    DEFAULT_WAREHOUSE,
    ENV_METASTORE,
    ENV_WAREHOUSE,
    default_metastore_url,
    is_hive,
)

if TYPE_CHECKING:
    from acidstream.catalog import Metastore
    from acidstream.metastore.models import TableDefinition

_clients: dict[tuple[str, str], Metastore] = {}
_clients_lock = threading.Lock()


def metastore_location(options: Mapping[str, str]) -> tuple[str, str]:
    """(metastore URL, absolute warehouse dir) from options, then the environment, then the defaults."""
    opts = {k.lower(): v for k, v in options.items()}
    warehouse = opts.get("warehouse") or os.environ.get(ENV_WAREHOUSE) or DEFAULT_WAREHOUSE
    if "://" not in warehouse:
        warehouse = os.path.abspath(warehouse)
    url = opts.get("metastore") or os.environ.get(ENV_METASTORE) or default_metastore_url(warehouse)
    return url, warehouse


def location_options(metastore: str | None, warehouse: str | None) -> dict[str, str]:
    """A Python entry point's ``metastore``/``warehouse`` arguments as the options :func:`metastore_location`
    resolves (an unset one falls back to the environment, then the default)."""
    options = {}
    if metastore is not None:
        options["metastore"] = metastore
    if warehouse is not None:
        options["warehouse"] = warehouse
    return options


def client(url: str, warehouse: str) -> Metastore:
    """This process's metastore client for ``url`` (connecting checks the schema: do it once per worker)."""
    from acidstream.catalog import Metastore

    key = (url, warehouse)
    with _clients_lock:
        ms = _clients.get(key)
        if ms is None:
            # a Hive Metastore knows where its tables live
            ms = _clients[key] = Metastore.connect(url, warehouse=None if is_hive(url) else warehouse)
        return ms


def table_name(options: Mapping[str, str]) -> str:
    """``db.table`` from ``load(...)``/``save(...)``/``start(...)`` (the ``path`` option) or ``table``."""
    opts = {k.lower(): v for k, v in options.items()}
    name = opts.get("table") or opts.get("path")
    if not name:
        raise StreamingConnectionError(
            'acidstream needs a table: .load("db.table") / .save("db.table") or option table'
        )
    if "." not in name:
        name = f"default.{name}"
    return name.lower()


@dataclass(frozen=True)
class ResolvedTable:
    """A resolved table, shippable to tasks: the definition without its metastore client."""

    url: str
    warehouse: str
    table: TableDefinition

    @property
    def name(self) -> str:
        return self.table.full_name

    def metastore(self) -> Metastore:
        return client(self.url, self.warehouse)


def resolve(options: Mapping[str, str], *, writable: bool = False) -> ResolvedTable:
    url, warehouse = metastore_location(options)
    ms = client(url, warehouse)
    table = ms.table(table_name(options))
    if writable and not table.is_transactional:
        raise InvalidTable(table.db, table.name, f"{table.full_name} is not an Acid table")
    return ResolvedTable(url, warehouse, table.definition())


def flag(options: Mapping[str, str], name: str, default: bool = False) -> bool:
    value = {k.lower(): v for k, v in options.items()}.get(name.lower())
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes")
