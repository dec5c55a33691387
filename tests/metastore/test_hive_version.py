"""Which Hive Metastores the Hive backend runs on: Hive 4.0 and later, checked when it connects."""

from __future__ import annotations

import pytest

from support.deps import import_or_skip

import_or_skip("hive_metastore", reason="the hive extra (pyiceberg[hive]) is not installed")

from acidstream.errors import MetaException  # noqa: E402  (after the skip: it needs the hive extra)
from acidstream.metastore.hive.client import check_version  # noqa: E402


@pytest.mark.parametrize("version", ["4.0.0", "4.0.1", "4.1.0-SNAPSHOT", "5.0"])
def test_hive_4_and_later_are_accepted(version: str) -> None:
    check_version(version, "thrift://hms:9083")


@pytest.mark.parametrize("version", ["3.1.3", "2.3.9", "", "unknown"])
def test_older_or_unknown_versions_are_refused_naming_the_metastore(version: str) -> None:
    with pytest.raises(
        MetaException, match=rf"thrift://hms:9083 is version {version!r}: acidstream needs Hive 4.0"
    ):
        check_version(version, "thrift://hms:9083")
