"""Where the metastore is: which backend a URL's scheme names, and the defaults every entry point shares.

The library (:meth:`~acidstream.metastore.facade.MetastoreFacade.connect`), the command line and the Spark options
all ask here, so a scheme, a default or an environment variable is written once.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from acidstream.errors import MetastoreUrlError

if TYPE_CHECKING:
    from acidstream.metastore.backend import Backend

#: The warehouse when nothing names one (relative to the current directory).
DEFAULT_WAREHOUSE = "wh"
#: The environment variables naming the metastore's URL and the warehouse.
ENV_METASTORE = "ACIDSTREAM_METASTORE"
ENV_WAREHOUSE = "ACIDSTREAM_WAREHOUSE"
#: The SQLite file in the warehouse that is the metastore when nothing names one.
METASTORE_FILE = "metastore.db"
#: The URL forms, as messages list them.
URL_FORMS = "sqlite:///path, postgresql://user@host/db or thrift://host:9083"


@dataclass(frozen=True)
class BackendKind:
    """A metastore backend, imported on first use (each has its own dependencies)."""

    module: str
    cls: str
    #: the extra that installs its dependencies, if it needs one
    extra: str | None
    #: whether the metastore knows where its tables live (a Hive Metastore): a warehouse is not used
    knows_locations: bool
    #: the top-level modules the extra installs
    extra_modules: tuple[str, ...] = ()

    def opener(self, url: str) -> Callable[..., Backend]:
        """The backend class's ``open``. A module of its extra missing is the caller's to install (the error
        names the extra); any other import error is a fault of this installation, raised as it is."""
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            if (exc.name or "").split(".")[0] not in self.extra_modules:
                raise
            raise MetastoreUrlError(
                f"{url}: this metastore needs the {self.extra} extra (pip install 'acidstream[{self.extra}]'): "
                f"{exc}"
            ) from exc
        return cast(Callable[..., "Backend"], getattr(module, self.cls).open)


SQL = BackendKind("acidstream.metastore.sql.client", "MetastoreClient", None, knows_locations=False)
HIVE = BackendKind(
    "acidstream.metastore.hive.client",
    "HiveMetastoreClient",
    "hive",
    knows_locations=True,
    extra_modules=("hive_metastore", "thrift"),
)
#: URL scheme (before any ``+driver``) → backend.
SCHEMES: dict[str, BackendKind] = {"sqlite": SQL, "postgresql": SQL, "postgres": SQL, "thrift": HIVE}


def scheme(url: str) -> str:
    """``url``'s scheme without a SQLAlchemy ``+driver`` part, lower-cased; ``""`` if it has none."""
    return url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""


def backend_kind(url: str) -> BackendKind:
    """The backend ``url`` names; :class:`MetastoreUrlError` if its scheme names none."""
    kind = SCHEMES.get(scheme(url))
    if kind is None:
        raise MetastoreUrlError(f"unsupported metastore URL {url!r}: use {URL_FORMS}")
    return kind


def is_hive(url: str) -> bool:
    """Whether ``url`` names a Hive Metastore (which knows where its tables live) rather than acidstream's."""
    return SCHEMES.get(scheme(url)) is HIVE


def default_metastore_url(warehouse: str) -> str:
    """The metastore when nothing names one: the SQLite file :data:`METASTORE_FILE` in ``warehouse``."""
    return f"sqlite:///{os.path.join(warehouse, METASTORE_FILE)}"


def open_backend(url: str, **options: Any) -> Backend:
    """Open the backend ``url`` names with its ``open`` (``options``: see ``Metastore.connect``)."""
    return backend_kind(url).opener(url)(url, **options)
