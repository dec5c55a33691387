"""The examples of the README and of the guides in ``docs/`` run as written, in order, in a fresh directory, as
a new user would run them: the README's first, then each guide's in the order of :data:`GUIDES` (a guide's
examples go on from the README's, and may use what an earlier guide's made).

Blocks are told apart by what they hold: the two project commands (``scripts/main.sh`` has its own test, and
``scripts/test.sh`` is this suite) and ``source scripts/activate`` (this environment stands in for it: the
``acidstream`` and ``python`` it puts on PATH are this interpreter's) are not run; Python blocks run in a
fresh interpreter, shell blocks in ``bash -eu`` with ``acidstream`` on PATH (and the clone's ``scripts`` and
``interop`` linked into the directory, for the guides' "Try it locally" blocks, which start a server of their
own, use it and stop it), TOML blocks are read as an ``acidstream.toml``. Blocks needing Spark (they import ``acidstream.spark`` or ``pyspark``, in any form, or run
``spark-shell``) run in this process on the suite's one SparkSession, so only the test marked ``spark`` runs
them, and no other block starts a JVM; the other test runs the rest only where that one is not selected (a run
without Spark), not a second time. Both tests begin with the examples before the first Spark one: those run
once, and each test goes on from a copy of the directory they leave.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from acidstream.cli import cli
from acidstream.cli._options import read_config
from acidstream.storage import delete_locations
from support.deps import import_or_skip
from support.hdfscluster import MiniHdfs

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The guides whose examples run, in the order they run after the README's.
GUIDES = tuple(
    ROOT / "docs" / f"{name}.md"
    for name in (
        "streaming",
        "reading",
        "mutation",
        "compaction",
        "replication",
        "spark",
        "cli",
        "s3",
        "hive",
        "hdfs",
    )
)
#: The languages of blocks that are examples (others, such as ``text``, show files or output).
EXAMPLE_LANGS = ("python", "bash", "toml")
#: The bucket the README's S3 example writes its warehouse to.
S3_BUCKET = "acidstream-demo"
#: The directory the README's HDFS example writes its warehouse to, on the namenode of ``$HADOOP_CONF_DIR``.
HDFS_DEMO = "hdfs:///acidstream-demo"
#: The variable the README's Hive example reads its metastore's URI from.
HIVE_URIS = "HIVE_METASTORE_URIS"
#: The variables the README's secured Hive example reads its metastores' URIs, principal and keytab from.
SECURED_HIVE = ("HIVE_SECURED_METASTORE_URIS", "KERBEROS_PRINCIPAL", "KERBEROS_KEYTAB")
PROJECT_COMMANDS = ("bash scripts/main.sh", "bash scripts/test.sh")
#: What a block that starts a server of its own to try (a guide's "Try it locally") runs; such a block stops it
#: again, and runs in a test of its own (it needs nothing earlier blocks made).
SERVERS = ("scripts/hive.sh start", "scripts/hdfs.sh start", "moto.server")
#: The clone's directories a guide's "Try it locally" runs scripts from: linked into the examples' directory.
CLONE_DIRS = ("scripts", "interop")
ACTIVATE = "source scripts/activate"


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    path: Path = README

    @property
    def kind(self) -> str:
        if any(command in self.code for command in PROJECT_COMMANDS):
            return "project commands"
        if ACTIVATE in self.code:
            return "activate"
        if self.lang == "bash" and any(server in self.code for server in SERVERS):
            return "bash server"
        return f"{self.lang}{' spark' if self.needs_spark else ''}"

    @property
    def needs_spark(self) -> bool:
        """A Python block importing ``acidstream.spark`` or ``pyspark`` in any form, any other block naming
        ``acidstream.spark`` or running ``spark-shell``."""
        if self.lang != "python":
            return "acidstream.spark" in self.code or "spark-shell" in self.code
        modules: set[str] = set()
        for node in ast.walk(ast.parse(self.code)):
            if isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module)
                modules.update(f"{node.module}.{alias.name}" for alias in node.names)
        return any(f"{module}.".startswith(("pyspark.", "acidstream.spark.")) for module in modules)

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.kind})"


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one file, in order."""
    text = path.read_text()
    return [
        Block(match.group(1), match.group(2), text[: match.start()].count("\n") + 1, path)
        for match in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)
    ]


def example_blocks() -> list[Block]:
    """The README's example blocks, then each guide's, in the order they run (a guide's XML shows a file)."""
    return [block for path in (README, *GUIDES) for block in blocks_of(path) if block.lang in EXAMPLE_LANGS]


def before_spark(blocks: list[Block]) -> int:
    """How many blocks come before the first one needing Spark: both example tests begin with them."""
    return next((i for i, block in enumerate(blocks) if block.kind.endswith("spark")), len(blocks))


def as_a_new_user(monkeypatch: pytest.MonkeyPatch, home: Path) -> Path:
    """``home/work`` as the current directory, no metastore settings in the environment, and ``acidstream``
    and ``python`` on PATH (shims in ``home/bin``, made on first use). Returns the work directory."""
    bin_dir = home / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for name, command in (
            ("acidstream", f'"{sys.executable}" -m acidstream.cli'),
            ("python", f'"{sys.executable}"'),
        ):
            shim = bin_dir / name
            shim.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
            shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("COLUMNS", "120")
    for name in ("ACIDSTREAM_METASTORE", "ACIDSTREAM_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    work = home / "work"
    work.mkdir(exist_ok=True)
    for name in CLONE_DIRS:  # the guides' "in the clone's directory"
        if not (work / name).exists():
            (work / name).symlink_to(ROOT / name)
    monkeypatch.chdir(work)
    return work


@pytest.fixture(scope="module")
def examples_before_spark(
    tmp_path_factory: pytest.TempPathFactory, hive4_metastore: str, hive4_kerberos_metastore: str, kdc: Any
) -> Path:
    """The examples before the first Spark one, run once in a fresh directory, which is kept as a copy for
    each example test to start from (the same path: a metastore records absolute locations). The Hive example
    meets the suite's Hive 4 metastore through the variable it reads; the secured one the suite's kerberized
    metastore, after a closed port in its list, with the test KDC's keytab of alice."""
    home = tmp_path_factory.mktemp("readme")
    blocks = example_blocks()
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv(HIVE_URIS, hive4_metastore)
        secured(monkeypatch, hive4_kerberos_metastore, kdc)
        work = as_a_new_user(monkeypatch, home)
        for block in blocks[: before_spark(blocks)]:
            run_block(block, work)
    shutil.copytree(work, home / "after", symlinks=True)
    return home


@pytest.fixture
def workspace(
    examples_before_spark: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_endpoint: str,
    hive4_metastore: str,
    hive4_kerberos_metastore: str,
    kdc: Any,
    hdfs_namenode: MiniHdfs,
) -> Path:
    """The directory as the examples before the first Spark one left it, with a new user's environment (and
    the S3 server the object-store example writes to, through the AWS environment variables, with that example's
    bucket empty: an earlier test's run of it left files its new metastore does not know; likewise the HDFS
    example's directory on the session's namenode, which ``$HADOOP_CONF_DIR`` names)."""
    home = examples_before_spark
    empty_bucket(s3_endpoint, S3_BUCKET)  # the S3 example's metastore is in the work directory, new each test
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_namenode.conf_dir))
    delete_locations([HDFS_DEMO])
    shutil.rmtree(home / "work")
    shutil.copytree(home / "after", home / "work", symlinks=True)
    monkeypatch.setenv(HIVE_URIS, hive4_metastore)
    secured(monkeypatch, hive4_kerberos_metastore, kdc)
    return as_a_new_user(monkeypatch, home)


def secured(monkeypatch: pytest.MonkeyPatch, uri: str, kdc: Any) -> None:
    """The secured Hive example's variables: a closed loopback port, then the kerberized metastore; alice."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    values = (f"thrift://127.0.0.1:{port},{uri}", "alice", str(kdc.dir / "alice.keytab"))
    for name, value in zip(SECURED_HIVE, values, strict=True):
        monkeypatch.setenv(name, value)


def empty_bucket(endpoint: str, bucket: str) -> None:
    """Delete every object of a bucket of the suite's S3 server."""
    boto3 = import_or_skip("boto3")
    boto3.resource("s3", endpoint_url=endpoint).Bucket(bucket).objects.all().delete()


def run_block(block: Block, work: Path) -> None:
    kind = block.kind
    if kind in ("project commands", "activate"):
        return
    if kind == "toml":
        path = work / "example-acidstream.toml"
        path.write_text(block.code)
        read_config(str(path))  # raises on a key or value acidstream.toml does not take
        return
    if kind == "python":
        done = subprocess.run([sys.executable, "-c", block.code], cwd=work, capture_output=True, timeout=300)
    elif kind in ("bash", "bash server"):
        done = subprocess.run(["bash", "-eu", "-c", block.code], cwd=work, capture_output=True, timeout=600)
    elif kind == "python spark":
        exec(compile(block.code, str(block), "exec"), {"__name__": "__readme__"})
        return
    elif kind == "bash spark":
        for line in block.code.splitlines():
            args = shlex.split(line, comments=True)
            if not args:
                continue
            assert args[0] == "acidstream", f"{block}: only acidstream commands run in-process: {line}"
            result = CliRunner().invoke(cli, args[1:], catch_exceptions=False)
            assert result.exit_code == 0, f"{block}: {line}\n{result.output}"
        return
    else:
        raise AssertionError(f"{block}: no way to run a {kind!r} block")
    assert done.returncode == 0, f"{block} failed:\n{done.stdout.decode()}\n{done.stderr.decode()}"


def test_every_block_is_run_or_stood_in_for() -> None:
    blocks = example_blocks()
    kinds = [b.kind for b in blocks]
    assert set(kinds) <= {
        "project commands",
        "activate",
        "toml",
        "python",
        "bash",
        "bash server",
        "python spark",
        "bash spark",
    }
    assert {"python", "bash", "python spark", "bash spark"} <= set(kinds)
    assert not {"project commands", "activate"} & {b.kind for b in blocks if b.path != README}  # the README's
    for block in blocks:
        if block.kind == "project commands":
            lines = [shlex.split(line, comments=True) for line in block.code.splitlines()]
            assert [" ".join(words) for words in lines if words] == list(PROJECT_COMMANDS), block
        if block.kind == "activate":
            assert [shlex.join(shlex.split(line, comments=True)) for line in block.code.splitlines()] == [
                ACTIVATE
            ]


def test_every_guide_with_examples_is_run() -> None:
    """A guide in ``docs/`` with example blocks is one of :data:`GUIDES`, so its examples run."""
    with_examples = {
        path for path in (ROOT / "docs").glob("*.md") if any(b.lang in EXAMPLE_LANGS for b in blocks_of(path))
    }
    assert with_examples <= set(GUIDES)
    assert all(path.exists() for path in GUIDES)


@pytest.mark.parametrize(
    "code",
    [
        "import pyspark.sql\n",
        "from pyspark import SparkContext\n",
        "import acidstream.spark\n",
        "from acidstream.spark import session\n",
        "from acidstream import Metastore, spark as acid\n",
    ],
)
def test_a_python_block_importing_spark_in_any_form_needs_spark(code: str) -> None:
    assert Block("python", code, 1).kind == "python spark"
    assert Block("python", code.replace("spark", "repl"), 1).kind == "python"


def test_examples_run_as_written(request: pytest.FixtureRequest) -> None:
    """Every example that needs no Spark, the README's, then the guides' (Spark's are the other test's, the
    servers to try have their own): for a run without Spark (``-m 'not spark'``). Where the Spark test is
    selected too it runs these very blocks, in order among Spark's, so this one does not run them again."""
    if any(item.name == test_examples_run_as_written_with_spark.__name__ for item in request.session.items):
        pytest.skip("test_examples_run_as_written_with_spark runs these examples too, in order among Spark's")
    workspace: Path = request.getfixturevalue("workspace")
    blocks = example_blocks()
    for block in blocks[before_spark(blocks) :]:
        if not block.kind.endswith(("spark", "server")):
            run_block(block, workspace)
    assert (workspace / "bad.jsonl").read_text().count("\n") == 1  # the dead-letter example wrote its record


@pytest.mark.slow
def test_examples_run_as_written_with_spark(spark: object, workspace: Path) -> None:
    """Every example, Spark's included, README first, then the guides' (but the servers to try, below)."""
    blocks = example_blocks()
    for block in blocks[before_spark(blocks) :]:
        if block.kind != "bash server":
            run_block(block, workspace)
    assert (workspace / "bad.jsonl").read_text().count("\n") == 1  # the dead-letter example wrote its record


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in example_blocks() if b.kind == "bash server"], ids=str)
def test_a_guides_server_to_try_runs_as_written(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """A guide's "Try it locally": it starts its own server, uses it and stops it, needing nothing the other
    examples made; each in a directory of its own (Hive's jars and Hadoop's fetched as the suite's are, or
    skipped as theirs are)."""
    if "scripts/hive.sh" in block.code:
        request.getfixturevalue("hive4_home")
    if "scripts/hdfs.sh" in block.code:
        request.getfixturevalue("hdfs_namenode")
    run_block(block, as_a_new_user(monkeypatch, tmp_path))


def test_activate_puts_acidstream_and_python_on_path() -> None:
    venv = ROOT / ".venv"
    if not (venv / "bin" / "acidstream").exists():
        pytest.skip(f"no installed environment at {venv} (bash scripts/test.sh makes one)")
    script = (
        f"cd /; {ACTIVATE.replace('scripts/', str(ROOT / 'scripts') + '/')} && command -v acidstream python"
    )
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, timeout=600, env={"PATH": "/usr/bin:/bin"}
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == [str(venv / "bin" / "acidstream"), str(venv / "bin" / "python")]
