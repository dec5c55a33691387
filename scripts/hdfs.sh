#!/usr/bin/env bash
# HDFS beside the tests, from Maven Central (interop/hdfs/pom.xml): Hadoop's MiniDFSCluster.
#   bash scripts/hdfs.sh fetch         resolve Hadoop's jars, build our launcher; cached in $ACIDSTREAM_HDFS_HOME,
#                                      a no-op (<1 s) when up to date. Prints the cache directory.
#   bash scripts/hdfs.sh start DIR     one NameNode and one DataNode on loopback (WebHDFS on, replication 1,
#                                      permissions off), their storage and log in DIR. Prints the hdfs:// URI on
#                                      stdout, and on stderr the WebHDFS port and DIR/conf, a Hadoop client
#                                      configuration naming the cluster (core-site.xml, hdfs-site.xml: point
#                                      HADOOP_CONF_DIR at it). DIR/ports holds "namenode-rpc-port webhdfs-port
#                                      control-port".
#   bash scripts/hdfs.sh start DIR --kerberos KDC_DIR
#                                      the same, secured with the KDC that scripts/kdc.sh started in KDC_DIR:
#                                      Kerberos RPC as hdfs/localhost, WebHDFS behind SPNEGO as HTTP/localhost and
#                                      HTTP/127.0.0.1 (new keys, in DIR/hdfs.keytab), block access and delegation
#                                      tokens, the DataNode on non-privileged ports (Hadoop's
#                                      ignore.secure.ports.for.testing). The URI names localhost; DIR/conf says
#                                      the cluster is kerberized and names the NameNode's principal.
#   bash scripts/hdfs.sh stop DIR      stops the cluster started in DIR.
# ACIDSTREAM_HDFS_SETTINGS="NAME=VALUE ..." at start: more HDFS settings for the cluster (an hdfs-site.xml on its
# classpath, DIR/site/hdfs-site.xml), e.g. dfs.namenode.delegation.token.renew-interval=15000 for tokens that expire in 15 s.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pom="$root/interop/hdfs/pom.xml"
version="$(sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' "$pom")"
home="${ACIDSTREAM_HDFS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/acidstream/hdfs-$version}"
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
java_opts=(-Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true)

die() { echo "hdfs.sh: $*" >&2; exit 1; }

# What the cache was built from: the pom and our Java source.
fingerprint() {
    (cd "$root/interop/hdfs" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16
}

fetch() {
    command -v "$java_bin" >/dev/null || die "no java at '$java_bin'"
    local want
    want="$(fingerprint)"
    if [ -f "$home/fetched" ] && [ "$(cat "$home/fetched")" = "$want" ]; then
        echo "$home"
        return
    fi
    command -v mvn >/dev/null || die "Maven (mvn) is not installed"
    local build
    build="$(mktemp -d)"
    trap 'rm -rf "$build"' RETURN
    cp -r "$root/interop/hdfs/pom.xml" "$root/interop/hdfs/src" "$build/"
    rm -rf "$home/lib"
    mkdir -p "$home/lib"
    (
        cd "$build"
        # Maven 3.8's jansi writes ESC[0m around every line even in batch mode with colours off
        export MAVEN_OPTS="${MAVEN_OPTS:+$MAVEN_OPTS }-Djansi.noreset=true"
        mvn -B -q -Dstyle.color=never package dependency:copy-dependencies -DincludeScope=runtime \
            -DoutputDirectory="$home/lib"
    ) >&2 || die "Maven could not build interop/hdfs (see above)"
    cp "$build"/target/acidstream-minihdfs-*.jar "$home/lib/"
    echo "$want" >"$home/fetched"
    echo "$home"
}

running() { [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null; }

# DIR/conf: the client configuration of the cluster started in DIR (what `hdfs dfs` and acidstream read), then
# the URI on stdout and where the rest is on stderr.
started() {
    local dir="$1" rpc webhdfs host=127.0.0.1 core="" site=""
    read -r rpc webhdfs _ <"$dir/ports"
    if [ -f "$dir/principal" ]; then # kerberized: service principals name localhost
        host=localhost
        core="<property><name>hadoop.security.authentication</name><value>kerberos</value></property>"
        site="<property><name>dfs.namenode.kerberos.principal</name><value>$(cat "$dir/principal")</value></property>"
    fi
    mkdir -p "$dir/conf"
    printf '<configuration>\n  <property><name>fs.defaultFS</name><value>hdfs://%s:%s</value></property>\n  %s\n</configuration>\n' \
        "$host" "$rpc" "$core" >"$dir/conf/core-site.xml"
    printf '<configuration>\n  <property><name>dfs.namenode.http-address</name><value>%s:%s</value></property>\n  %s\n</configuration>\n' \
        "$host" "$webhdfs" "$site" >"$dir/conf/hdfs-site.xml"
    echo "hdfs.sh: WebHDFS on port $webhdfs; client configuration in $dir/conf (export HADOOP_CONF_DIR=$dir/conf)" >&2
    echo "hdfs://$host:$rpc"
}

# DIR/hdfs.keytab: keys of hdfs/localhost, HTTP/localhost and HTTP/127.0.0.1 from the KDC in KDC_DIR, made there
# by the first cluster of that KDC and reused by the next (new keys would leave a running cluster's keytab stale:
# its namenode would then refuse every SPNEGO ticket, "Checksum failed"); the launcher's arguments on stdout.
kerberos() {
    local dir="$1" kdc="$2" realm name known rkt=""
    [ -f "$kdc/krb5.conf" ] || die "no KDC in $kdc (scripts/kdc.sh start)"
    realm="$(sed -n 's/^ *default_realm *= *//p' "$kdc/krb5.conf")"
    for name in hdfs/localhost HTTP/localhost HTTP/127.0.0.1; do
        known="$kdc/${name//\//_}.keytab"
        [ -f "$known" ] || known="$(bash "$root/scripts/kdc.sh" keytab "$kdc" "$name")"
        rkt+="rkt $known"$'\n'
    done
    rm -f "$dir/hdfs.keytab"
    printf '%swkt %s\nquit\n' "$rkt" "$dir/hdfs.keytab" | KRB5_CONFIG="$kdc/krb5.conf" ktutil >/dev/null ||
        die "ktutil could not write $dir/hdfs.keytab"
    echo "hdfs/localhost@$realm" >"$dir/principal"
    echo "--kerberos hdfs/localhost@$realm $dir/hdfs.keytab"
}

start() {
    local dir="${1:?usage: hdfs.sh start DIR [--kerberos KDC_DIR]}" kdc="" secure=() opts=()
    case "${2:-}" in
    --kerberos) kdc="$(cd "${3:?--kerberos KDC_DIR}" && pwd)" ;;
    "") ;;
    *) die "usage: hdfs.sh start DIR [--kerberos KDC_DIR]" ;;
    esac
    [ -f "$home/fetched" ] || die "run 'bash scripts/hdfs.sh fetch' first"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if running "$dir" && [ -f "$dir/ports" ]; then
        started "$dir"
        return
    fi
    rm -rf "$dir/ports" "$dir/data" "$dir/principal"
    if [ -n "$kdc" ]; then
        local args
        args="$(kerberos "$dir" "$kdc")"
        read -ra secure <<<"$args"
        opts=(-Djava.security.krb5.conf="$kdc/krb5.conf")
    fi
    local setting
    mkdir -p "$dir/site"
    {
        echo '<configuration>'
        for setting in ${ACIDSTREAM_HDFS_SETTINGS:-}; do
            printf '  <property><name>%s</name><value>%s</value></property>\n' "${setting%%=*}" "${setting#*=}"
        done
        echo '</configuration>'
    } >"$dir/site/hdfs-site.xml"
    (cd "$dir" && exec nohup "$java_bin" "${java_opts[@]}" "${opts[@]}" -cp "$home/lib/*:$dir/site" acidstream.hdfs.MiniHdfs \
        "$dir" "${secure[@]}" >"$dir/hdfs.log" 2>&1 </dev/null) &
    echo $! >"$dir/pid"
    local waited=0
    until [ -f "$dir/ports" ]; do
        running "$dir" || die "the MiniDFSCluster exited, see $dir/hdfs.log"
        [ "$waited" -lt 240 ] || { stop "$dir"; die "the MiniDFSCluster did not start within 120 s, see $dir/hdfs.log"; }
        sleep 0.5
        waited=$((waited + 1))
    done
    started "$dir"
}

stop() {
    local dir="${1:?usage: hdfs.sh stop DIR}"
    running "$dir" || { rm -f "$dir/pid"; return 0; }
    local pid control
    pid="$(cat "$dir/pid")"
    control="$(cut -d' ' -f3 "$dir/ports" 2>/dev/null || true)"
    if [ -n "$control" ]; then # an orderly shutdown first: the NameNode and DataNode close their storage
        (exec 3<>"/dev/tcp/127.0.0.1/$control" && echo shutdown >&3 && timeout 20 cat <&3 >/dev/null) 2>/dev/null || true
    fi
    local i
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill "$pid" 2>/dev/null || true
    for i in $(seq 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
}

case "${1:-}" in
fetch) fetch ;;
start) start "${2:-}" "${3:-}" "${4:-}" ;;
stop) stop "${2:-}" ;;
*) die "usage: hdfs.sh fetch | start DIR [--kerberos KDC_DIR] | stop DIR" ;;
esac
