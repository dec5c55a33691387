#!/usr/bin/env bash
# The PostgreSQL server the tests use: installs Debian's PostgreSQL where it is missing, then starts a private
# cluster of the tests' own (trust auth, loopback only, its own port and data directory, so the machine's
# cluster and its configuration are left alone) with a `test` database, and prints its URL on stdout.
# Idempotent: a cluster already running is reused. Usage: `export ACIDSTREAM_TEST_PG_URL="$(bash scripts/postgres.sh)"`;
# `bash scripts/postgres.sh stop` stops it.
set -euo pipefail

port="${ACIDSTREAM_TEST_PG_PORT:-54329}"
data="${ACIDSTREAM_TEST_PG_DIR:-${TMPDIR:-/tmp}/acidstream-test-pg-$port}"
log() { printf '[postgres] %s\n' "$*" >&2; }

pg_bin() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ]; then echo "$d"; return; fi
    done
}

bin="$(pg_bin)"
if [ -z "$bin" ]; then
    command -v apt-get >/dev/null 2>&1 || { log "no PostgreSQL and no apt-get: install PostgreSQL yourself"; exit 1; }
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    log "installing PostgreSQL with apt-get"
    $sudo apt-get update -qq >/dev/null
    # policy-rc.d keeps the package from starting the machine's own cluster: the tests run their own.
    DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -qq postgresql >/dev/null
    bin="$(pg_bin)"
    [ -n "$bin" ] || { log "PostgreSQL installed but initdb not found"; exit 1; }
fi

# PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` account the package made.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "${1:-}" = "stop" ]; then
    [ -f "$data/postmaster.pid" ] && as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
    exit 0
fi

url="postgresql://postgres@127.0.0.1:$port/test"
if ! as_owner "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" 2>/dev/null; then
    if [ ! -f "$data/PG_VERSION" ]; then
        log "creating a test cluster in $data"
        mkdir -p "$data"
        [ "$(id -u)" -ne 0 ] || chown postgres: "$data"
        as_owner "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-locale >/dev/null
    fi
    log "starting the test cluster on 127.0.0.1:$port"
    as_owner "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $data -c fsync=off -c max_connections=200" start >/dev/null
fi
if ! as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" | grep -q 1; then
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres test
fi
echo "$url"
