"""Running one benchmark case in a fresh process of its own, so that its peak memory and warm-up are its own."""

from __future__ import annotations

import json
import subprocess
import sys


def run_script(script: str, args: list[str]) -> dict[str, float]:
    """``python script *args``; the case's result is the JSON object on its last line of output."""
    out = subprocess.run([sys.executable, script, *args], check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))
