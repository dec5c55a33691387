"""The process-wide settings: none unless asked for; then the switch interval lowered while any section runs
and restored by the last one out."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from acidstream import runtime
from acidstream.runtime import ShortSwitchInterval, each_in

DEFAULT = 0.005


@pytest.fixture(autouse=True)
def default_interval(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts at the default interval, with the settings asked for (as ``configure()`` does, without
    raising this process's limits)."""
    monkeypatch.setattr(runtime, "_configured", True)
    saved = sys.getswitchinterval()
    sys.setswitchinterval(DEFAULT)
    yield
    sys.setswitchinterval(saved)


def test_a_section_lowers_the_interval_and_restores_it_even_on_error() -> None:
    short = ShortSwitchInterval(1e-4)
    with short:
        assert sys.getswitchinterval() == pytest.approx(1e-4)
        with short:  # re-entrant
            assert sys.getswitchinterval() == pytest.approx(1e-4)
        assert sys.getswitchinterval() == pytest.approx(1e-4)
    assert sys.getswitchinterval() == DEFAULT
    with pytest.raises(RuntimeError), short:
        raise RuntimeError("boom")
    assert sys.getswitchinterval() == DEFAULT


@contextmanager
def section_in_another_thread(seconds: float) -> Iterator[None]:
    """Another thread stays inside a section until the block ends."""
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ShortSwitchInterval(seconds):
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(10)
        yield
    finally:
        release.set()
        thread.join(10)


def test_the_last_section_of_any_thread_restores() -> None:
    with ShortSwitchInterval(5e-5):
        with section_in_another_thread(1e-4):
            assert sys.getswitchinterval() == pytest.approx(5e-5)  # overlapping sections: the shortest holds
        assert sys.getswitchinterval() == pytest.approx(5e-5)
    assert sys.getswitchinterval() == DEFAULT
    with section_in_another_thread(1e-4):
        with ShortSwitchInterval(5e-5):
            pass
        assert sys.getswitchinterval() == pytest.approx(5e-5)  # the other thread is still inside
    assert sys.getswitchinterval() == DEFAULT


def test_a_shorter_interval_set_by_the_application_is_never_lengthened() -> None:
    sys.setswitchinterval(1e-5)
    with ShortSwitchInterval(1e-4):
        assert sys.getswitchinterval() == pytest.approx(1e-5)
    assert sys.getswitchinterval() == pytest.approx(1e-5)


def test_an_interval_changed_during_a_section_is_left_as_it_was_set() -> None:
    with ShortSwitchInterval(1e-4):
        sys.setswitchinterval(0.002)
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_none_leaves_the_interval_alone_and_bad_values_are_refused() -> None:
    with ShortSwitchInterval(None):
        assert sys.getswitchinterval() == DEFAULT
    with pytest.raises(ValueError, match="must be positive"):
        ShortSwitchInterval(0)


def test_each_in_produces_every_item_inside_the_section_and_yields_outside_it() -> None:
    produced: list[float] = []

    def items() -> Iterator[int]:
        for i in range(3):
            produced.append(sys.getswitchinterval())
            yield i

    consumed = []
    for item in each_in(ShortSwitchInterval(1e-4), items()):
        consumed.append((item, sys.getswitchinterval()))
    assert produced == [pytest.approx(1e-4)] * 3
    assert consumed == [(0, DEFAULT), (1, DEFAULT), (2, DEFAULT)]
    assert list(each_in(ShortSwitchInterval(1e-4), iter([]))) == []


def test_a_forked_child_starts_afresh_while_a_parent_thread_is_inside_a_section() -> None:
    """The child inherits the lowered interval and the count of a section that will never end in it."""
    with section_in_another_thread(1e-4):
        pid = os.fork()
        if pid == 0:  # the child: exit code 0 only if everything holds
            ok = sys.getswitchinterval() == DEFAULT
            with ShortSwitchInterval(1e-4):
                ok = ok and sys.getswitchinterval() == pytest.approx(1e-4)
            ok = ok and sys.getswitchinterval() == DEFAULT
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert sys.getswitchinterval() == pytest.approx(1e-4)  # the parent's section is still running
    assert sys.getswitchinterval() == DEFAULT


OPTED_OUT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
sys.setswitchinterval(0.005)
from acidstream.runtime import ShortSwitchInterval, prepare_process
prepare_process()
with ShortSwitchInterval(1e-4):
    inside = sys.getswitchinterval()
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], inside)
"""


@pytest.mark.parametrize(("opt_out", "changed"), [("0", False), ("1", True)])
def test_one_environment_variable_turns_every_process_wide_setting_off(opt_out: str, changed: bool) -> None:
    env = {**os.environ, "ACIDSTREAM_PROCESS_TUNING": opt_out}
    out = subprocess.run(
        [sys.executable, "-c", OPTED_OUT], env=env, capture_output=True, text=True, check=True
    )
    soft, inside = out.stdout.split()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert (int(soft) != 256) == (changed and hard != 256)
    assert (float(inside) != 0.005) is changed


def test_completed_future_holds_the_result_or_the_error_as_a_pool_would() -> None:
    from acidstream.runtime import completed_future

    assert completed_future(pow, 2, 10).result() == 1024

    def fail() -> None:
        raise KeyError("boom")

    future = completed_future(fail)
    assert future.done()
    with pytest.raises(KeyError, match="boom"):
        future.result()


UNASKED = """
import resource, sys, tempfile
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
sys.setswitchinterval(0.005)
import pandas as pd
from acidstream import Metastore
from acidstream.runtime import ShortSwitchInterval, configure
with tempfile.TemporaryDirectory() as wh, Metastore.connect(f"sqlite:///{wh}/ms.db", warehouse=wh) as ms:
    ms.execute("CREATE TABLE t (id int) TBLPROPERTIES ('transactional'='true')")
    ms.table("t").merge(pd.DataFrame({"id": [1]}), on=["id"])
    with ShortSwitchInterval(1e-4):
        before = sys.getswitchinterval()
    print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], before, flush=True)
    print(configure(), flush=True)
    with ShortSwitchInterval(1e-4):
        print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], sys.getswitchinterval())
"""


def test_the_library_changes_nothing_process_wide_until_asked() -> None:
    """Using acidstream as a library (connect, DDL, a merge) leaves the interpreter and the limits as they
    were; ``configure()`` (which the command line, Spark's workers and the benchmarks call) applies them."""
    env = {k: v for k, v in os.environ.items() if k != "ACIDSTREAM_PROCESS_TUNING"}
    out = subprocess.run([sys.executable, "-c", UNASKED], env=env, capture_output=True, text=True, check=True)
    untouched, configured, tuned = out.stdout.splitlines()
    assert untouched.split() == ["256", "0.005"]
    assert configured == "True"
    soft, inside = tuned.split()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert (int(soft) != 256) == (hard != 256)
    assert float(inside) == pytest.approx(1e-4)
