"""The house rules of the package's layout: each package imports only from its own layer or the layers below,
pyspark only under ``acidstream/spark/`` (and the command line starts without it), only
``acidstream/runtime.py`` changes process-wide settings (signal handlers also the command line), and nothing
forks the process it runs in (a library's caller runs threads: only the merge workers' fork server forks)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import acidstream

PACKAGE = Path(acidstream.__file__).parent

#: Lower numbers are lower layers (docs/design.md). The modules at the top of the package are used everywhere.
LAYERS = {
    "errors": 0,
    "faults": 0,
    "runtime": 0,
    "storage": 0,
    "webhdfs": 0,
    "kerberos": 0,
    "s3objects": 0,
    "acid": 1,
    "metastore": 2,
    "read": 3,
    "streaming": 3,
    "txn": 3,
    "mutate": 4,
    "compactor": 4,
    "repl": 4,
    "sql": 4,
    "catalog": 5,
    "spark": 6,
    "cli": 7,
}
#: Known upward imports, each with its reason; the test fails if one disappears, so the list stays true (none
#: left: mutations and SQL DML read through ``read.scan.TableScan`` and connect the metastore's façade).
UPWARD: dict[tuple[str, str], str] = {}
#: Calls that change the whole process: the interpreter, the C library, resource limits, the kernel's view of it.
PROCESS_WIDE = {
    "setswitchinterval",
    "setrecursionlimit",
    "setrlimit",
    "mallopt",
    "prctl",
    "umask",
    "setlocale",
    "putenv",
    "set_wakeup_fd",
    "setitimer",
    "siginterrupt",
}
#: Units that may install signal handlers (``signal.signal``): the command line owns its process.
SIGNAL_HANDLERS = {"runtime", "cli"}
#: Known process-wide changes outside runtime.py, each with its reason; the test fails if one disappears.
PROCESS_WIDE_ELSEWHERE = {
    (
        "spark/session.py",
        "os.environ",
    ): "Spark's Python workers must run this interpreter: PYSPARK_PYTHON and "
    "PYSPARK_DRIVER_PYTHON are set (if unset) in the environment the JVM and its workers inherit",
    (
        "metastore/probe.py",
        "os.environ",
    ): "a forked merge worker takes its merging process's KRB5CCNAME and KRB5_CONFIG (the fork server's, "
    "set when it started, may name no ticket): Kerberos reads them from the environment only",
}
#: What forks the calling process: os.fork and multiprocessing's processes (which fork by default on Linux).
FORKS = {"fork", "forkpty", "Process", "Pool", "ProcessPoolExecutor"}
#: The one module that forks: the merge workers' server, a process of acidstream's own that runs no thread.
FORKING_MODULES = {"mutate/forkserver.py"}


def _unit(module: str) -> str:
    """The package (or top-level module) of ``acidstream.x.y``; ``acidstream`` itself for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "acidstream"


def _sources() -> list[tuple[str, Path, ast.AST]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        unit = rel.parts[0].removesuffix(".py") if rel.parts[0] != "__init__.py" else "acidstream"
        out.append((unit, path, ast.parse(path.read_text(), str(path))))
    return out


def _imported(tree: ast.AST) -> list[tuple[str, int]]:
    """Every module an ``import`` names, anywhere in the file (type-only and deferred imports included)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "acidstream":
                found += [(f"acidstream.{a.name}", node.lineno) for a in node.names]
            else:
                found.append((node.module, node.lineno))
    return found


def test_packages_import_only_their_own_layer_or_below() -> None:
    upward: dict[tuple[str, str], list[str]] = {}
    for unit, path, tree in _sources():
        if unit == "acidstream":
            continue
        for module, line in _imported(tree):
            target = _unit(module) if module.startswith("acidstream.") else None
            if target is None or target == unit or target == "acidstream":
                continue
            assert unit in LAYERS and target in LAYERS, f"{path}:{line}: {unit} or {target} has no layer"
            if LAYERS[target] > LAYERS[unit]:
                upward.setdefault((unit, target), []).append(f"{path.relative_to(PACKAGE)}:{line}")
    assert set(upward) == set(UPWARD), {k: v for k, v in upward.items() if k not in UPWARD}


def _module_name(path: Path) -> str:
    """``acidstream.x.y`` for ``x/y.py`` (a package's ``__init__.py``: the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in the file (type-only and deferred imports
    included). ``from p import m`` of a module ``m`` imports ``p.m``; a package's own ``__init__`` run on the way
    to its modules is not an edge (a package that exports its modules' names lazily would otherwise loop)."""
    modules = {_module_name(path): path for _, path, _ in _sources()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module in modules and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in modules else node.module)
        edges.discard(name)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(cycles)


def test_no_import_loop_of_any_length() -> None:
    """A module never imports (at import time, deferred or for types alone) one that imports it back, however
    long the way round: each module can be read, tested and moved knowing only what is below it."""
    assert import_cycles(import_graph()) == []


def test_the_loop_check_finds_loops_through_deferred_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def _name(node: ast.AST) -> str | None:
    """The name an attribute or a bare name refers to (``signal`` of ``signal.signal``)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and _name(node.value) == "os"


def _process_wide(unit: str, tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each process-wide change in ``tree``: a call in :data:`PROCESS_WIDE`, a signal handler
    outside :data:`SIGNAL_HANDLERS`, a change of ``os.environ``."""
    found = []
    for node in ast.walk(tree):
        name = _name(node)
        if name in PROCESS_WIDE:
            found.append((node.lineno, name))  # type: ignore[attr-defined]
        if isinstance(node, ast.ImportFrom) and node.module in ("sys", "resource", "signal", "locale", "os"):
            found += [(node.lineno, a.name) for a in node.names if a.name in PROCESS_WIDE | {"signal"}]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "signal"
            and _name(node.func.value) == "signal"
            and unit not in SIGNAL_HANDLERS
        ):
            found.append((node.lineno, "signal.signal"))
        changed = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("setdefault", "update", "pop", "popitem", "clear")
            and _is_os_environ(node.func.value)
        ) or (
            isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete))
            and any(
                isinstance(t, ast.Subscript) and _is_os_environ(t.value)
                for t in (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target])
            )
        )
        if changed:
            found.append((node.lineno, "os.environ"))  # type: ignore[attr-defined]
    return found


def test_only_runtime_changes_process_wide_settings() -> None:
    offenders, elsewhere = [], set()
    for unit, path, tree in _sources():
        rel = str(path.relative_to(PACKAGE))
        for line, what in _process_wide(unit, tree) if unit != "runtime" else []:
            if (rel, what) in PROCESS_WIDE_ELSEWHERE:
                elsewhere.add((rel, what))
            else:
                offenders.append(f"{rel}:{line} {what}")
        if unit in ("acid", "metastore"):
            offenders += [
                f"{rel}:{line} imports {module}"
                for module, line in _imported(tree)
                if module.split(".")[0] in ("resource", "ctypes")
            ]
    assert offenders == []
    assert elsewhere == set(PROCESS_WIDE_ELSEWHERE)
    runtime = ast.parse((PACKAGE / "runtime.py").read_text())
    assert {what for _, what in _process_wide("elsewhere", runtime)} >= {
        "setswitchinterval",
        "setrlimit",
        "mallopt",
        "prctl",
    }  # the check sees them


def test_the_check_sees_each_kind_of_process_wide_change() -> None:
    code = """
import signal, sys, os
from resource import setrlimit
sys.setswitchinterval(1)
signal.signal(signal.SIGINT, None)
os.environ["A"] = "1"
os.environ.setdefault("B", "2")
del os.environ["A"]
libc.prctl(1, 9)
"""
    assert sorted(what for _, what in _process_wide("mutate", ast.parse(code))) == sorted(
        ["setrlimit", "setswitchinterval", "signal.signal", "prctl", *["os.environ"] * 3]
    )
    assert _process_wide("cli", ast.parse("import signal\nsignal.signal(2, None)")) == []


def _forks(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each use of :data:`FORKS` from ``os``, ``multiprocessing`` or ``concurrent.futures``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FORKS:
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "os",
            "multiprocessing",
            "concurrent",
        ):
            found += [(node.lineno, a.name) for a in node.names if a.name in FORKS]
    return found


def test_nothing_forks_the_calling_process() -> None:
    """A fork of a threaded process keeps every lock another thread held at the fork held in the child."""
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line} {what}"
        for _, path, tree in _sources()
        if str(path.relative_to(PACKAGE)) not in FORKING_MODULES
        for line, what in _forks(tree)
    ]
    assert offenders == []
    for module in FORKING_MODULES:
        assert _forks(ast.parse((PACKAGE / module).read_text()))  # the check sees what is there
    sample = "import os, multiprocessing\nfrom concurrent.futures import ProcessPoolExecutor\nos.fork()\n"
    assert sorted(what for _, what in _forks(ast.parse(sample + "multiprocessing.Process()"))) == [
        "ProcessPoolExecutor",
        "multiprocessing.Process",
        "os.fork",
    ]


def pyspark_imports(path: Path) -> list[int]:
    return [
        line
        for module, line in _imported(ast.parse(path.read_text(), str(path)))
        if module.split(".")[0] == "pyspark"
    ]


def test_only_the_spark_package_imports_pyspark() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "spark" and (lines := pyspark_imports(path))
    }
    assert offenders == {}
    assert pyspark_imports(PACKAGE / "spark" / "session.py")  # the check finds what is there


def test_the_command_line_starts_without_pyspark() -> None:
    code = "import sys, acidstream.cli; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
