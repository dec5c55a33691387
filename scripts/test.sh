#!/usr/bin/env bash
# The project's test command: installs what it needs, then lint (ruff), types (mypy) and the test suite (pytest).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not spark"` or `bash scripts/test.sh tests/acid`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
# shellcheck source=env.sh
source scripts/env.sh

echo "== ruff"; ruff check src tests bench scripts; ruff format --check --quiet src tests bench scripts
echo "== mypy"; mypy
echo "== pytest"
set +e
pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests"; fi
exit "$rc"
