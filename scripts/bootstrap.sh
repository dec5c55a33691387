#!/usr/bin/env bash
# Makes a fresh Debian machine ready: Java 17 (for Spark), a Python >= 3.11 venv in .venv with the
# project and its dev dependencies. Idempotent and quick when nothing changed (stamp on pyproject.toml,
# setup.py and the C source). With --if-needed (scripts/activate), returns at once when the stamp is current.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

log() { printf '[bootstrap] %s\n' "$*" >&2; }

stamp=".venv/.acidstream-installed"
want="$(cat pyproject.toml setup.py src/acidstream/streaming/records/_native.c | sha256sum | cut -d' ' -f1)"
if [ "${1:-}" = "--if-needed" ] && [ -x .venv/bin/acidstream ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi

apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        log "apt-get not found: please install $* yourself"; return 1
    fi
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    log "installing $* with apt-get"
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

java_major() {
    command -v java >/dev/null 2>&1 || { echo 0; return; }
    java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

if [ "$(java_major)" -lt 17 ]; then
    apt_install openjdk-17-jre-headless
fi

pick_python() {
    for c in python3.11 python3.12 python3.13 python3; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$c"; return
        fi
    done
}
py="$(pick_python)"
if [ -z "$py" ]; then
    apt_install python3 python3-venv python3-dev
    py="$(pick_python)"
fi

if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $py"
    "$py" -m venv .venv || { apt_install python3-venv; "$py" -m venv .venv; }
fi

# The C part (write()'s per-record path, the delimited split) compiles if a C compiler and Python's headers
# are there; without them the package installs and runs in pure Python, slower. Install them where apt can.
has_headers() { .venv/bin/python -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; }
if ! command -v cc >/dev/null 2>&1; then
    apt_install gcc libc6-dev || log "no C compiler: acidstream runs without its C part (slower writes)"
fi
if ! has_headers && [[ "$(.venv/bin/python -c 'import sys; print(sys.base_prefix)')" == /usr ]]; then
    apt_install "python$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev" \
        || log "no Python headers: acidstream runs without its C part (slower writes)"
fi

# python-gssapi (the kerberos extra, in dev) builds against MIT Kerberos's headers (libkrb5-dev); the KDC the
# kerberized metastore's tests run comes with them (scripts/kdc.sh install: a no-op when all are there)
bash scripts/kdc.sh install || log "no MIT Kerberos: the kerberos extra cannot build, its tests cannot run"

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log "installing Python dependencies (first run downloads pyspark: a few minutes)"
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e ".[dev]"
    echo "$want" > "$stamp"
fi

# Spark's Python workers: keep pyspark's own archives off their path (scripts/acidstream_spark_workers.py says
# what that saves). Rewritten on every run, so a reinstall keeps it.
purelib="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cp scripts/acidstream_spark_workers.py "$purelib/acidstream_spark_workers.py"
cp scripts/spark-workers.pth "$purelib/acidstream-spark-workers.pth"
