"""Benchmarks measure acidstream as its command runs it: with the process-wide settings of
``acidstream.runtime.configure``, in the benchmark's process and every process it starts
(``ACIDSTREAM_PROCESS_TUNING=1``), unless the environment already says otherwise (``=0`` measures without)."""

from __future__ import annotations

import os

from acidstream.runtime import OPT_OUT_VARIABLE


def tuned() -> None:
    """Call first thing in a benchmark's ``__main__``, before acidstream does anything."""
    os.environ.setdefault(OPT_OUT_VARIABLE, "1")
