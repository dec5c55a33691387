"""Spark's Python workers without a Kerberos ticket, as executors on other machines are, beside a kerberized HDFS:
the shared session's worker environment set for it, and restored afterwards; and a driver with one."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


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


def driver_with_ticket(monkeypatch: pytest.MonkeyPatch, cluster: Any, kdc: Any, ccache: Path) -> str:
    """This process as a job's driver on the kerberized HDFS ``cluster`` (its client configuration in
    ``$HADOOP_CONF_DIR``) with alice's ticket in ``ccache``; a new warehouse's location on the cluster."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(cluster.conf_dir))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    kdc.kinit("alice", kdc.dir / "alice.keytab", ccache)
    return f"{cluster.uri}/{uuid.uuid4().hex[:12]}/wh"
