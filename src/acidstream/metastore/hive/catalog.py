"""Databases, tables and partitions on a Hive Metastore: the calls Hive's DDL makes, for full-ACID ORC tables.

A table is created as Hive's ``CREATE TABLE ... STORED AS ORC TBLPROPERTIES ('transactional'='true')`` creates
it (managed, ORC serde and formats, the table's bucketing); the metastore picks its location under the
database's, and drops delete the data of managed tables themselves (``deleteData``), as for Hive's ``DROP``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hive_metastore import ttypes

from acidstream.acid.partitions import make_part_name
from acidstream.acid.types import Column
from acidstream.errors import (
    AlreadyExistsException,
    MetaException,
    MetastoreUnavailable,
    NoSuchObjectException,
)
from acidstream.metastore.hive.host import HiveHost
from acidstream.metastore.hive.tables import (
    CLIENT_CAPABILITIES,
    ORC_INPUT_FORMAT,
    ORC_OUTPUT_FORMAT,
    ORC_SERDE,
    file_uri,
)
from acidstream.metastore.models import Partition
from acidstream.metastore.names import (
    check_bucketing_version,
    checked_partition_name,
    split_name,
    valid_name,
    validate_table,
)

if TYPE_CHECKING:
    from acidstream.metastore.models import TableDefinition

#: What Hive writes into a new transactional table's parameters (``bucketing_version`` 2: Hive 3+ tables).
ACID_PARAMETERS = {"transactional": "true", "transactional_properties": "default", "bucketing_version": "2"}


class HiveCatalogCalls(HiveHost):
    """Catalog calls of the Hive backend (mixed into :class:`~acidstream.metastore.hive.client.HiveMetastoreClient`)."""

    def create_database(self, name: str, if_not_exists: bool = False, comment: str | None = None) -> None:
        database = ttypes.Database(name=valid_name("database", name), description=comment, parameters={})
        try:
            self._call("create_database", database, idempotent=False)
        except AlreadyExistsException:
            if not if_not_exists:
                raise

    def drop_database(self, name: str, cascade: bool = False, if_exists: bool = False) -> list[str]:
        """Drop a database (with ``cascade`` its tables); the metastore deletes the data of managed tables, so
        nothing is left for the caller to delete."""
        try:
            self._call("drop_database", name.lower(), True, cascade, idempotent=False)
        except NoSuchObjectException:
            if not if_exists:
                raise
        return []

    def list_databases(self) -> list[str]:
        return sorted(self._call("get_all_databases"))

    def create_table(
        self,
        db: str,
        name: str,
        columns: Sequence[Column],
        *,
        partition_keys: Sequence[Column] = (),
        bucket_columns: Sequence[str] = (),
        num_buckets: int = 0,
        properties: Mapping[str, str] | None = None,
        if_not_exists: bool = False,
    ) -> TableDefinition:
        valid_name("table", name)
        validate_table(columns, partition_keys, bucket_columns, num_buckets)
        parameters = {**ACID_PARAMETERS, **(properties or {})}
        check_bucketing_version(parameters)  # Hive's metastore keeps any value; its readers know 1 and 2
        sd = ttypes.StorageDescriptor(
            cols=[_field(c) for c in columns],
            inputFormat=ORC_INPUT_FORMAT,
            outputFormat=ORC_OUTPUT_FORMAT,
            serdeInfo=ttypes.SerDeInfo(serializationLib=ORC_SERDE, parameters={}),
            numBuckets=num_buckets if num_buckets > 0 else -1,
            bucketCols=list(bucket_columns),
            sortCols=[],
            parameters={},
        )
        table = ttypes.Table(
            tableName=name.lower(),
            dbName=db.lower(),
            tableType="MANAGED_TABLE",
            sd=sd,
            partitionKeys=[_field(c) for c in partition_keys],
            parameters=parameters,
        )
        try:
            self._call("create_table", table, idempotent=False)
        except AlreadyExistsException:
            if not if_not_exists:
                raise
        return self.get_table(f"{db}.{name}")

    def list_tables(self, db: str = "default") -> list[str]:
        self._call("get_database", db.lower())  # NoSuchObjectException for a missing database
        return sorted(self._call("get_all_tables", db.lower()))

    def drop_table(self, table_name: str, if_exists: bool = False) -> list[str]:
        """Drop the table; the metastore deletes a managed table's data, so nothing is left to delete."""
        db, name = split_name(table_name)
        try:
            self._call("drop_table", db, name, True, idempotent=False)
        except NoSuchObjectException:
            if not if_exists:
                raise
        return []

    def alter_table_properties(self, table_name: str, properties: Mapping[str, str]) -> None:
        check_bucketing_version(properties)
        db, name = split_name(table_name)
        request = ttypes.GetTableRequest(dbName=db, tblName=name, capabilities=CLIENT_CAPABILITIES)
        table = self._call("get_table_req", request).table
        table.parameters = {**(table.parameters or {}), **properties}
        self._call("alter_table", db, name, table, idempotent=False)

    def alter_table_columns(
        self, table_name: str, columns: Sequence[Column], *, cascade: bool = False
    ) -> None:
        """As Hive's own ALTER: the table's ``sd.cols`` through ``alter_table``; the metastore refuses an
        incompatible change itself (``hive.metastore.disallow.incompatible.col.type.changes``). ``cascade``:
        the metastore changes every partition's ``sd.cols`` too (the ``CASCADE`` environment property Hive's
        ALTER ... CASCADE sends); without it, partitions keep the columns they had."""
        db, name = split_name(table_name)
        request = ttypes.GetTableRequest(dbName=db, tblName=name, capabilities=CLIENT_CAPABILITIES)
        table = self._call("get_table_req", request).table
        table.sd.cols = [_field(c) for c in columns]
        context = ttypes.EnvironmentContext(properties={"CASCADE": "true"}) if cascade else None
        self._call("alter_table_with_environment_context", db, name, table, context, idempotent=False)

    def add_partition(
        self, table_name: str, values: Sequence[str | None], *, if_not_exists: bool = True
    ) -> Partition:
        """Create a partition (``append_partition``, with the table's location scheme), its values checked
        against the table's keys first; an existing one is returned when ``if_not_exists``, as Hive's streaming
        client swallows ``AlreadyExistsException``. Clients adding one partition at once race in Hive's
        metastore, which refuses all but one (``AlreadyExistsException``, or a ``MetaException`` that the row
        "could not be made persistent"): a partition that exists after such a refusal is the one added."""
        db, name = split_name(table_name)
        keys = self._keys(table_name)
        part_name = checked_partition_name(f"{db}.{name}", keys, values)
        vals = ["" if v is None else v for v in values]
        try:
            part = self._call("append_partition", db, name, vals, idempotent=False)
        except MetastoreUnavailable:
            raise
        except MetaException:
            existing = self._existing_partition(db, name, vals)
            if existing is None:
                raise
            if not if_not_exists:
                raise AlreadyExistsException(f"Partition {part_name} of {db}.{name} already exists") from None
            part = existing
        return self._partition(table_name, part, keys)

    def _existing_partition(self, db: str, name: str, vals: list[str]) -> ttypes.Partition | None:
        try:
            return self._call("get_partition", db, name, vals)
        except NoSuchObjectException:
            return None

    def get_partition(self, table_name: str, values: Sequence[str | None]) -> Partition | None:
        db, name = split_name(table_name)
        keys = self._keys(table_name)
        checked_partition_name(f"{db}.{name}", keys, values)
        part = self._existing_partition(db, name, ["" if v is None else v for v in values])
        return None if part is None else self._partition(table_name, part, keys)

    def list_partitions(self, table_name: str) -> list[Partition]:
        db, name = split_name(table_name)
        parts = self._call("get_partitions", db, name, -1)
        keys = self._keys(table_name)
        return sorted((self._partition(table_name, p, keys) for p in parts), key=lambda p: p.name)

    def drop_partition(self, table_name: str, values: Sequence[str]) -> None:
        """Drop the partition (and, the table being managed, its data); :class:`NoSuchObjectException` naming it
        if there is none."""
        db, name = split_name(table_name)
        part_name = checked_partition_name(f"{db}.{name}", self._keys(table_name), values)
        try:
            self._call("drop_partition", db, name, list(values), True, idempotent=False)
        except NoSuchObjectException:
            raise NoSuchObjectException(f"Partition {part_name} of {db}.{name} does not exist") from None

    def _keys(self, table_name: str) -> list[str]:
        return [k.name for k in self.get_table(table_name).partition_keys]

    def _partition(self, table_name: str, part: ttypes.Partition, keys: list[str] | None = None) -> Partition:
        db, name = split_name(table_name)
        keys = self._keys(table_name) if keys is None else keys
        values = tuple(part.values)
        return Partition(f"{db}.{name}", values, make_part_name(keys, values), file_uri(part.sd.location))


def _field(column: Column) -> ttypes.FieldSchema:
    return ttypes.FieldSchema(name=column.name, type=str(column.type), comment=column.comment)
