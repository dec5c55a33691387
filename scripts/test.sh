#!/usr/bin/env bash
# The project's test command: installs what it needs, then lint (ruff), types (mypy) and the test suite (pytest).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not spark"` or `bash scripts/test.sh tests/acid`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
# shellcheck source=env.sh
source scripts/env.sh
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
pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests"; fi
exit "$rc"
