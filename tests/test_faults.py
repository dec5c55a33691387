"""The fault-point mechanism itself: arming in-process, counting, and faults from the environment."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from acidstream import faults
from acidstream.faults import FAULTS_ENV, armed, fault_point, parse_faults, substitute


def test_an_unarmed_point_does_nothing_and_substitute_returns_its_value() -> None:
    fault_point("nowhere")
    subject = object()
    assert substitute("nowhere", subject) is subject


def test_an_armed_point_fires_from_its_nth_hit_for_so_many_times() -> None:
    with armed("here", faults.os_error(errno.EIO), at=2, times=2) as fault:
        fault_point("here")
        for _ in range(2):
            with pytest.raises(OSError) as exc:
                fault_point("here")
            assert exc.value.errno == errno.EIO
        fault_point("here")
        fault_point("elsewhere")
    assert (fault.hits, fault.fired) == (4, 2)
    fault_point("here")  # disarmed when the block ends


def test_substitute_replaces_the_subject_while_armed() -> None:
    with armed("storage.filesystem", lambda fs: ("wrapped", fs)):
        assert substitute("storage.filesystem", "fs") == ("wrapped", "fs")
    assert substitute("storage.filesystem", "fs") == "fs"


def test_environment_syntax() -> None:
    parsed = parse_faults(" metastore.commit=sleep:0.01 ; orc.flush.tail=oserror:ENOSPC@3;x=kill")
    assert sorted(parsed) == ["metastore.commit", "orc.flush.tail", "x"]
    tail = parsed["orc.flush.tail"]
    assert (tail.at, tail.times) == (3, 1)
    tail(None)
    tail(None)
    with pytest.raises(OSError) as exc:
        tail(None)
    assert exc.value.errno == errno.ENOSPC
    tail(None)  # @N fires once
    for bad in ("nothing", "=kill", "p=explode", "p=oserror:ENOTANERRNO", "p=sleep:soon", "p=kill@x"):
        with pytest.raises(ValueError, match=FAULTS_ENV):
            parse_faults(bad)


def test_a_subprocess_reads_its_faults_from_the_environment_once() -> None:
    code = (
        "from acidstream.faults import fault_point\n"
        "fault_point('p')\nprint('survived the first hit', flush=True)\nfault_point('p')\nprint('not reached')"
    )
    env = {**os.environ, FAULTS_ENV: "p=kill@2"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9
    assert proc.stdout == "survived the first hit\n"
