"""``BucketCodec``: the ``bucket`` field of every event packs codec version, writer id and statement id.

Delete events match rows on the full 32-bit value, so encoding must be bit-exact with Hive's (docs/format.md,
Bucket ids and bucketing).
"""

from __future__ import annotations

import enum

import numpy as np
import numpy.typing as npt

from acidstream.errors import AcidFormatError

MAX_BUCKET_ID = 4095
MAX_STATEMENT_ID = 4095
_VERSION_MASK = 0xE0000000
_WRITER_MASK = 0x0FFF0000
_STATEMENT_MASK = 0x00000FFF


def _to_int32(x: int) -> int:
    """The unsigned bit pattern as the signed Java int Hive stores."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


class BucketCodec(enum.Enum):
    V0 = 0
    V1 = 1

    def encode(self, bucket_id: int, statement_id: int = -1) -> int:
        """Bucket property for a writer; statement id -1 (streaming, compaction) encodes as 0."""
        if self is BucketCodec.V0:
            if bucket_id < 0 or bucket_id > 0x7FFFFFFF:
                raise ValueError(f"V0 bucket id must be in 0..2147483647, got {bucket_id}")
            return bucket_id
        if not 0 <= bucket_id <= MAX_BUCKET_ID:
            raise ValueError(f"bucket id must be in 0..{MAX_BUCKET_ID} for BucketCodec V1, got {bucket_id}")
        stmt = max(statement_id, 0)
        if statement_id < -1 or stmt > MAX_STATEMENT_ID:  # Hive maps any negative to 0; only -1 is meaningful
            raise ValueError(
                f"statement id must be in -1..{MAX_STATEMENT_ID} for BucketCodec V1, got {statement_id}"
            )
        return _to_int32((1 << 29) | (bucket_id << 16) | stmt)

    def encode_many(
        self, bucket_ids: npt.NDArray[np.integer], statement_id: int = -1
    ) -> npt.NDArray[np.int32]:
        """Vectorised V1 :meth:`encode` of many bucket ids with one statement id."""
        if self is not BucketCodec.V1:
            raise ValueError("only BucketCodec V1 encodes bucket ids with a statement id")
        ids = np.asarray(bucket_ids).astype(np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() > MAX_BUCKET_ID):
            raise ValueError(f"bucket ids must be in 0..{MAX_BUCKET_ID} for BucketCodec V1")
        base = self.encode(0, statement_id)
        return (base | (ids << 16)).astype(np.int32)

    def decode_writer_id(self, prop: int) -> int:
        if self is BucketCodec.V0:
            return prop
        return (prop & _WRITER_MASK) >> 16

    def decode_statement_id(self, prop: int) -> int:
        if self is BucketCodec.V0:
            return 0
        return prop & _STATEMENT_MASK

    def decode_writer_ids(self, props: npt.NDArray[np.integer]) -> npt.NDArray[np.int32]:
        """Vectorised ``decode_writer_id`` over a column of bucket properties."""
        arr = np.asarray(props).astype(np.int64)
        if self is BucketCodec.V0:
            return arr.astype(np.int32)
        return ((arr & _WRITER_MASK) >> 16).astype(np.int32)

    def decode_statement_ids(self, props: npt.NDArray[np.integer]) -> npt.NDArray[np.int32]:
        arr = np.asarray(props).astype(np.int64)
        if self is BucketCodec.V0:
            return np.zeros(arr.shape, dtype=np.int32)
        return (arr & _STATEMENT_MASK).astype(np.int32)

    @staticmethod
    def determine_version(prop: int) -> BucketCodec:
        """Codec from the top 3 bits (signed or unsigned input alike)."""
        version = (prop & _VERSION_MASK) >> 29
        if version == 0:
            return BucketCodec.V0
        if version == 1:
            return BucketCodec.V1
        raise AcidFormatError(f"Illegal 'bucket' format. Version={version}")

    @staticmethod
    def determine_versions(props: npt.NDArray[np.integer]) -> npt.NDArray[np.int8]:
        """Vectorised version bits; raises AcidFormatError if any value has an illegal version."""
        versions = ((np.asarray(props).astype(np.int64) & _VERSION_MASK) >> 29).astype(np.int8)
        bad = versions > 1
        if bad.any():
            raise AcidFormatError(f"Illegal 'bucket' format. Version={int(versions[bad][0])}")
        return versions


def decode_writer_id(prop: int) -> int:
    """Writer (bucket) id of a property of any legal version."""
    return BucketCodec.determine_version(prop).decode_writer_id(prop)


def decode_statement_id(prop: int) -> int:
    return BucketCodec.determine_version(prop).decode_statement_id(prop)


def determine_version(prop: int) -> BucketCodec:
    return BucketCodec.determine_version(prop)


def decode_writer_ids(props: npt.NDArray[np.integer]) -> npt.NDArray[np.int32]:
    """Writer ids of a column that may mix V0 and V1 values (V0 passes through)."""
    arr = np.asarray(props).astype(np.int64)
    versions = BucketCodec.determine_versions(arr)
    return np.where(versions == 1, (arr & _WRITER_MASK) >> 16, arr).astype(np.int32)
