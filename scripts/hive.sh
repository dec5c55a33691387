#!/usr/bin/env bash
# Hive 4 beside the tests, from Maven Central (interop/hive/pom.xml):
#   bash scripts/hive.sh fetch         resolve Hive's jars, build our driver classes, unpack the metastore's schema
#                                      scripts; cached in $ACIDSTREAM_HIVE_HOME, a no-op (<1 s) when up to date.
#                                      lib/ holds Hadoop's S3A (hadoop-aws, the AWS SDK's S3 client) too.
#                                      Prints the cache directory: lib/ (Hive 4), streaming3/ (Hive's streaming
#                                      client, see interop/hive/streaming3/pom.xml), scripts/.
#   bash scripts/hive.sh start DIR     a standalone Hive Metastore with ACID on, its Derby database, warehouse,
#                                      config and log in DIR, on a free loopback port (a restart in the same DIR
#                                      takes the port it had, so its clients' URI stays valid). Prints its URI.
#                                      ACIDSTREAM_HIVE_DML_EVENTS=false: Hive's default of not logging DML events
#                                      (the tests log them, for the write notifications replication reads).
#                                      Its housekeeping runs, as on a production metastore: txns and locks without
#                                      a heartbeat for ACIDSTREAM_HIVE_TXN_TIMEOUT (default 60s, Hive's is 300s)
#                                      are aborted, and ended txns that recorded no write are deleted (Hive's txn
#                                      cleaner), every ACIDSTREAM_HIVE_HOUSEKEEPER_INTERVAL (10s).
#   bash scripts/hive.sh start DIR --kerberos KDC_DIR [--qop authentication|integrity|privacy]
#                                      the same, kerberized: SASL/GSSAPI only, as hive/localhost@REALM with the
#                                      keytab and krb5.conf of a KDC that scripts/kdc.sh started in KDC_DIR; its
#                                      clients connect to thrift://localhost:PORT (printed) with a service principal
#                                      of hive/_HOST@REALM and the SASL QOP --qop sets (hadoop.rpc.protection,
#                                      default authentication). Hadoop maps REALM's users to their short names.
#   bash scripts/hive.sh start DIR --tls  the same over TLS (metastore.use.SSL), with a self-signed certificate
#                                      for localhost the script makes (DIR/tls/keystore.p12; DIR/tls/ca.pem is the
#                                      CA file its clients trust); its clients connect to thrift://localhost:PORT.
#   bash scripts/hive.sh start DIR --plain USER:PASSWORD
#                                      the same, taking SASL PLAIN only (metastore.authentication CONFIG: Hive 4's
#                                      metastore.client.auth.mode=PLAIN clients) from USER with PASSWORD; with
#                                      --tls, PLAIN over TLS as it is deployed.
#   bash scripts/hive.sh start DIR --s3 ENDPOINT
#                                      the same, reaching an S3-compatible server at ENDPOINT (http://host:port)
#                                      through Hadoop's S3A, as a metastore whose databases and tables live on S3
#                                      must (it makes and deletes a managed table's directory itself): path-style
#                                      requests, region us-east-1, the keys from AWS_ACCESS_KEY_ID and
#                                      AWS_SECRET_ACCESS_KEY in its environment (never written to its config).
#   bash scripts/hive.sh stop DIR      stops the metastore started in DIR.
#   bash scripts/hive.sh classpath     the referee's Java classpath (after fetch).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pom="$root/interop/hive/pom.xml"
version="$(sed -n 's:.*<hive.version>\(.*\)</hive.version>.*:\1:p' "$pom")"
home="${ACIDSTREAM_HIVE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/acidstream/hive-$version}"
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
# Hive 4.0's own launcher predates JDK 17; these are the module openings its later releases pass.
java_opts=(-Xmx512m -XX:+UseSerialGC -Djava.net.preferIPv4Stack=true)
for pkg in java.nio java.net java.lang java.util java.util.concurrent java.util.concurrent.atomic \
    java.util.regex java.lang.reflect java.io sun.nio.ch; do
    java_opts+=(--add-opens "java.base/$pkg=ALL-UNNAMED")
done

die() { echo "hive.sh: $*" >&2; exit 1; }

# What the cache was built from: the poms and our Java sources.
fingerprint() {
    (cd "$root/interop/hive" && find pom.xml src streaming3/pom.xml streaming3/src -type f | LC_ALL=C sort |
        xargs sha256sum) | sha256sum | cut -c1-16
}

fetch() {
    command -v "$java_bin" >/dev/null || die "no java at '$java_bin'"
    # one fetch at a time per cache: a second one waits, then finds it up to date (two at once each emptied
    # lib/ while the other filled it)
    mkdir -p "$(dirname "$home")"
    exec 9>"$home.lock"
    flock 9
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
    cp -r "$root/interop/hive/pom.xml" "$root/interop/hive/src" "$root/interop/hive/streaming3" "$build/"
    # built beside the cache, then swapped in: a JVM of the cache still running meanwhile (another test run's)
    # finds its jars until the swap, not an empty lib/
    local next="$home/next"
    rm -rf "$next"
    mkdir -p "$next/lib" "$next/streaming3"
    local mvn=(mvn -B -q -Dstyle.color=never)
    (
        cd "$build"
        # Maven 3.8's jansi writes ESC[0m around every line even in batch mode with colours off
        export MAVEN_OPTS="${MAVEN_OPTS:+$MAVEN_OPTS }-Djansi.noreset=true"
        "${mvn[@]}" package
        "${mvn[@]}" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$next/lib"
        # The schema scripts ship only in the metastore's binary distribution.
        "${mvn[@]}" dependency:copy -DoutputDirectory="$build/dist" \
            -Dartifact="org.apache.hive:hive-standalone-metastore-server:$version:tar.gz:bin"
        cd streaming3
        "${mvn[@]}" package
        "${mvn[@]}" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$next/streaming3"
    ) >&2 || die "Maven could not build interop/hive (see above)"
    cp "$build"/target/acidstream-hive-referee-*.jar "$next/lib/"
    cp "$build"/streaming3/target/acidstream-hive-streamer-*.jar "$next/streaming3/"
    tar -xzf "$build"/dist/*.tar.gz -C "$build/dist" --wildcards '*/scripts/metastore/upgrade/derby/*'
    mv "$build"/dist/apache-hive-metastore-*/scripts "$next/scripts"
    local part
    for part in lib streaming3 scripts; do
        rm -rf "$next/old"
        [ ! -e "$home/$part" ] || mv "$home/$part" "$next/old"
        mv "$next/$part" "$home/$part"
    done
    rm -rf "$next"
    echo "$want" >"$home/fetched"
    echo "$home"
}

classpath() {
    [ -f "$home/fetched" ] || die "run 'bash scripts/hive.sh fetch' first"
    echo "$home/lib/*"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

site_xml() { # dir port [kdc_dir [tls [plain_user:password [s3_endpoint]]]]
    local dir="$1" port="$2" kdc="${3:-}" tls="${4:-}" plain="${5:-}" s3="${6:-}"
    # No DbNotificationListener (metastore.transactional.event.listeners): its jar,
    # hive-hcatalog-server-extensions, is not published for Hive 4.0.x.
    # Hive's transaction housekeeping (of metastore.task.threads.remote), as production metastores run it:
    # AcidHouseKeeperService times out txns and locks without heartbeats and drops what ended txns leave;
    # AcidOpenTxnsCounterService counts open txns; AcidTxnCleanerService deletes aborted (and committed) txns
    # that recorded no write, so a writer must lock before it writes (the lock records the write) or its aborted
    # rows would read as committed. ACIDSTREAM_HIVE_HOUSEKEEPERS replaces the list.
    local service=org.apache.hadoop.hive.metastore.txn.service
    local default=AcidHouseKeeperService,AcidOpenTxnsCounterService,AcidTxnCleanerService
    local housekeepers="${ACIDSTREAM_HIVE_HOUSEKEEPERS:-$default}"
    housekeepers="$service.${housekeepers//,/,$service.}"
    local -a props=(
        metastore.thrift.bind.host 127.0.0.1
        metastore.thrift.port "$port"
        metastore.warehouse.dir "file://$dir/warehouse"
        metastore.warehouse.external.dir "file://$dir/external"
        javax.jdo.option.ConnectionURL "jdbc:derby:;databaseName=$dir/metastore_db;create=true"
        javax.jdo.option.ConnectionDriverName org.apache.derby.jdbc.EmbeddedDriver
        metastore.schema.verification true
        datanucleus.schema.autoCreateAll false
        metastore.task.threads.always "org.apache.hadoop.hive.metastore.events.EventCleanerTask"
        metastore.expression.proxy org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy
        hive.txn.manager org.apache.hadoop.hive.ql.lockmgr.DbTxnManager
        hive.support.concurrency true
        metastore.txn.timeout "${ACIDSTREAM_HIVE_TXN_TIMEOUT:-60s}"
        metastore.housekeeping.threads.on true
        metastore.task.threads.remote "$housekeepers"
        metastore.acid.housekeeper.interval "${ACIDSTREAM_HIVE_HOUSEKEEPER_INTERVAL:-10s}"
        metastore.acid.txn.cleaner.interval "${ACIDSTREAM_HIVE_HOUSEKEEPER_INTERVAL:-10s}"
        metastore.compactor.initiator.on false
        metastore.compactor.cleaner.on false
        metastore.compactor.worker.threads 0
        hive.metastore.dml.events "${ACIDSTREAM_HIVE_DML_EVENTS:-true}"
        metastore.event.db.notification.api.auth false
        metastore.metadata.transformer.class " "
        hive.metastore.event.db.notification.api.auth false
    )
    if [ -n "$kdc" ]; then
        # the principal as written: the server would replace _HOST with the machine's canonical host name
        props+=(
            metastore.sasl.enabled true
            metastore.kerberos.principal "hive/localhost@$realm"
            metastore.kerberos.keytab.file "$kdc/hive_localhost.keytab"
        )
    fi
    if [ -n "$tls" ]; then
        props+=(
            metastore.use.SSL true
            metastore.keystore.path "$dir/tls/keystore.p12"
            metastore.keystore.password acidstream
        )
    fi
    if [ -n "$plain" ]; then
        props+=(
            metastore.authentication CONFIG
            metastore.execute.setugi false
            metastore.authentication.config.username "${plain%%:*}"
            metastore.authentication.config.password "${plain#*:}"
        )
    fi
    if [ -n "$s3" ]; then
        # S3A as a Hive deployment on an S3-compatible store sets it; the keys come from the environment
        props+=(
            fs.s3a.endpoint "$s3"
            fs.s3a.endpoint.region us-east-1
            fs.s3a.path.style.access true
            fs.s3a.connection.ssl.enabled "$([[ "$s3" == https:* ]] && echo true || echo false)"
            fs.s3a.aws.credentials.provider com.amazonaws.auth.EnvironmentVariableCredentialsProvider
            fs.s3a.fast.upload.buffer array
        )
    fi
    xml_properties "${props[@]}"
}

core_site_xml() { # qop
    local -a props=(
        hadoop.security.authentication kerberos
        hadoop.rpc.protection "$1"
        hadoop.security.auth_to_local "RULE:[1:\$1@\$0](.*@$realm)s/@.*// RULE:[2:\$1@\$0](.*@$realm)s/@.*// DEFAULT"
    )
    xml_properties "${props[@]}"
}

xml_properties() { # name value ...
    local -a props=("$@")
    echo '<?xml version="1.0"?>'
    echo '<configuration>'
    local i
    for ((i = 0; i < ${#props[@]}; i += 2)); do
        printf '  <property><name>%s</name><value>%s</value></property>\n' "${props[i]}" "${props[i + 1]}"
    done
    echo '</configuration>'
}

realm="${ACIDSTREAM_KDC_REALM:-ACIDSTREAM.TEST}"

tls_keystore() { # dir: a self-signed certificate for localhost in DIR/keystore.p12, and as PEM in DIR/ca.pem
    local dir="$1"
    [ -f "$dir/ca.pem" ] && return
    mkdir -p "$dir"
    keytool -genkeypair -alias metastore -keyalg RSA -keysize 2048 -dname CN=localhost -ext SAN=dns:localhost \
        -validity 30 -keystore "$dir/keystore.p12" -storetype PKCS12 -storepass acidstream -keypass acidstream \
        >/dev/null 2>&1 || die "keytool could not make a certificate in $dir"
    keytool -exportcert -rfc -alias metastore -keystore "$dir/keystore.p12" -storepass acidstream \
        >"$dir/ca.pem" 2>/dev/null || die "keytool could not export the certificate of $dir"
}

start() {
    local dir="${1:?usage: hive.sh start DIR}"
    shift
    local kdc="" qop=authentication tls="" plain="" s3=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --kerberos) kdc="$(cd "${2:?--kerberos KDC_DIR}" && pwd)"; shift 2 ;;
        --qop) qop="${2:?--qop authentication|integrity|privacy}"; shift 2 ;;
        --tls) tls=1; shift ;;
        --s3) s3="${2:?--s3 ENDPOINT}"; shift 2 ;;
        --plain)
            plain="${2:?--plain USER:PASSWORD}"
            [[ "$plain" == *:* ]] || die "--plain takes USER:PASSWORD"
            shift 2 ;;
        *) die "unknown start option $1" ;;
        esac
    done
    local host=127.0.0.1
    if [ -n "$kdc" ]; then
        [ -f "$kdc/krb5.conf" ] && [ -f "$kdc/hive_localhost.keytab" ] || die "no KDC in $kdc (scripts/kdc.sh start)"
        host=localhost
    fi
    [ -z "$tls" ] || host=localhost
    [ -f "$home/fetched" ] || die "run 'bash scripts/hive.sh fetch' first"
    mkdir -p "$dir/conf" "$dir/warehouse" "$dir/external"
    dir="$(cd "$dir" && pwd)"
    if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
        echo "thrift://$host:$(cat "$dir/port")"
        return
    fi
    local port
    port="$(cat "$dir/port" 2>/dev/null || free_port)"
    [ -z "$tls" ] || tls_keystore "$dir/tls"
    if [ -n "$s3" ]; then
        [ -n "${AWS_ACCESS_KEY_ID:-}" ] && [ -n "${AWS_SECRET_ACCESS_KEY:-}" ] ||
            die "--s3 takes its keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which are not set"
    fi
    site_xml "$dir" "$port" "$kdc" "$tls" "$plain" "$s3" >"$dir/conf/metastore-site.xml"
    cp "$root/interop/hive/log4j2.properties" "$dir/conf/metastore-log4j2.properties"
    local -a secure=()
    if [ -n "$kdc" ]; then
        core_site_xml "$qop" >"$dir/conf/core-site.xml"
        secure=(-Djava.security.krb5.conf="$kdc/krb5.conf")
    else
        rm -f "$dir/conf/core-site.xml"
    fi
    local -a run=("$java_bin" "${java_opts[@]}" "${secure[@]}" -Dderby.stream.error.file="$dir/derby.log"
        -Dlog4j.configurationFile="$dir/conf/metastore-log4j2.properties" -cp "$dir/conf:$home/lib/*")
    if [ ! -d "$dir/metastore_db" ]; then
        METASTORE_HOME="$home" "${run[@]}" org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool \
            -initSchema -dbType derby >"$dir/schematool.log" 2>&1 ||
            die "schematool failed, see $dir/schematool.log"
    fi
    (cd "$dir" && exec nohup "${run[@]}" org.apache.hadoop.hive.metastore.HiveMetaStore -p "$port" \
        >"$dir/metastore.log" 2>&1 </dev/null) &
    echo $! >"$dir/pid"
    echo "$port" >"$dir/port"
    local waited=0
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        kill -0 "$(cat "$dir/pid")" 2>/dev/null || die "the metastore exited, see $dir/metastore.log"
        [ "$waited" -lt 240 ] || { stop "$dir"; die "the metastore did not listen within 120 s, see $dir/metastore.log"; }
        sleep 0.5
        waited=$((waited + 1))
    done
    echo "thrift://$host:$port"
}

stop() {
    local dir="${1:?usage: hive.sh stop DIR}"
    [ -f "$dir/pid" ] || return 0
    local pid
    pid="$(cat "$dir/pid")"
    if kill "$pid" 2>/dev/null; then
        local i
        for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
}

case "${1:-}" in
fetch) fetch ;;
start) shift; start "$@" ;;
stop) stop "${2:-}" ;;
classpath) classpath ;;
*) die "usage: hive.sh fetch | start DIR [--kerberos KDC_DIR [--qop QOP]] [--tls] [--plain USER:PASSWORD] [--s3 ENDPOINT] | stop DIR | classpath" ;;
esac
