#!/usr/bin/env bash
# The main job on embedded defaults (SQLite metastore, ./wh warehouse, Spark local mode).
# Arguments go to `acidstream main-job` (see `--help`), e.g. `bash scripts/main.sh --rows 200000`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
# shellcheck source=env.sh
source scripts/env.sh
exec acidstream main-job "$@"
