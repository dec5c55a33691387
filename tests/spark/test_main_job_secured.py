"""``acidstream main-job`` on a kerberized Hive Metastore, its Kerberos settings only in ``acidstream.toml``'s
``[hive]`` (a keytab; no ticket cache): the command's own metastore calls log in with them, and they reach the
Spark job's configuration (``spark.acidstream.hive.*``), so its driver gets a delegation token for the Python
workers, which connect with it. Without them in the job, the sink's workers would connect without Kerberos."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acidstream.catalog import Metastore
from acidstream.spark.main_job import TABLE, JobConfig
from support.deps import import_or_skip

pytestmark = [pytest.mark.spark, pytest.mark.hive4]

import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")

ROWS, FILES = 60, 2


def test_the_job_conf_carries_the_hive_settings() -> None:
    cfg = JobConfig(
        rows=1,
        files=1,
        warehouse="/wh",
        metastore="thrift://h:9083",
        hive=(("kerberos", True), ("kerberos_qop", "privacy")),
    )
    assert cfg.spark_conf() == {
        "spark.acidstream.metastore": "thrift://h:9083",
        "spark.acidstream.warehouse": "/wh",
        "spark.acidstream.hive.kerberos": "true",
        "spark.acidstream.hive.kerberos_qop": "privacy",
    }


@pytest.mark.slow
def test_main_job_on_a_kerberized_metastore_with_hive_settings_from_acidstream_toml(
    hive4_kerberos_metastore: str, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'krb5cc'}")  # no ticket: the keytab only
    shutil.copy(kdc.dir / "alice.keytab", tmp_path / "alice.keytab")
    (tmp_path / "acidstream.toml").write_text(
        f'metastore = "{hive4_kerberos_metastore}"\nwarehouse = "wh"\n\n'
        '[hive]\nkerberos_principal = "alice"\nkerberos_keytab = "alice.keytab"\nkerberos_qop = "privacy"\n'
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "acidstream.cli",
            "main-job",
            "--rows",
            str(ROWS),
            "--files",
            str(FILES),
            "--reset",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    keytab = {"kerberos_principal": "alice", "kerberos_keytab": str(kdc.dir / "alice.keytab")}
    with Metastore.connect(hive4_kerberos_metastore, **keytab) as ms:
        ids = ms.table(TABLE).scan(columns=["id"]).to_arrow().column("id").to_pylist()
    assert sorted(ids) == list(range(ROWS))
