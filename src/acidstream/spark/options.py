"""What every acidstream Spark entry point needs to know: which metastore, which warehouse, which table.

Options travel as strings through Spark (keys lower-cased); they are resolved once, on the driver side, into a
picklable :class:`ResolvedTable` that tasks and commit workers use without re-reading the options. Each Python worker
keeps one metastore client per URL, because Spark reuses workers across tasks and batches.

On a cluster the executors' Python workers share nothing with the driver's process: its ``configure_stores(...)``,
its environment and its files are not theirs. So the store settings travel with the job as :class:`JobSettings`,
read on the driver from the session's ``spark.hadoop.fs.s3a.*`` and ``spark.acidstream.*`` configuration over the
driver's ``configure_stores``, carried by the registered data source into every :class:`ResolvedTable`, and set in
each worker before it touches a store (:meth:`ResolvedTable.in_worker`).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from acidstream import runtime, storage
from acidstream.errors import InvalidTable, StreamingConnectionError
from acidstream.metastore.hive_settings import hive_settings_of
from acidstream.metastore.location import (
    DEFAULT_WAREHOUSE,
    ENV_METASTORE,
    ENV_WAREHOUSE,
    default_metastore_url,
    is_hive,
)
from acidstream.spark.tokens import hdfs_job_token, job_token

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from acidstream.catalog import Metastore
    from acidstream.metastore.models import TableDefinition

_clients: dict[tuple[str, str, tuple[tuple[str, Any], ...]], Metastore] = {}
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


def client(url: str, warehouse: str, hive: tuple[tuple[str, Any], ...] | None = None) -> Metastore:
    """This process's metastore client for ``url`` (connecting checks the schema: do it once per worker), a
    Hive Metastore's reached with the ``hive`` settings (Kerberos), by default the job's
    (:func:`process_hive_settings`)."""
    from acidstream.catalog import Metastore

    if not is_hive(url):
        hive = ()
    elif hive is None:
        hive = process_hive_settings()
    key = (url, warehouse, hive)
    with _clients_lock:
        ms = _clients.get(key)
        if ms is None:
            # a Hive Metastore knows where its tables live
            warehouse_or_none = None if is_hive(url) else warehouse
            ms = _clients[key] = Metastore.connect(url, warehouse=warehouse_or_none, **dict(hive))
        return ms


#: The Hive settings a job set in this worker (:meth:`JobSettings.apply`); None until one did.
_applied_hive: tuple[tuple[str, Any], ...] | None = None


def process_hive_settings() -> tuple[tuple[str, Any], ...]:
    """The Hive settings of this process's job: those a job set in this worker, else on a driver its active
    session's ``spark.acidstream.hive.*`` configuration."""
    if _applied_hive is not None:
        return _applied_hive
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return job_settings(dict(active.sparkContext.getConf().getAll())).hive if active is not None else ()


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


#: Hadoop's S3A settings (``spark.hadoop.`` + these) and the :data:`acidstream.storage.S3_SETTINGS` they set.
S3A_SETTINGS = {
    "fs.s3a.access.key": "access_key",
    "fs.s3a.secret.key": "secret_key",
    "fs.s3a.session.token": "session_token",
    "fs.s3a.endpoint.region": "region",
}
#: ``spark.acidstream.hdfs.*`` settings and the :data:`acidstream.storage.HDFS_SETTINGS` they set.
HDFS_CONF = {"user": "user", "webhdfs_port": "webhdfs_port"}
#: The Spark configuration's defaults for the data source's options (``spark.acidstream.metastore``...).
DEFAULTED_OPTIONS = ("metastore", "warehouse")
#: The prefix of the Spark configuration's Hive settings (``spark.acidstream.hive.kerberos_principal``...).
HIVE_CONF = "spark.acidstream.hive."


@dataclass(frozen=True, repr=False)
class JobSettings:
    """What a job tells every process working for it: store settings (``configure_stores``'s arguments, as
    sorted pairs) and defaults for the data source's options. Its repr shows no value, so that no secret
    reaches a plan string, Spark's UI or an error message through it."""

    s3: tuple[tuple[str, Any], ...] = ()
    hdfs: tuple[tuple[str, Any], ...] = ()
    defaults: tuple[tuple[str, str], ...] = ()
    #: ``Metastore.connect``'s options for a Hive Metastore (Kerberos), as sorted pairs
    hive: tuple[tuple[str, Any], ...] = ()

    def __repr__(self) -> str:
        s3, hdfs, hive = ([k for k, _ in pairs] for pairs in (self.s3, self.hdfs, self.hive))
        return f"JobSettings(s3={s3}, hdfs={hdfs}, hive={hive})"

    def apply(self) -> None:
        """Set this job's store and Hive settings in this process; a job that names no stores leaves the
        process's own."""
        global _applied_hive
        _applied_hive = self.hive
        if self.s3 or self.hdfs:
            storage.configure_stores(s3=dict(self.s3), hdfs=dict(self.hdfs))

    def with_options(self, options: Mapping[str, str]) -> JobSettings:
        """These settings with the Hive settings among a read's or write's ``options`` over the job's."""
        given = hive_settings_of(options, "the acidstream option ")
        if not given:
            return self
        return dataclasses.replace(self, hive=tuple(sorted({**dict(self.hive), **given}.items())))

    def in_worker(self) -> None:
        """Ready a Spark Python worker (a task's, a planner's or a committer's) for this job: acidstream's
        process settings, and the job's store settings."""
        runtime.configure()
        self.apply()


def job_settings(conf: Mapping[str, str]) -> JobSettings:
    """The settings of a job whose Spark configuration is ``conf``, read on its driver: ``spark.hadoop.fs.s3a.*``
    (endpoint, keys, token, region, ``connection.ssl.enabled``) and ``spark.acidstream.hdfs.user`` /
    ``.webhdfs_port`` over what ``configure_stores`` set in the driver's process, key by key;
    ``spark.acidstream.metastore`` / ``.warehouse`` as the options' defaults. Checked as ``configure_stores``
    checks its arguments."""
    driver = storage.current_stores()
    s3 = dict(driver["s3"])
    hadoop = {k[len("spark.hadoop.") :]: v for k, v in conf.items() if k.startswith("spark.hadoop.fs.s3a.")}
    s3.update({S3A_SETTINGS[k]: v for k, v in hadoop.items() if k in S3A_SETTINGS})
    endpoint = hadoop.get("fs.s3a.endpoint")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
        s3["endpoint_override"] = parts.netloc
        if parts.scheme:
            s3["scheme"] = parts.scheme
    if hadoop.get("fs.s3a.connection.ssl.enabled", "").strip().lower() == "false":
        s3["scheme"] = "http"
    hdfs = dict(driver["hdfs"])
    for key, setting in HDFS_CONF.items():
        value = conf.get(f"spark.acidstream.hdfs.{key}")
        if value:
            hdfs[setting] = int(value) if setting == "webhdfs_port" and value.isdigit() else value
    checked = storage.store_settings(s3=s3, hdfs=hdfs)
    defaults = {
        k: conf[f"spark.acidstream.{k}"] for k in DEFAULTED_OPTIONS if conf.get(f"spark.acidstream.{k}")
    }
    hive = hive_settings_of(
        {k[len(HIVE_CONF) :]: v for k, v in conf.items() if k.startswith(HIVE_CONF)}, HIVE_CONF
    )
    return JobSettings(
        tuple(sorted(checked["s3"].items())),
        tuple(sorted(checked["hdfs"].items())),
        tuple(sorted(defaults.items())),
        tuple(sorted(hive.items())),
    )


def session_job(spark: SparkSession) -> JobSettings:
    """The settings of the job ``spark`` runs, as :func:`job_settings` reads them from its configuration, with a
    delegation token of this driver's for its workers where its Hive settings authenticate by Kerberos
    (:func:`acidstream.spark.tokens.job_token`: executors have no Kerberos tickets of their own)."""
    job = job_settings(dict(spark.sparkContext.getConf().getAll()))
    defaults = dict(job.defaults)
    return with_tokens(job, defaults.get("metastore"), defaults.get("warehouse"))


def with_tokens(job: JobSettings, url: str | None, warehouse: str | None) -> JobSettings:
    """``job`` with delegation tokens of this process's for its workers (:mod:`acidstream.spark.tokens`): the
    Hive Metastore's where its Hive settings reach the Hive Metastore ``url`` by Kerberos, and HDFS's where its
    HDFS settings reach the namenode of ``warehouse`` (or, for a Hive Metastore, of the default filesystem) by
    Kerberos; neither where the settings name one already."""
    if "delegation_token" not in dict(job.hdfs):
        token = hdfs_job_token(warehouse, url)
        if token is not None:
            job = dataclasses.replace(job, hdfs=_with(job.hdfs, "delegation_token", token))
    token = job_token(url, job.hive)
    if token is not None:
        job = dataclasses.replace(job, hive=_with(job.hive, "delegation_token", token))
    return job


def _with(pairs: tuple[tuple[str, Any], ...], key: str, value: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted({**dict(pairs), key: value}.items()))


@dataclass(frozen=True)
class ResolvedTable:
    """A resolved table, shippable to tasks: the definition without its metastore client, and the job's
    settings."""

    url: str
    warehouse: str
    table: TableDefinition
    job: JobSettings = field(default_factory=JobSettings)

    def in_worker(self) -> None:
        """Ready a Spark Python worker for this job (:meth:`JobSettings.in_worker`)."""
        self.job.in_worker()

    @property
    def name(self) -> str:
        return self.table.full_name

    def metastore(self) -> Metastore:
        return client(self.url, self.warehouse, self.job.hive)


def resolve(
    options: Mapping[str, str], *, writable: bool = False, job: JobSettings | None = None
) -> ResolvedTable:
    """The table ``options`` name, read in a planner worker after the job's settings are set in it."""
    job = (job or JobSettings()).with_options(options)
    job.apply()
    url, warehouse = metastore_location({**dict(job.defaults), **options})
    # Kerberos, the metastore or the warehouse named only by the options: the tokens are this planner's (a
    # Python worker on the driver's machine, which renews them while it lives)
    job = with_tokens(job, url, warehouse)
    ms = client(url, warehouse, job.hive)
    table = ms.table(table_name(options))
    if writable and not table.is_transactional:
        raise InvalidTable(table.db, table.name, f"{table.full_name} is not an Acid table")
    return ResolvedTable(url, warehouse, table.definition(), job)


def flag(options: Mapping[str, str], name: str, default: bool = False) -> bool:
    value = {k.lower(): v for k, v in options.items()}.get(name.lower())
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes")
