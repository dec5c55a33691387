"""The Hive Metastore's settings (Kerberos, the order of a list of metastores) everywhere they are taken: the
command line's global options over ``acidstream.toml``'s ``[hive]``, the Spark configuration's
``spark.acidstream.hive.*`` and the data source's options, on a kerberized Hive 4 metastore."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore
from acidstream.errors import MetastoreUrlError
from acidstream.spark.options import job_settings
from support.deps import import_or_skip

pytestmark = pytest.mark.hive4

import_or_skip("gssapi", reason="the kerberos extra (python-gssapi) is not installed")
import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acidstream.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_the_command_lines_options_win_over_acidstream_toml(
    hive4_kerberos_metastore: str, kdc: Any, no_ticket: Path, tmp_path: Path
) -> None:
    """``[hive] kerberos = true`` with no ticket fails (exit 8); ``--kerberos-principal`` and a keytab relative to
    the current directory, before the command, authenticate; ``--no-kerberos`` turns the file's Kerberos off."""
    shutil.copy(kdc.dir / "alice.keytab", tmp_path / "alice.keytab")
    (tmp_path / "acidstream.toml").write_text(
        f'metastore = "{hive4_kerberos_metastore}"\n\n[hive]\nkerberos = true\n'
    )
    assert cli("show", "databases", cwd=tmp_path).returncode == 8
    flags = [
        "--kerberos-principal",
        "alice",
        "--kerberos-keytab",
        "alice.keytab",
        "--kerberos-qop",
        "privacy",
    ]
    done = cli(*flags, "sql", "CREATE DATABASE IF NOT EXISTS secured_flags", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "secured_flags" in cli(*flags, "show", "databases", cwd=tmp_path).stdout
    done = cli("--no-kerberos", "show", "databases", cwd=tmp_path)
    assert done.returncode == 4 and "requires Kerberos" in done.stderr, done.stderr


def test_a_bad_kerberos_flag_is_a_usage_error(tmp_path: Path) -> None:
    done = cli(
        "--kerberos-qop", "secret", "--metastore", "thrift://127.0.0.1:1", "show", "databases", cwd=tmp_path
    )
    assert done.returncode != 0 and "unknown Kerberos QOP 'secret'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_spark_configuration_carries_hive_settings_without_showing_them() -> None:
    job = job_settings(
        {
            "spark.acidstream.hive.kerberos": "true",
            "spark.acidstream.hive.kerberos_principal": "alice@ACIDSTREAM.TEST",
            "spark.acidstream.hive.kerberos_keytab": "/etc/security/alice.keytab",
            "spark.acidstream.hive.uri_selection": "sequential",
        }
    )
    assert dict(job.hive) == {
        "kerberos": True,
        "kerberos_principal": "alice@ACIDSTREAM.TEST",
        "kerberos_keytab": "/etc/security/alice.keytab",
        "uri_selection": "sequential",
    }
    assert "alice" not in repr(job) and "keytab'" in repr(job)
    assert dict(job.with_options({"kerberos_qop": "privacy", "table": "t"}).hive)["kerberos_qop"] == "privacy"
    with pytest.raises(MetastoreUrlError, match=r"spark\.acidstream\.hive\.kerberos must be true or false"):
        job_settings({"spark.acidstream.hive.kerberos": "maybe"})


@pytest.fixture
def secured_table(hive4_kerberos_metastore: str, kdc: Any) -> str:
    with Metastore.connect(
        hive4_kerberos_metastore, kerberos_principal="alice", kerberos_keytab=str(kdc.dir / "alice.keytab")
    ) as ms:
        ms.execute("CREATE DATABASE IF NOT EXISTS secured")
        ms.execute(
            "CREATE TABLE IF NOT EXISTS secured.spark_options (id int, msg string) CLUSTERED BY (id) INTO 2 "
            "BUCKETS STORED AS ORC TBLPROPERTIES ('transactional'='true')"
        )
    return "secured.spark_options"


def test_the_data_sources_options_reach_a_kerberized_metastore(
    spark: Any, hive4_kerberos_metastore: str, kdc: Any, secured_table: str, no_ticket: Path
) -> None:
    """A batch write and a read with ``kerberos_principal``/``kerberos_keytab``/``kerberos_qop`` options: the
    planner and the tasks' workers log in from the keytab themselves."""
    from acidstream.spark import register

    # the Python workers' environment, as a cluster's has it; set before register(), which ships it with the format
    # (the JVM may predate the KDC: a worker inherits none of this process's later KRB5_CONFIG)
    spark.sparkContext.environment["KRB5_CONFIG"] = str(kdc.krb5_conf)
    acid_spark = register(spark)
    opts = {
        "metastore": hive4_kerberos_metastore,
        "kerberos_principal": "alice",
        "kerberos_keytab": str(kdc.dir / "alice.keytab"),
        "kerberos_qop": "privacy",
    }
    frame = acid_spark.range(0, 20, numPartitions=2).selectExpr("cast(id as int) id", "concat('m', id) msg")
    frame.write.format("acidstream").options(**opts).mode("append").save(secured_table)
    read = acid_spark.read.format("acidstream").options(**opts).load(secured_table)
    assert sorted(tuple(r) for r in read.collect()) == [(i, f"m{i}") for i in range(20)]
