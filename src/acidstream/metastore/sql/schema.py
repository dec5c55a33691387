"""The metastore's SQL schema: Hive's table names (lower-cased), plus a version table for upgrades.

Counters are single-row tables updated under a row lock (``NEXT_TXN_ID``, ``NEXT_LOCK_ID`` ...), as in Hive 3,
so that ids are gap-free and ordered on every backend without relying on database sequences. Notification event
ids are the exception: writers never touch a counter, readers publish ids (see ``notifications``).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    insert,
    inspect,
    select,
    text,
)

from acidstream.errors import SchemaVersionError
from acidstream.metastore.names import MAX_NAME_LENGTH

#: Bump when the schema changes and register the step in ``UPGRADES``.
SCHEMA_VERSION = 5

metadata = MetaData()

NAME = MAX_NAME_LENGTH
#: Auto-increment ids: SQLite only auto-increments an INTEGER PRIMARY KEY.
AUTO_ID = BigInteger().with_variant(Integer(), "sqlite")

schema_version = Table(
    "acidstream_version",
    metadata,
    Column("version", Integer, nullable=False),
    Column("created", BigInteger, nullable=False),
)

# --- catalog -------------------------------------------------------------------------------------------------

dbs = Table(
    "dbs",
    metadata,
    Column("db_id", AUTO_ID, primary_key=True, autoincrement=True),
    Column("name", String(NAME), nullable=False, unique=True),
    Column("location", Text, nullable=False),
    Column("comment", Text),
    Column("create_time", BigInteger, nullable=False),
)

tbls = Table(
    "tbls",
    metadata,
    Column("tbl_id", AUTO_ID, primary_key=True, autoincrement=True),
    Column("db_name", String(NAME), nullable=False),
    Column("tbl_name", String(NAME), nullable=False),
    Column("location", Text, nullable=False),
    Column("num_buckets", Integer, nullable=False),
    Column("create_time", BigInteger, nullable=False),
    UniqueConstraint("db_name", "tbl_name", name="uq_tbls_name"),
)

columns_v2 = Table(
    "columns_v2",
    metadata,
    Column("tbl_id", BigInteger, nullable=False),
    Column("integer_idx", Integer, nullable=False),
    Column("column_name", String(NAME), nullable=False),
    Column("type_name", Text, nullable=False),
    Column("comment", Text),
    PrimaryKeyConstraint("tbl_id", "integer_idx"),
)

partition_keys = Table(
    "partition_keys",
    metadata,
    Column("tbl_id", BigInteger, nullable=False),
    Column("integer_idx", Integer, nullable=False),
    Column("pkey_name", String(NAME), nullable=False),
    Column("pkey_type", Text, nullable=False),
    Column("pkey_comment", Text),
    PrimaryKeyConstraint("tbl_id", "integer_idx"),
)

bucketing_cols = Table(
    "bucketing_cols",
    metadata,
    Column("tbl_id", BigInteger, nullable=False),
    Column("integer_idx", Integer, nullable=False),
    Column("bucket_col_name", String(NAME), nullable=False),
    PrimaryKeyConstraint("tbl_id", "integer_idx"),
)

table_params = Table(
    "table_params",
    metadata,
    Column("tbl_id", BigInteger, nullable=False),
    Column("param_key", String(256), nullable=False),
    Column("param_value", Text, nullable=False),
    PrimaryKeyConstraint("tbl_id", "param_key"),
)

partitions = Table(
    "partitions",
    metadata,
    Column("part_id", AUTO_ID, primary_key=True, autoincrement=True),
    Column("tbl_id", BigInteger, nullable=False),
    Column("part_name", Text, nullable=False),
    Column("part_values", Text, nullable=False),  # JSON list, in partition-key order
    Column("location", Text, nullable=False),
    Column("create_time", BigInteger, nullable=False),
    UniqueConstraint("tbl_id", "part_name", name="uq_partitions_name"),
)

# --- transactions ----------------------------------------------------------------------------------------------

next_txn_id = Table("next_txn_id", metadata, Column("ntxn_next", BigInteger, nullable=False))

txns = Table(
    "txns",
    metadata,
    Column("txn_id", BigInteger, primary_key=True, autoincrement=False),
    Column("txn_state", String(1), nullable=False),
    Column("txn_started", BigInteger, nullable=False),
    Column("txn_last_heartbeat", BigInteger, nullable=False),
    Column("txn_user", String(NAME)),
    Column("txn_host", String(NAME)),
    Column("txn_agent_info", Text),
    Column("txn_heartbeat_count", Integer, nullable=False, default=0),
    # The opener's own timeout: a txn is aborted only for missing its own heartbeats (NULL: opened by an older
    # release; the housekeeper's timeout applies). Hive's hive.txn.timeout is the server's; ours is per client.
    Column("txn_timeout_ms", BigInteger),
    Index("ix_txns_state", "txn_state"),
)

txn_components = Table(
    "txn_components",
    metadata,
    Column("tc_txnid", BigInteger, nullable=False),
    Column("tc_database", String(NAME), nullable=False),
    Column("tc_table", String(NAME)),
    Column("tc_partition", Text),
    Column("tc_operation_type", String(1), nullable=False),
    Column("tc_writeid", BigInteger),
    Index("ix_tc_txnid", "tc_txnid"),
    Index("ix_tc_table", "tc_database", "tc_table"),
)

completed_txn_components = Table(
    "completed_txn_components",
    metadata,
    Column("ctc_txnid", BigInteger, nullable=False),
    Column("ctc_database", String(NAME), nullable=False),
    Column("ctc_table", String(NAME)),
    Column("ctc_partition", Text),
    Column("ctc_timestamp", BigInteger, nullable=False),
    Column("ctc_writeid", BigInteger),
    Column("ctc_update_delete", String(1), nullable=False),
    Index("ix_ctc_table", "ctc_database", "ctc_table", "ctc_txnid"),
)

txn_to_write_id = Table(
    "txn_to_write_id",
    metadata,
    Column("t2w_txnid", BigInteger, nullable=False),
    Column("t2w_database", String(NAME), nullable=False),
    Column("t2w_table", String(NAME), nullable=False),
    Column("t2w_writeid", BigInteger, nullable=False),
    UniqueConstraint("t2w_txnid", "t2w_database", "t2w_table", name="uq_t2w_txnid"),
    UniqueConstraint("t2w_database", "t2w_table", "t2w_writeid", name="uq_t2w_writeid"),
)

next_write_id = Table(
    "next_write_id",
    metadata,
    Column("nwi_database", String(NAME), nullable=False),
    Column("nwi_table", String(NAME), nullable=False),
    Column("nwi_next", BigInteger, nullable=False),
    PrimaryKeyConstraint("nwi_database", "nwi_table"),
)

write_set = Table(
    "write_set",
    metadata,
    Column("ws_database", String(NAME), nullable=False),
    Column("ws_table", String(NAME), nullable=False),
    Column("ws_partition", Text),
    Column("ws_txnid", BigInteger, nullable=False),
    Column("ws_commit_id", BigInteger, nullable=False),
    Column("ws_operation_type", String(1), nullable=False),
    # commit's conflict check reads only entries committed after the txn started
    Index("ix_ws_commit", "ws_database", "ws_table", "ws_commit_id"),
)

# --- locks -------------------------------------------------------------------------------------------------------

next_lock_id = Table("next_lock_id", metadata, Column("nl_next", BigInteger, nullable=False))

hive_locks = Table(
    "hive_locks",
    metadata,
    Column("hl_lock_ext_id", BigInteger, nullable=False),
    Column("hl_lock_int_id", BigInteger, nullable=False),
    Column("hl_txnid", BigInteger, nullable=False),  # 0 = no txn
    Column("hl_db", String(NAME), nullable=False),
    Column("hl_table", String(NAME)),
    Column("hl_partition", Text),
    Column("hl_lock_state", String(1), nullable=False),
    Column("hl_lock_type", String(1), nullable=False),
    Column("hl_last_heartbeat", BigInteger, nullable=False),
    Column("hl_acquired_at", BigInteger),
    Column("hl_user", String(NAME)),
    Column("hl_host", String(NAME)),
    Column("hl_agent_info", Text),
    Column("hl_blockedby_ext_id", BigInteger),
    Column("hl_blockedby_int_id", BigInteger),
    Column("hl_timeout_ms", BigInteger),  # a txn-less lock's own timeout, as txn_timeout_ms
    PrimaryKeyConstraint("hl_lock_ext_id", "hl_lock_int_id"),
    Index("ix_hl_txnid", "hl_txnid"),
)

# --- compaction ----------------------------------------------------------------------------------------------------

next_compaction_queue_id = Table(
    "next_compaction_queue_id", metadata, Column("ncq_next", BigInteger, nullable=False)
)


def _compaction_columns(prefix: str) -> list[Column[object]]:
    return [
        Column(f"{prefix}_id", BigInteger, primary_key=True, autoincrement=False),
        Column(f"{prefix}_database", String(NAME), nullable=False),
        Column(f"{prefix}_table", String(NAME), nullable=False),
        Column(f"{prefix}_partition", Text),
        Column(f"{prefix}_state", String(1), nullable=False),
        Column(f"{prefix}_type", String(1), nullable=False),
        Column(f"{prefix}_worker_id", String(NAME)),
        Column(f"{prefix}_enqueue_time", BigInteger, nullable=False),
        Column(f"{prefix}_start", BigInteger),
        Column(f"{prefix}_end", BigInteger),
        Column(f"{prefix}_run_as", String(NAME)),
        Column(f"{prefix}_highest_write_id", BigInteger),
        Column(f"{prefix}_error_message", Text),
        *_compaction_columns_v3(prefix),
    ]


def _compaction_columns_v3(prefix: str) -> list[Column[object]]:
    """Columns schema version 3 added: the worker's txn, its publication and what the cleaner must delete.

    ``next_reader_id`` is Hive's ``CQ_NEXT_TXN_ID`` for snapshot readers: readers registered below it may
    still read what the compaction replaced. ``publish_id`` marks the start of moving its output into place.
    ``meta_info`` (JSON): the ``_tmp`` directory, the output directories and the input directories.
    ``cleaner_start``: when a cleaner claimed the entry (Hive 4's ``CQ_CLEANER_START``).
    """
    return [
        Column(f"{prefix}_txn_id", BigInteger),
        Column(f"{prefix}_initiator_id", String(NAME)),
        Column(f"{prefix}_attempts", Integer),
        Column(f"{prefix}_publish_id", BigInteger),
        Column(f"{prefix}_next_reader_id", BigInteger),
        Column(f"{prefix}_commit_time", BigInteger),
        Column(f"{prefix}_meta_info", Text),
        Column(f"{prefix}_cleaner_start", BigInteger),
    ]


compaction_queue = Table(
    "compaction_queue", metadata, *_compaction_columns("cq"), Index("ix_cq_table", "cq_database", "cq_table")
)
completed_compactions = Table(
    "completed_compactions",
    metadata,
    *_compaction_columns("cc"),
    Index("ix_cc_target", "cc_database", "cc_table", "cc_partition"),
)

# --- snapshot readers ----------------------------------------------------------------------------------------------

#: Ids of reader registrations, and the clock that orders them against compactions' publications.
next_reader_id = Table("next_reader_id", metadata, Column("nr_next", BigInteger, nullable=False))

#: Scans in progress (Hive 3's MIN_HISTORY_LEVEL idea for readers without a txn): the cleaner keeps every file
#: a compaction replaced until the readers registered before its publication are gone.
snapshot_readers = Table(
    "snapshot_readers",
    metadata,
    Column("sr_id", BigInteger, primary_key=True, autoincrement=False),
    Column("sr_database", String(NAME), nullable=False),
    Column("sr_table", String(NAME), nullable=False),
    Column("sr_started", BigInteger, nullable=False),
    Column("sr_last_heartbeat", BigInteger, nullable=False),
    Column("sr_user", String(NAME)),
    Column("sr_host", String(NAME)),
    Column("sr_agent_info", Text),
    Column("sr_lease_ms", BigInteger),  # the reader's own lease, as txn_timeout_ms
    Index("ix_sr_table", "sr_database", "sr_table"),
)

# --- notifications ---------------------------------------------------------------------------------------------------

notification_sequence = Table(
    "notification_sequence", metadata, Column("next_event_id", BigInteger, nullable=False)
)

notification_log = Table(
    "notification_log",
    metadata,
    # Write order (an auto-increment key, no shared row to lock); nl_id is NULL until the event is published.
    Column("nl_seq", AUTO_ID, primary_key=True, autoincrement=True),
    Column("nl_id", BigInteger),
    Column("event_time", BigInteger, nullable=False),
    Column("event_type", String(32), nullable=False),
    Column("db_name", String(NAME)),
    Column("tbl_name", String(NAME)),
    Column("partition", Text),
    Column("txn_id", BigInteger),
    Column("write_id", BigInteger),
    Column("message", Text, nullable=False),
    Index("ix_nl_id", "nl_id", unique=True),
    Index(
        "ix_nl_unpublished",
        "nl_seq",
        postgresql_where=text("nl_id IS NULL"),
        sqlite_where=text("nl_id IS NULL"),
    ),
)

#: Housekeeping bookkeeping shared by all clients (Hive's AUX_TABLE): key → last run time in ms.
aux_table = Table(
    "aux_table",
    metadata,
    Column("mt_key", String(NAME), primary_key=True),
    Column("mt_value", BigInteger, nullable=False),
)

# --- replication ---------------------------------------------------------------------------------------------------

#: On a replica: the replica's txn for each source txn (Hive's REPL_TXN_MAP; ``policy`` names the source).
repl_txn_map = Table(
    "repl_txn_map",
    metadata,
    Column("rtm_repl_policy", String(NAME), nullable=False),
    Column("rtm_src_txn_id", BigInteger, nullable=False),
    Column("rtm_target_txn_id", BigInteger, nullable=False),
    PrimaryKeyConstraint("rtm_repl_policy", "rtm_src_txn_id"),
    Index("ix_rtm_target", "rtm_target_txn_id"),
)

#: On a replica: the last source event applied, written in the DB transaction that applied it.
repl_state = Table(
    "repl_state",
    metadata,
    Column("rs_repl_policy", String(NAME), primary_key=True),
    Column("rs_source", Text, nullable=False),
    Column("rs_last_event_id", BigInteger, nullable=False),
    Column("rs_last_event_time", BigInteger, nullable=False),
    Column("rs_applied_time", BigInteger, nullable=False),
    Column("rs_bootstrap_event_id", BigInteger, nullable=False),
)

#: On a replica: each replicated file's copied length and the CRC-32 of those bytes, so a copy continues
#: the checksum from where it stopped instead of re-reading the file.
repl_files = Table(
    "repl_files",
    metadata,
    Column("rf_path", String(1024), primary_key=True),
    Column("rf_length", BigInteger, nullable=False),
    Column("rf_crc32", BigInteger, nullable=False),
)

#: On a source: how far each follower has applied its events; the cleaner keeps what they still need.
repl_followers = Table(
    "repl_followers",
    metadata,
    Column("rfl_name", String(NAME), primary_key=True),
    Column("rfl_last_event_id", BigInteger, nullable=False),
    Column("rfl_last_heartbeat", BigInteger, nullable=False),
    Column("rfl_lease_ms", BigInteger, nullable=False),
)

#: Results of changes that must happen once although the answer to their commit may be lost (see ``once``).
request_results = Table(
    "request_results",
    metadata,
    Column("rq_id", String(32), primary_key=True),
    Column("rq_result", Text, nullable=False),
    Column("rq_time", BigInteger, nullable=False),
    Index("ix_rq_time", "rq_time"),
)

#: The compactor's cleaner finds a compaction's COMPACTED event by the compactor txn.
_IX_NL_TXN = Index("ix_nl_txn", notification_log.c.txn_id)

COUNTERS = (next_txn_id, next_lock_id, next_compaction_queue_id, notification_sequence, next_reader_id)

_NL_COLUMNS = "event_time, event_type, db_name, tbl_name, partition, txn_id, write_id, message"


def _upgrade_v1(conn: Connection) -> None:
    """v1 gave each event its id from a row-locked counter at write time, serialising all writers on PostgreSQL.

    v2 keeps the old events (published, ``nl_seq = nl_id``) in a rebuilt table: SQLite cannot alter a key.
    The write set's index gains the commit id, so commit's conflict check does not read a table's whole history.
    """
    conn.exec_driver_sql("DROP INDEX ix_ws_table")
    next(i for i in write_set.indexes if i.name == "ix_ws_commit").create(conn)
    conn.exec_driver_sql("CREATE TABLE notification_log_v1 AS SELECT * FROM notification_log")
    conn.exec_driver_sql("DROP TABLE notification_log")
    notification_log.create(conn)
    conn.exec_driver_sql(
        f"INSERT INTO notification_log (nl_seq, nl_id, {_NL_COLUMNS}) "
        f"SELECT nl_id, nl_id, {_NL_COLUMNS} FROM notification_log_v1"
    )
    conn.exec_driver_sql("DROP TABLE notification_log_v1")
    if conn.dialect.name == "postgresql":  # explicit keys were copied: move the serial past them
        conn.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('notification_log', 'nl_seq'), max(nl_seq)) "
            "FROM notification_log HAVING count(*) > 0"
        )


def _upgrade_v2(conn: Connection) -> None:
    """v3 adds the compactor's columns, the reader registrations and their counter (each only if missing)."""
    inspector = inspect(conn)
    existing = set(inspector.get_table_names())
    _add_missing_columns(
        conn,
        [
            (table, column.name)
            for table, prefix in ((compaction_queue, "cq"), (completed_compactions, "cc"))
            for column in _compaction_columns_v3(prefix)
        ],
    )
    for index in (*compaction_queue.indexes, *completed_compactions.indexes):
        if index.name not in {i["name"] for i in inspector.get_indexes(index.table.name)}:  # type: ignore[union-attr]
            index.create(conn)
    for table in (next_reader_id, snapshot_readers):
        if table.name not in existing:
            table.create(conn)
            if table is next_reader_id:
                conn.execute(insert(next_reader_id).values(nr_next=1))


def _upgrade_v3(conn: Connection) -> None:
    """v4 adds replication: the replica's txn map, applied-event state and file checksums, the source's
    followers, and an index to find a compaction's event by its txn."""
    existing = set(inspect(conn).get_table_names())
    for table in (repl_txn_map, repl_state, repl_files, repl_followers):
        if table.name not in existing:
            table.create(conn)
    if "ix_nl_txn" not in {i["name"] for i in inspect(conn).get_indexes(notification_log.name)}:
        _IX_NL_TXN.create(conn)


def _upgrade_v4(conn: Connection) -> None:
    """v5 records each txn's, txn-less lock's and reader's own timeout with it: one client's short timeout
    no longer aborts another client's txns; and the results of changes that must happen once."""
    if request_results.name not in set(inspect(conn).get_table_names()):
        request_results.create(conn)
    _add_missing_columns(
        conn,
        [(txns, "txn_timeout_ms"), (hive_locks, "hl_timeout_ms"), (snapshot_readers, "sr_lease_ms")],
    )


def _add_missing_columns(conn: Connection, columns: list[tuple[Table, str]]) -> None:
    inspector = inspect(conn)
    for table, name in columns:
        if name not in {c["name"] for c in inspector.get_columns(table.name)}:
            kind = table.c[name].type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {name} {kind}")


#: Upgrade steps: ``UPGRADES[v]`` migrates a version-``v`` database to ``v + 1`` inside the caller's transaction.
UPGRADES: dict[int, Callable[[Connection], None]] = {
    1: _upgrade_v1,
    2: _upgrade_v2,
    3: _upgrade_v3,
    4: _upgrade_v4,
}


def ensure_schema(conn: Connection, now_ms: int) -> None:
    """Create the schema in an empty database, upgrade an older one, or refuse an incompatible one.

    Runs inside the caller's write transaction, so concurrent first connections create it exactly once.
    """
    existing = set(inspect(conn).get_table_names())
    if schema_version.name not in existing:
        if existing & set(metadata.tables):
            raise SchemaVersionError(
                "metastore database has acidstream tables but no version table; it was not created by "
                "acidstream (or is damaged)"
            )
        metadata.create_all(conn)
        conn.execute(insert(schema_version).values(version=SCHEMA_VERSION, created=now_ms))
        for counter in COUNTERS:
            conn.execute(insert(counter).values({next(iter(counter.c)).name: 1}))
        return
    found = conn.execute(select(schema_version.c.version)).scalar()
    if found is None:
        raise SchemaVersionError("metastore version table is empty; the database is damaged")
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"metastore schema version {found} was written by a newer acidstream release; this release "
            f"understands versions up to {SCHEMA_VERSION}: upgrade acidstream"
        )
    while found < SCHEMA_VERSION:
        step = UPGRADES.get(found)
        if step is None:
            raise SchemaVersionError(
                f"metastore schema version {found} is too old for this release (version {SCHEMA_VERSION}) "
                "and no upgrade path exists from it"
            )
        step(conn)
        found += 1
        conn.execute(schema_version.update().values(version=found))
