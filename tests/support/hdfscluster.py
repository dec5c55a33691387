"""HDFS for the tests: Hadoop's MiniDFSCluster (one NameNode, one DataNode, WebHDFS on) started by
``scripts/hdfs.sh``, found by acidstream as Hadoop's clients find a cluster: through a client configuration
directory, whose ``core-site.xml`` (``fs.defaultFS``) and ``hdfs-site.xml`` (``dfs.namenode.http-address``)
:func:`hdfs_cluster` writes. Tests point ``$HADOOP_CONF_DIR`` at it for as long as they need it, not the whole
session: a Spark JVM started meanwhile would take the cluster for its default filesystem.

A kerberized cluster (``hdfs_cluster(state, kdc_dir=...)``) takes Kerberos for RPC and SPNEGO for WebHDFS from
the KDC of ``tests/support/kdc.py``; its URI names ``localhost`` (the host of its service principals)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HDFS_SH = Path(__file__).resolve().parents[2] / "scripts" / "hdfs.sh"


class HdfsUnavailable(RuntimeError):
    """The cluster could not be fetched or started (no Java or Maven, a build or start failure)."""


def hdfs_sh(*args: str) -> str:
    """Runs ``scripts/hdfs.sh`` and returns its last line of output (a path or a URI)."""
    try:
        done = subprocess.run(
            ["bash", str(HDFS_SH), *args], capture_output=True, text=True, check=False, timeout=900
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HdfsUnavailable(f"scripts/hdfs.sh {' '.join(args)}: {exc}") from exc
    if done.returncode != 0:
        raise HdfsUnavailable(f"scripts/hdfs.sh {' '.join(args)} failed:\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class MiniHdfs:
    """A running cluster: its ``hdfs://`` URI, WebHDFS port, the launcher's control port, and a Hadoop client
    configuration directory naming it."""

    uri: str
    webhdfs_port: int
    control_port: int
    conf_dir: Path
    #: The NameNode's Kerberos principal on a kerberized cluster (``hdfs/localhost@REALM``), else None.
    principal: str | None = None

    @property
    def webhdfs_url(self) -> str:
        """``webhdfs://`` of the cluster's root, on the host its URI names."""
        return f"webhdfs://{self.uri.split('://', 1)[1].rsplit(':', 1)[0]}:{self.webhdfs_port}"

    def stop_datanode(self) -> None:
        """Stop the only DataNode: writes fail until :meth:`restart_datanode`."""
        self._control("stop-datanode")

    def restart_datanode(self) -> None:
        """Start the stopped DataNode on its storage again and wait until the NameNode has it back."""
        self._control("restart-datanode")

    def _control(self, command: str) -> None:
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=120) as conn:
            conn.sendall(f"{command}\n".encode())
            answer = conn.makefile().readline().strip()
        if answer != "ok":
            raise HdfsUnavailable(f"{command}: {answer}")


def _site_xml(properties: dict[str, str]) -> str:
    rows = "".join(
        f"  <property><name>{k}</name><value>{v}</value></property>\n" for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n'


@contextmanager
def hdfs_cluster(state: Path, *, kdc_dir: Path | None = None) -> Iterator[MiniHdfs]:
    """Fetch (cached) and start a cluster with its storage and client configuration in ``state``, kerberized
    with the KDC in ``kdc_dir`` when given. Raises :class:`HdfsUnavailable` when it cannot start."""
    hdfs_sh("fetch")
    uri = hdfs_sh("start", str(state), *(("--kerberos", str(kdc_dir)) if kdc_dir else ()))
    try:
        _, http, control = (state / "ports").read_text().split()
        host = uri.split("://", 1)[1].rsplit(":", 1)[0]
        principal = (state / "principal").read_text().strip() if kdc_dir else None
        core, site = {"fs.defaultFS": uri}, {"dfs.namenode.http-address": f"{host}:{http}"}
        if principal:
            core["hadoop.security.authentication"] = "kerberos"
            site["dfs.namenode.kerberos.principal"] = principal
        conf = state / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "core-site.xml").write_text(_site_xml(core))
        (conf / "hdfs-site.xml").write_text(_site_xml(site))
        yield MiniHdfs(uri, int(http), int(control), conf, principal)
    finally:
        hdfs_sh("stop", str(state))
