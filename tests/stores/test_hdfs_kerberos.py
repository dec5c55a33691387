"""A warehouse on a kerberized HDFS (the session's MiniDFSCluster with Kerberos, WebHDFS behind SPNEGO, against
the tests' KDC): a caller with a ticket or a keytab authenticates by SPNEGO; a process without credentials
carries an HDFS delegation token; every refusal of who the caller is is an ``AuthenticationError`` naming the
principal, the namenode's URL and what to do, raised before any transaction opens, and never shows a token."""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.errors import AcidStreamError, AuthenticationError
from acidstream.storage import check_location, configure_stores, hdfs_client, table_filesystem
from support.deps import import_or_skip
from support.hdfscluster import MiniHdfs
from support.ticketless import ticketless_workers

import_or_skip("requests_gssapi")

#: Seconds the test cluster's signed SPNEGO cookie lasts (hadoop.http.authentication.token.validity).
COOKIE_VALIDITY = 3
DDL = (
    "CREATE TABLE sales (id int, amount bigint) PARTITIONED BY (region string) CLUSTERED BY (id) INTO 2 BUCKETS "
    "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
)


@pytest.fixture
def stores() -> Iterator[None]:
    """The process's store settings restored after the test."""
    previous = configure_stores()
    yield
    configure_stores(**previous)


@pytest.fixture
def secured(
    hdfs_kerberos_namenode: MiniHdfs, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stores: None
) -> MiniHdfs:
    """The kerberized cluster's client configuration in ``$HADOOP_CONF_DIR`` (which says Kerberos), and an
    empty ticket cache of the test's own in ``$KRB5CCNAME``."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_kerberos_namenode.conf_dir))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'ccache'}")
    return hdfs_kerberos_namenode


def _kinit(kdc: Any, tmp_path: Path) -> None:
    kdc.kinit("alice", kdc.dir / "alice.keytab", tmp_path / "ccache")


def _warehouse(cluster: MiniHdfs) -> str:
    return f"{cluster.uri}/{uuid.uuid4().hex[:12]}/wh"


def _connect(ms: Metastore) -> StreamingConnection:
    return (
        StreamingConnection.builder()
        .with_metastore(ms)
        .with_database("default")
        .with_table("sales")
        .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
        .with_transaction_batch_size(3)
        .connect()
    )


def _commit(conn: StreamingConnection, t: int) -> None:
    conn.begin_transaction()
    for i in range(3):
        row = t * 10 + i
        conn.write(f"{row},{row * 100},{'eu' if row % 2 else 'us'}".encode())
    conn.commit_transaction()


def _ids(ms: Metastore) -> list[int]:
    return sorted(ms.table("sales").scan().to_arrow().column("id").to_pylist())


def test_a_caller_with_a_ticket_streams_and_reads_through_spnego(
    secured: MiniHdfs, kdc: Any, tmp_path: Path
) -> None:
    """Kerberos taken from core-site.xml (hadoop.security.authentication), the ticket from kinit."""
    _kinit(kdc, tmp_path)
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=_warehouse(secured)) as ms:
        ms.execute(DDL)
        with _connect(ms) as conn:
            _commit(conn, 1)
            _commit(conn, 2)
        assert _ids(ms) == [10, 11, 12, 20, 21, 22]
        assert _owner(ms) == "alice"


def _path(ms: Metastore) -> str:
    return table_filesystem(ms.table("sales").location)[1]


def _owner(ms: Metastore) -> str:
    """The HDFS owner of the table's directory: who the namenode took the caller for."""
    client = hdfs_client(ms.table("sales").location)
    return str(client.call("GETFILESTATUS", "GET", _path(ms)).json()["FileStatus"]["owner"])


def test_a_keytab_logs_in_without_a_ticket_cache(secured: MiniHdfs, kdc: Any, tmp_path: Path) -> None:
    """Once: every location's client of the process shares the keytab's ticket cache in memory."""
    keytab = tmp_path / "alice.keytab"  # a keytab of its own: its logins share no ticket cache with others'
    shutil.copy(kdc.dir / "alice.keytab", keytab)
    configure_stores(hdfs={"kerberos_principal": "alice", "kerberos_keytab": str(keytab)})
    logins = _logins(kdc)
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=_warehouse(secured)) as ms:
        ms.execute(DDL)
        with _connect(ms) as conn:
            _commit(conn, 1)
        assert _ids(ms) == [10, 11, 12]
        assert _owner(ms) == "alice"
    assert _logins(kdc) == logins + 1
    assert not kdc.has_ticket(tmp_path / "ccache")  # the keytab's tickets stay in memory


def test_no_ticket_is_an_authentication_error_before_any_txn_opens(secured: MiniHdfs, tmp_path: Path) -> None:
    warehouse = _warehouse(secured)
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
        with pytest.raises(AuthenticationError) as raised:
            ms.execute(DDL)
        assert ms.show_txns() == []
    message = str(raised.value)
    assert f"localhost:{secured.webhdfs_port}" in message and "kinit" in message
    assert str(tmp_path / "ccache") in message  # where the ticket was looked for
    assert raised.value.retryable is False


def test_a_client_without_kerberos_is_told_to_turn_it_on(secured: MiniHdfs, kdc: Any, tmp_path: Path) -> None:
    _kinit(kdc, tmp_path)
    configure_stores(hdfs={"kerberos": False})
    with pytest.raises(AuthenticationError, match=r"(?s)localhost:\d+.*kerberos = true.*kinit"):
        check_location(_warehouse(secured))


def test_a_wrong_service_principal_is_named(secured: MiniHdfs, kdc: Any, tmp_path: Path) -> None:
    _kinit(kdc, tmp_path)
    configure_stores(hdfs={"kerberos_service_principal": "HTTP/nn.elsewhere"})
    with pytest.raises(AuthenticationError) as raised:
        check_location(_warehouse(secured))
    message = str(raised.value)
    assert "HTTP/nn.elsewhere" in message and "kerberos_service_principal" in message
    assert "not found in Kerberos database" in message  # the KDC's own reason


def test_a_wrong_keytab_is_named(secured: MiniHdfs, kdc: Any, tmp_path: Path) -> None:
    missing = tmp_path / "alice.keytab"
    configure_stores(hdfs={"kerberos_principal": "alice", "kerberos_keytab": str(missing)})
    with pytest.raises(AuthenticationError, match=rf"alice \(keytab {missing}\).*does not exist"):
        check_location(_warehouse(secured))


def test_a_delegation_token_serves_a_process_without_credentials(
    secured: MiniHdfs, kdc: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Got with a ticket, used without one (a Spark executor's case), renewed, cancelled: then refused. The
    token's value is in no message and no log line (urllib3 logs each request's URL at DEBUG)."""
    caplog.set_level(logging.DEBUG)
    _kinit(kdc, tmp_path)
    warehouse = _warehouse(secured)
    token = hdfs_client(warehouse).get_delegation_token()
    (tmp_path / "ccache").unlink()
    configure_stores(hdfs={"delegation_token": token})
    client = hdfs_client(warehouse)
    assert token not in repr(client)
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
        ms.execute(DDL)
        with _connect(ms) as conn:
            _commit(conn, 1)
        assert _ids(ms) == [10, 11, 12]
        assert _owner(ms) == "alice"
        with pytest.raises(AuthenticationError, match="kinit"):  # renewing or cancelling takes Kerberos
            client.renew_delegation_token(token)
        _kinit(kdc, tmp_path)
        configure_stores(hdfs={})
        owner = hdfs_client(warehouse)
        assert owner.renew_delegation_token(token) > 0
        owner.cancel_delegation_token(token)
        configure_stores(hdfs={"delegation_token": token})
        with pytest.raises(AuthenticationError) as raised:
            ms.table("sales").scan().to_arrow()
    message = str(raised.value)
    assert "delegation token" in message and "expired or was cancelled" in message
    assert token not in message
    assert "delegation=***" in caplog.text and token not in caplog.text


def test_a_token_cancelled_mid_stream_fails_the_batch_with_nothing_half_committed(
    secured: MiniHdfs, kdc: Any, tmp_path: Path
) -> None:
    """A streaming batch writes with a delegation token; it is cancelled after the batch's first commit: the
    next commit fails with an AuthenticationError, its txn does not commit, and the first one reads whole."""
    _kinit(kdc, tmp_path)
    warehouse = _warehouse(secured)
    owner = hdfs_client(warehouse)
    token = owner.get_delegation_token()
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=warehouse) as ms:
        ms.execute(DDL)
        configure_stores(hdfs={"delegation_token": token})
        conn = _connect(ms)
        try:
            _commit(conn, 1)
            owner.cancel_delegation_token(token)
            with pytest.raises(AcidStreamError) as raised:
                _commit(conn, 2)
        finally:
            conn.close()
        assert isinstance(raised.value, AuthenticationError) or isinstance(
            raised.value.__cause__, AuthenticationError
        ), repr(raised.value)
        assert token not in str(raised.value)
        assert not [t for t in ms.show_txns() if t.state.name == "OPEN"]
        configure_stores(hdfs={})
        assert _ids(ms) == [10, 11, 12]


def test_spark_executors_without_a_ticket_write_with_the_jobs_delegation_token(
    spark: Any, secured: MiniHdfs, kdc: Any, tmp_path: Path
) -> None:
    """The driver has a ticket, Spark's Python workers none (an empty ticket cache): a job registered without a
    token fails in its tasks with the AuthenticationError; registered after ``configure_stores`` set the
    driver's token, the job carries it (``JobSettings``) and its workers write and read with it."""
    from acidstream.spark import register

    _kinit(kdc, tmp_path)
    warehouse = _warehouse(secured)
    options = {"metastore": f"sqlite:///{tmp_path / 'm.db'}", "warehouse": warehouse}
    with Metastore.connect(options["metastore"], warehouse=warehouse) as ms:
        ms.execute(DDL)
    restore_workers = ticketless_workers(spark, secured.conf_dir, kdc, tmp_path / "executor-ccache")
    frame = spark.range(0, 40, numPartitions=2).selectExpr(
        "cast(id as int) id", "id * 100 amount", "if(id % 2 = 0, 'us', 'eu') region"
    )
    owner = hdfs_client(warehouse)
    token = owner.get_delegation_token()
    try:
        register(spark)
        with pytest.raises(Exception, match="AuthenticationError"):
            frame.write.format("acidstream").options(**options).mode("append").save("sales")
        configure_stores(hdfs={"delegation_token": token})
        job = register(spark)
        frame.write.format("acidstream").options(**options).mode("append").save("sales")
        read = job.read.format("acidstream").options(**options).load("sales")
        assert sorted(r.id for r in read.collect()) == list(range(40))
    finally:
        restore_workers()
        configure_stores(hdfs={})
        register(spark)
        owner.cancel_delegation_token(token)


def _wait_until_expired(kdc: Any, ccache: Path) -> None:
    """Until ``klist -s`` says the ticket in ``ccache`` expired, and then until the namenode's signed cookie
    (what spares a client SPNEGO for a while after it authenticated: 3 s on the test cluster) has too (lower
    bounds on time, no upper one)."""
    while kdc.has_ticket(ccache):
        time.sleep(0.5)
    time.sleep(COOKIE_VALIDITY + 1)


@pytest.mark.slow
def test_a_ticket_expiring_mid_batch_fails_the_next_commit_with_nothing_half_committed(
    secured: MiniHdfs, kdc: Any, tmp_path: Path
) -> None:
    """No keytab to renew from: the commit after the ticket's end is an AuthenticationError saying it
    expired and to run kinit; the batch's txns abort and the first commit reads whole."""
    kdc.kinit("alice", kdc.dir / "alice.keytab", tmp_path / "ccache", lifetime="20s")
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=_warehouse(secured)) as ms:
        ms.execute(DDL)
        conn = _connect(ms)
        try:
            _commit(conn, 1)
            _wait_until_expired(kdc, tmp_path / "ccache")
            with pytest.raises(AuthenticationError) as raised:
                _commit(conn, 2)
        finally:
            conn.close()
        assert "expired" in str(raised.value) and "kinit" in str(raised.value)
        assert not [t for t in ms.show_txns() if t.state.name == "OPEN"]
        kdc.kinit("alice", kdc.dir / "alice.keytab", tmp_path / "ccache")
        assert _ids(ms) == [10, 11, 12]


def test_a_ticket_from_a_keytab_is_renewed_from_it_mid_batch(
    secured: MiniHdfs, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tickets of 6 s (a krb5.conf of the test's own): a keytab login outlives them, logging in again from
    the keytab (a new AS exchange in the KDC's log) when its ticket has expired; the batch commits on."""
    short = tmp_path / "krb5.conf"
    short.write_text(kdc.krb5_conf.read_text().replace("ticket_lifetime = 24h", "ticket_lifetime = 6s"))
    monkeypatch.setenv("KRB5_CONFIG", str(short))
    keytab = tmp_path / "alice.keytab"  # a keytab of its own: its logins share no ticket cache with others'
    shutil.copy(kdc.dir / "alice.keytab", keytab)
    configure_stores(hdfs={"kerberos_principal": "alice", "kerberos_keytab": str(keytab)})
    with Metastore.connect(f"sqlite:///{tmp_path / 'm.db'}", warehouse=_warehouse(secured)) as ms:
        ms.execute(DDL)
        with _connect(ms) as conn:
            _commit(conn, 1)
            logins = _logins(kdc)
            # a ticket got now ends after the keytab login's
            kdc.kinit("alice", kdc.dir / "alice.keytab", tmp_path / "probe", lifetime="6s")
            _wait_until_expired(kdc, tmp_path / "probe")
            _commit(conn, 2)
            assert _logins(kdc) > logins + 1  # the probe's, and the keytab's again
        assert _ids(ms) == [10, 11, 12, 20, 21, 22]


def _logins(kdc: Any) -> int:
    """alice's AS exchanges (logins) in the KDC's log."""
    log = (kdc.dir / "kdc.log").read_text()
    return sum(1 for line in log.splitlines() if "AS_REQ" in line and "alice@" in line and "ISSUE" in line)


def test_the_command_line_takes_kerberos_from_acidstream_toml_and_exits_8_when_refused(
    secured: MiniHdfs, kdc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[hdfs]`` kerberos_principal and kerberos_keytab in the nearest acidstream.toml: the command streams
    into the kerberized warehouse; a keytab that is not there is exit code 8, one message, no traceback."""
    from click.testing import CliRunner

    from acidstream.cli import cli

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "acidstream.toml"
    metastore, warehouse = f"sqlite:///{tmp_path / 'm.db'}", _warehouse(secured)
    Metastore.connect(metastore, warehouse=warehouse).close()  # the metastore's database, as `init` makes it

    def run(keytab: Path, *args: str) -> tuple[int, str]:
        config.write_text(
            f'metastore = "{metastore}"\nwarehouse = "{warehouse}"\n'
            f'[hdfs]\nkerberos_principal = "alice"\nkerberos_keytab = "{keytab}"\n'
        )
        result = CliRunner().invoke(
            cli, list(args), env={"ACIDSTREAM_WAREHOUSE": "", "ACIDSTREAM_METASTORE": ""}
        )
        return result.exit_code, result.stderr

    code, err = run(kdc.dir / "alice.keytab", "sql", DDL)
    assert (code, err) == (0, ""), err
    code, err = run(tmp_path / "gone.keytab", "sql", DDL.replace("sales", "sales2"))
    assert code == 8, err
    assert "alice" in err and "gone.keytab" in err and "does not exist" in err
    assert "Traceback" not in err


def test_reads_straight_to_a_datanode_ask_the_namenode_again_once_its_token_is_cancelled(
    secured: MiniHdfs, kdc: Any, tmp_path: Path
) -> None:
    """Reads after the first go straight to the DataNode the namenode named, with the delegation token the
    namenode put in that redirect; once that token is no longer valid (cancelled here, expired in a long-lived
    process) the DataNode refuses it, and the read asks the namenode again instead of failing."""
    _kinit(kdc, tmp_path)
    fs, root = table_filesystem(_warehouse(secured))
    contents = {f"{root}/f{i}": bytes([65 + i]) * (1000 + i) for i in range(2)}
    for path, data in contents.items():
        with fs.open_output_stream(path) as out:
            out.write(data)
    first, second = contents
    handler = fs.handler
    assert handler.read_prefix(first, len(contents[first])) == contents[first]
    base, query = handler.client._datanode
    stale = handler.client.get_delegation_token()  # as the DataNode has not seen it yet, it asks the namenode
    handler.client.cancel_delegation_token(stale)
    handler.client._datanode = (base, {**query, "delegation": stale})
    assert handler.read_prefix(second, len(contents[second])) == contents[second]
    assert handler.client._datanode[1]["delegation"] != stale
