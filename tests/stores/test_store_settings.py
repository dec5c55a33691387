"""The S3 server reached through ``acidstream.toml``'s ``[s3]`` table alone: each command, a process of its own
with no AWS variable in its environment, configures its stores from the file."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from acidstream.cli import cli
from support.deps import import_or_skip
from support.s3server import BUCKETS

#: The AWS settings the session's S3 server is otherwise found by (tests/support/s3server.py).
AWS_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


def test_the_command_line_reaches_s3_through_acidstream_toml_alone(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name)
    monkeypatch.delenv("ACIDSTREAM_WAREHOUSE", raising=False)
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    monkeypatch.chdir(tmp_path)
    warehouse = f"s3://{BUCKETS[0]}/{uuid.uuid4().hex[:12]}/wh"
    (tmp_path / "acidstream.toml").write_text(
        f'warehouse = "{warehouse}"\n'
        'metastore = "sqlite:///metastore.db"\n'
        "[s3]\n"
        f'endpoint_override = "{s3_endpoint}"\n'
        'region = "us-east-1"\n'
        'access_key = "acidstream"\n'
        'secret_key = "acidstream"\n'
    )

    def run(*args: str, stdin: str = "") -> str:
        done = subprocess.run(
            [sys.executable, "-m", "acidstream.cli", *args],
            input=stdin.encode(),
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, f"acidstream {' '.join(args)}:\n{done.stderr.decode()}"
        return done.stdout.decode()

    run("metastore", "init")
    run(
        "sql",
        "CREATE TABLE notes (id int, note string) CLUSTERED BY (id) INTO 2 BUCKETS STORED AS ORC "
        "TBLPROPERTIES ('transactional'='true')",
    )
    run("stream", "default.notes", "--records-per-txn", "2", stdin="1,one\n2,two\n3,three\n")
    # the settings apply however the metastore and warehouse were chosen (here by options)
    rows = run(
        "cat", "default.notes", "--metastore", f"sqlite:///{tmp_path}/metastore.db", "--warehouse", warehouse
    )
    assert sorted(rows.splitlines()) == ["1\tone", "2\ttwo", "3\tthree"]
    boto3 = import_or_skip("boto3")
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="acidstream",
        aws_secret_access_key="acidstream",
    )
    prefix = warehouse.removeprefix(f"s3://{BUCKETS[0]}/")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKETS[0], Prefix=prefix)["Contents"]]
    assert any("/notes/delta_" in key for key in keys), keys  # the table's files are in the bucket


def test_an_unknown_s3_setting_is_a_usage_error_naming_the_file_and_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acidstream.toml").write_text('[s3]\nendpoint = "http://127.0.0.1:9"\n')
    result = CliRunner().invoke(cli, ["show", "tables"])
    assert result.exit_code == 2
    assert (
        f"{tmp_path / 'acidstream.toml'}: unknown s3 setting(s) endpoint (known: endpoint_override"
        in result.stderr
    )
