"""Options shared by the command groups: where the metastore and the warehouse are."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_WAREHOUSE = "wh"


def default_metastore_url(warehouse: str) -> str:
    return f"sqlite:///{os.path.join(warehouse, 'metastore.db')}"


def metastore_options(func: F) -> F:
    """Add ``--metastore URL`` and ``--warehouse DIR`` (env ``ACIDSTREAM_METASTORE`` / ``ACIDSTREAM_WAREHOUSE``)."""
    func = click.option(
        "--warehouse",
        envvar="ACIDSTREAM_WAREHOUSE",
        default=DEFAULT_WAREHOUSE,
        show_default=True,
        help="Warehouse root directory (or pyarrow.fs URI) holding the tables' files.",
    )(func)
    func = click.option(
        "--metastore",
        envvar="ACIDSTREAM_METASTORE",
        default=None,
        help="Metastore URL: sqlite:///path.db or postgresql://... [default: sqlite under the warehouse]",
    )(func)
    return func
