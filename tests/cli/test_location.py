"""Where commands find the metastore: flags, environment, the nearest acidstream.toml, ./wh; reading never
creates one, and a command that finds nothing says where it looked."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect

from acidstream.cli import cli
from acidstream.cli._options import CONFIG_FILE, LOCATION_RULE, SLOW_CONNECT, Location, _said_when_slow

READ_ONLY = [
    ["show", "databases"],
    ["show", "tables", "testing"],
    ["show", "partitions", "testing.alerts"],
    ["show", "txns"],
    ["show", "locks"],
    ["show", "compactions"],
    ["sql", "SHOW DATABASES"],
    ["sql", "CREATE DATABASE testing"],
    ["cat", "testing.alerts"],
    ["stream", "testing.alerts"],
    ["housekeeper", "--once"],
]
NO_ENV = {"ACIDSTREAM_METASTORE": "", "ACIDSTREAM_WAREHOUSE": ""}


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={**NO_ENV, **(env or {})})
    return result.exit_code, result.stdout, result.stderr


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a))
def test_commands_without_a_metastore_create_nothing_and_say_where_they_looked(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke(*args)
    assert code == 4, err
    assert listing(tmp_path) == []
    assert f"no metastore at sqlite:///{tmp_path / 'wh' / 'metastore.db'}" in err
    assert "acidstream metastore init" in err
    assert f"(from the default: no {CONFIG_FILE} in {tmp_path} or a parent)" in err


def test_an_empty_database_is_not_made_a_metastore_by_reading(metastore_url: str, tmp_path: Path) -> None:
    if metastore_url.startswith("sqlite:///"):
        Path(metastore_url.removeprefix("sqlite:///")).touch()  # an empty file, as sqlite3 would leave
    code, _, err = invoke("show", "databases", "--metastore", metastore_url, "--warehouse", str(tmp_path))
    assert (
        code == 4
        and "the database has no acidstream schema" in err
        and "(from --metastore and --warehouse)" in err
    )
    engine = create_engine(metastore_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_init_writes_acidstream_toml_found_from_below(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = invoke("metastore", "init")
    assert code == 0 and f"wrote {tmp_path / CONFIG_FILE}" in out
    assert 'warehouse = "wh"' in (tmp_path / CONFIG_FILE).read_text()
    assert invoke("sql", "CREATE DATABASE testing")[0] == 0
    below = tmp_path / "a" / "b"
    below.mkdir(parents=True)
    monkeypatch.chdir(below)
    assert invoke("show", "databases") == (0, "default\ntesting\n", "")
    assert listing(below) == []
    code, out, _ = invoke("metastore", "init")  # found upward: nothing new written
    assert code == 0 and "wrote" not in out and not (below / CONFIG_FILE).exists()


def test_toml_paths_are_relative_to_the_file_and_flags_and_env_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    other = tmp_path / "other"
    project.mkdir()
    monkeypatch.chdir(tmp_path)
    for wh in (project / "data", other):
        assert invoke("metastore", "init", "--no-config", "--warehouse", str(wh))[0] == 0
        assert invoke("sql", f"CREATE DATABASE in_{wh.name}", "--warehouse", str(wh))[0] == 0
    assert set(os.listdir(tmp_path)) == {"project", "other"}  # --no-config: no acidstream.toml written
    (project / CONFIG_FILE).write_text('warehouse = "data"\nmetastore = "sqlite:///data/metastore.db"\n')
    monkeypatch.chdir(project)
    assert invoke("show", "databases")[1] == "default\nin_data\n"
    assert invoke("show", "databases", "--warehouse", str(other))[1] == "default\nin_other\n"
    env = {"ACIDSTREAM_WAREHOUSE": str(other)}
    assert invoke("show", "databases", env=env)[1] == "default\nin_other\n"
    assert invoke("show", "databases", "--warehouse", "data", env=env)[1] == "default\nin_data\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('warehous = "wh"\n', "unknown key(s) warehous"),
        ("warehouse = 3\n", "warehouse must be a non-empty string"),
        ("warehouse = \n", "Invalid value"),
    ],
)
def test_a_bad_acidstream_toml_is_a_usage_error_naming_it(
    text: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / CONFIG_FILE).write_text(text)
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke("show", "databases")
    assert code == 2 and f"{tmp_path / CONFIG_FILE}: " in err and message in err


def test_the_commands_said_to_create_a_metastore_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`acidstream --help` and the command line's guide name the same commands, and repl load / repl sync create
    the replica."""
    said = "Only `metastore init`, `main-job` and, on the replica's side, `repl load` and `repl sync` create"
    guide = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert said in " ".join(guide.split()) and said in " ".join(LOCATION_RULE.split())
    monkeypatch.chdir(tmp_path)
    source = f"sqlite:///{tmp_path / 'src' / 'metastore.db'}"
    assert invoke("metastore", "init", "--metastore", source, "--warehouse", "src", "--no-config")[0] == 0
    assert invoke("repl", "dump", "--metastore", source, "--warehouse", "src", "--to", "dumps")[0] == 0
    code, _, err = invoke("repl", "load", "--warehouse", "loaded", "dumps")
    assert code == 0 and (tmp_path / "loaded" / "metastore.db").is_file(), err
    code, _, err = invoke(
        "repl", "sync", source, f"sqlite:///{tmp_path / 'synced.db'}", "--target-warehouse", "synced"
    )
    assert code == 0 and (tmp_path / "synced.db").is_file(), err


def test_an_unreachable_metastore_is_said_to_be_waited_for(tmp_path: Path) -> None:
    """Connecting retries until the wait timeout (seconds): the command says at once what it waits for."""
    url = "postgresql://acid:secret@127.0.0.1:1/none"  # port 1: refused, and retried
    proc = subprocess.Popen(
        [sys.executable, "-m", "acidstream.cli", "show", "databases", "--metastore", url],
        cwd=tmp_path,
        env={**os.environ, **NO_ENV},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    started = time.monotonic()
    first = proc.stderr.readline()
    waited = time.monotonic() - started
    still_waiting = proc.poll() is None
    proc.terminate()
    proc.communicate(timeout=60)
    assert first == "waiting for the metastore at postgresql://acid:***@127.0.0.1:1/none to answer...\n"
    assert still_waiting and waited < 10
    location = Location(url, str(tmp_path), "--metastore")
    assert "secret" not in location.describe() and "acid:***@127.0.0.1:1" in location.describe()


def test_metastore_and_warehouse_go_before_the_command_or_after_it(tmp_path: Path) -> None:
    """``acidstream --metastore URL show tables`` as ``acidstream show tables --metastore URL``; after the
    command wins, and a flag before it wins over the environment."""
    here, there = tmp_path / "here", tmp_path / "there"
    for wh in (here, there):
        assert invoke("metastore", "init", "--no-config", "--warehouse", str(wh))[0] == 0
    assert invoke("--warehouse", str(here), "sql", "CREATE DATABASE only_here")[0] == 0
    url = f"sqlite:///{here / 'metastore.db'}"
    assert invoke("--metastore", url, "show", "databases")[1] == "default\nonly_here\n"
    assert invoke("--warehouse", str(here), "show", "databases")[1] == "default\nonly_here\n"
    assert invoke("--warehouse", str(here), "show", "databases", "--warehouse", str(there))[1] == "default\n"
    env = {"ACIDSTREAM_WAREHOUSE": str(there)}
    assert invoke("--warehouse", str(here), "show", "databases", env=env)[1] == "default\nonly_here\n"
    code, _, err = invoke("--metastore", f"sqlite:///{tmp_path / 'none.db'}", "show", "databases")
    assert code == 4 and f"looked in: metastore sqlite:///{tmp_path / 'none.db'}" in err
    assert "(from --metastore)" in err


@pytest.mark.parametrize("url", ["X", "mysql://user@host/db", "not a url"])
def test_a_url_naming_no_metastore_lists_every_kind(url: str) -> None:
    code, _, err = invoke("--metastore", url, "show", "tables")
    assert code == 2 and f"unsupported metastore URL {url!r}" in err
    assert "sqlite:///path, postgresql://user@host/db or thrift://host:9083" in err


def test_a_sqlite_file_is_never_said_to_be_waited_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Opening a SQLite file waits for no server: however long the machine's load makes it take, nothing is
    said (a server's URL is, as above)."""
    with _said_when_slow(f"sqlite:///{tmp_path / 'metastore.db'}"):
        time.sleep(SLOW_CONNECT + 0.5)
    with _said_when_slow("postgresql://127.0.0.1:1/none"):
        time.sleep(SLOW_CONNECT + 0.5)
    assert (
        capsys.readouterr().err == "waiting for the metastore at postgresql://127.0.0.1:1/none to answer...\n"
    )
