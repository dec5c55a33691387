#!/usr/bin/env bash
# The project's test command: installs what it needs, then lint (ruff), types (mypy) and the test suite (pytest).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not spark"` or `bash scripts/test.sh tests/acid`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
# shellcheck source=env.sh
source scripts/env.sh
# Hive 4 from Maven Central, the referee of the hive4 tests: a JDK and Maven where missing, then its jars and
# our driver classes (scripts/hive.sh fetch: minutes on a new machine, cached after that).
if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "== installing a JDK and Maven with apt-get (for Hive 4)"
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi
echo "== Hive 4 (bash scripts/hive.sh fetch)"
bash scripts/hive.sh fetch >/dev/null
echo "== HDFS (bash scripts/hdfs.sh fetch: Hadoop's MiniDFSCluster for tests/stores/test_hdfs.py)"
bash scripts/hdfs.sh fetch >/dev/null
# PostgreSQL for the tests: a private cluster started (and installed where missing) by scripts/postgres.sh,
# unless the caller names a server of its own.
if [ -z "${ACIDSTREAM_TEST_PG_URL:-}" ]; then
    ACIDSTREAM_TEST_PG_URL="$(bash scripts/postgres.sh)"
    export ACIDSTREAM_TEST_PG_URL
fi

echo "== ruff"; ruff check src tests bench scripts; ruff format --check --quiet src tests bench scripts
echo "== mypy"; mypy
echo "== pytest"
set +e
# Two worker processes (pytest-xdist), a test file each at a time, files with slow tests first (tests/conftest.py):
# much of a serial run waits on JVMs, servers and subprocesses with a core idle. Each worker starts the session's
# servers it needs. `-n 0` as an argument runs serially. The slowest tests in the output show where the time goes
# (the budget is 30 minutes on 2 cores).
pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=40 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests"; fi
exit "$rc"
