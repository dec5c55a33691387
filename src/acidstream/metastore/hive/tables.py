"""A Hive Metastore table (thrift ``Table``) as acidstream's table definition, full-ACID ORC tables only."""

from __future__ import annotations

from hive_metastore import ttypes

from acidstream.acid.types import Column, parse_type
from acidstream.errors import AcidFormatError, InvalidObjectException
from acidstream.metastore.models import TableDefinition

ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
ORC_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
#: What ``HiveMetaStoreClient`` declares (its ``VERSION``): without it the metastore refuses to describe an
#: insert-only table at all, and we would not name the table as not full-ACID.
CLIENT_CAPABILITIES = ttypes.ClientCapabilities(values=[ttypes.ClientCapability.INSERT_ONLY_TABLES])


def file_uri(location: str) -> str:
    """Hadoop's ``file:/x`` (what the metastore stores) as ``file:///x``, which acidstream's storage reads."""
    if location.startswith("file:") and not location.startswith("file://"):
        return "file://" + location[len("file:") :]
    return location


def _columns(schemas: list[ttypes.FieldSchema] | None, where: str) -> tuple[Column, ...]:
    try:
        return tuple(Column(f.name.lower(), parse_type(f.type), f.comment) for f in schemas or [])
    except (InvalidObjectException, AcidFormatError) as exc:
        raise InvalidObjectException(f"{where}: {exc}") from exc


def table_from_thrift(table: ttypes.Table) -> TableDefinition:
    """The definition of a full-ACID ORC table; :class:`InvalidObjectException` naming it for any other
    (acidstream writes and reads nothing else)."""
    name = f"{table.dbName}.{table.tableName}".lower()
    sd = table.sd
    props = dict(table.parameters or {})
    lowered = {k.lower(): v.lower() for k, v in props.items()}
    serde = sd.serdeInfo.serializationLib if sd is not None and sd.serdeInfo is not None else None
    if lowered.get("transactional") != "true" or lowered.get("transactional_properties") == "insert_only":
        raise InvalidObjectException(
            f"{name} is not a full-ACID table (transactional={props.get('transactional')!r}, "
            f"transactional_properties={props.get('transactional_properties')!r})"
        )
    if sd is None or serde != ORC_SERDE or sd.inputFormat != ORC_INPUT_FORMAT:
        raise InvalidObjectException(
            f"{name} is not stored as ORC (serde {serde!r}, input format "
            f"{sd.inputFormat if sd is not None else None!r}): acidstream writes full-ACID ORC tables only"
        )
    if not sd.location:
        raise InvalidObjectException(f"{name} has no location")
    buckets = max(sd.numBuckets or 0, 0)  # Hive's -1 (not bucketed) is our 0
    return TableDefinition(
        db=table.dbName.lower(),
        name=table.tableName.lower(),
        columns=_columns(sd.cols, f"{name} columns"),
        partition_keys=_columns(table.partitionKeys, f"{name} partition keys"),
        bucket_columns=tuple(c.lower() for c in sd.bucketCols or []),
        num_buckets=buckets,
        # Hive's Utilities.getBucketingVersion: a table without the property hashes as version 1
        bucketing_version=int(props.get("bucketing_version", "1")),
        properties=props,
        location=file_uri(sd.location),
        table_id=table.id or 0,
    )
