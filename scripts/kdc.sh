#!/usr/bin/env bash
# An MIT Kerberos KDC of the tests' own, on loopback (Debian's krb5-kdc; installed with krb5-admin-server,
# krb5-user and libkrb5-dev, which python-gssapi builds against, where missing):
#   bash scripts/kdc.sh install            installs the packages where missing (nothing else)
#   bash scripts/kdc.sh start DIR          a realm (ACIDSTREAM_KDC_REALM, default ACIDSTREAM.TEST) with its database,
#                                          kdc.conf, krb5.conf and log in DIR, the KDC on a free loopback port (UDP
#                                          and TCP; a restart in DIR keeps it), the principals hive/localhost and
#                                          alice with keytabs DIR/hive.keytab and DIR/alice.keytab. Prints the
#                                          krb5.conf to use through KRB5_CONFIG (the machine's /etc/krb5.conf is
#                                          left alone). Idempotent.
#   bash scripts/kdc.sh keytab DIR NAME    (re)creates principal NAME with new random keys and writes them to
#                                          DIR/NAME.keytab ('/' in NAME as '_'): an older keytab of it then fails
#   bash scripts/kdc.sh maxlife DIR NAME S  tickets of principal NAME live at most S seconds from now on (tests of
#                                          a ticket that expires mid-batch)
#   bash scripts/kdc.sh stop DIR           stops the KDC started in DIR.
set -euo pipefail
realm="${ACIDSTREAM_KDC_REALM:-ACIDSTREAM.TEST}"
die() { echo "kdc.sh: $*" >&2; exit 1; }

install() {
    local missing=()
    command -v krb5kdc >/dev/null 2>&1 || [ -x /usr/sbin/krb5kdc ] || missing+=(krb5-kdc)
    command -v kadmin.local >/dev/null 2>&1 || [ -x /usr/sbin/kadmin.local ] || missing+=(krb5-admin-server)
    command -v kinit >/dev/null 2>&1 || missing+=(krb5-user)
    command -v krb5-config >/dev/null 2>&1 || missing+=(libkrb5-dev)
    [ "${#missing[@]}" -eq 0 ] && return
    command -v apt-get >/dev/null 2>&1 || die "no ${missing[*]} and no apt-get: install MIT Kerberos yourself"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "kdc.sh: installing ${missing[*]} with apt-get" >&2
    $sudo apt-get update -qq >/dev/null
    # the packages' own KDC service is not wanted (the tests run their own): RUNLEVEL=1 keeps it from starting
    DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

free_port() { # free for TCP and UDP both: the KDC listens on both
    python3 -c '
import socket
while True:
    t = socket.socket(); t.bind(("127.0.0.1", 0)); port = t.getsockname()[1]
    u = socket.socket(type=socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(port)
    break'
}

configure() { # dir port
    local dir="$1" port="$2"
    cat >"$dir/krb5.conf" <<EOF
[libdefaults]
    default_realm = $realm
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 24h
    renew_lifetime = 7d
    forwardable = true
    default_ccache_name = FILE:$dir/krb5cc_default

[realms]
    $realm = {
        kdc = 127.0.0.1:$port
    }

[domain_realm]
    localhost = $realm
EOF
    cat >"$dir/kdc.conf" <<EOF
[kdcdefaults]
    kdc_ports = $port
    kdc_tcp_ports = $port

[realms]
    $realm = {
        database_name = $dir/principal
        key_stash_file = $dir/stash
        acl_file = $dir/kadm5.acl
        kdc_ports = $port
        kdc_tcp_ports = $port
        max_life = 24h
        max_renewable_life = 7d
    }

[logging]
    kdc = FILE:$dir/kdc.log
    admin_server = FILE:$dir/kadmin.log
EOF
    : >"$dir/kadm5.acl"
}

kadmin() { # dir query
    KRB5_CONFIG="$1/krb5.conf" KRB5_KDC_PROFILE="$1/kdc.conf" kadmin.local -r "$realm" -q "$2" >/dev/null
}

keytab() { # dir name
    local dir="$1" name="$2"
    local file="$dir/${name//\//_}.keytab"
    kadmin "$dir" "addprinc -randkey $name@$realm" 2>/dev/null || true
    rm -f "$file"
    kadmin "$dir" "ktadd -k $file $name@$realm"
    echo "$file"
}

start() {
    local dir="${1:?usage: kdc.sh start DIR}"
    install
    export PATH="$PATH:/usr/sbin"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
        echo "$dir/krb5.conf"
        return
    fi
    local port
    port="$(cat "$dir/port" 2>/dev/null || free_port)"
    configure "$dir" "$port"
    if [ ! -f "$dir/principal" ]; then
        KRB5_CONFIG="$dir/krb5.conf" KRB5_KDC_PROFILE="$dir/kdc.conf" \
            kdb5_util create -s -r "$realm" -P "$(head -c 24 /dev/urandom | base64)" >"$dir/kdb5_util.log" 2>&1 ||
            die "kdb5_util could not create the realm's database, see $dir/kdb5_util.log"
        keytab "$dir" hive/localhost >/dev/null
        keytab "$dir" alice >/dev/null
    fi
    (KRB5_CONFIG="$dir/krb5.conf" KRB5_KDC_PROFILE="$dir/kdc.conf" exec nohup krb5kdc -n -r "$realm" \
        >"$dir/krb5kdc.out" 2>&1 </dev/null) &
    echo $! >"$dir/pid"
    echo "$port" >"$dir/port"
    local waited=0
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        kill -0 "$(cat "$dir/pid")" 2>/dev/null || die "the KDC exited, see $dir/krb5kdc.out and $dir/kdc.log"
        [ "$waited" -lt 100 ] || { stop "$dir"; die "the KDC did not listen within 50 s, see $dir/kdc.log"; }
        sleep 0.5
        waited=$((waited + 1))
    done
    echo "$dir/krb5.conf"
}

stop() {
    local dir="${1:?usage: kdc.sh stop DIR}"
    [ -f "$dir/pid" ] || return 0
    local pid
    pid="$(cat "$dir/pid")"
    if kill "$pid" 2>/dev/null; then
        local i
        for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
}

case "${1:-}" in
install) install ;;
start) start "${2:-}" ;;
keytab) PATH="$PATH:/usr/sbin" keytab "${2:?usage: kdc.sh keytab DIR NAME}" "${3:?usage: kdc.sh keytab DIR NAME}" ;;
maxlife) PATH="$PATH:/usr/sbin" kadmin "${2:?usage: kdc.sh maxlife DIR NAME SECONDS}" \
    "modprinc -maxlife \"${4:?usage: kdc.sh maxlife DIR NAME SECONDS} seconds\" ${3:?usage: kdc.sh maxlife DIR NAME SECONDS}@$realm" ;;
stop) stop "${2:-}" ;;
*) die "usage: kdc.sh install | start DIR | keytab DIR NAME | maxlife DIR NAME SECONDS | stop DIR" ;;
esac
