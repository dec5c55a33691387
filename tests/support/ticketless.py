"""Spark's Python workers without a Kerberos ticket, as executors on other machines are, beside a kerberized HDFS:
the shared session's worker environment set for it, and restored afterwards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def ticketless_workers(spark: Any, hadoop_conf_dir: Path, kdc: Any, ccache: Path) -> Callable[[], None]:
    """Make the Python workers ``spark`` starts from now on see the HDFS client configuration in
    ``hadoop_conf_dir``, ``kdc``'s realm, and the ticket cache ``ccache``, which holds no ticket; returns what
    restores the session's worker environment (call it before registering the data source again, which
    reads it)."""
    environment = spark.sparkContext.environment
    saved = dict(environment)
    environment.update(
        {
            "HADOOP_CONF_DIR": str(hadoop_conf_dir),
            "KRB5_CONFIG": str(kdc.krb5_conf),
            "KRB5CCNAME": f"FILE:{ccache}",  # no ticket there
        }
    )

    def restore() -> None:
        environment.clear()
        environment.update(saved)

    return restore
