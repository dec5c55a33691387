"""metastore/location.py: a missing extra is named; any other import error of a backend is not hidden as one."""

from __future__ import annotations

import sys

import pytest

from acidstream.errors import MetastoreUrlError
from acidstream.metastore.location import HIVE, backend_kind

URL = "thrift://127.0.0.1:9"


def test_a_missing_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, HIVE.module, raising=False)
    monkeypatch.setitem(sys.modules, "hive_metastore", None)  # as if the hive extra were not installed
    with pytest.raises(MetastoreUrlError, match=r"pip install 'acidstream\[hive\]'"):
        backend_kind(URL).opener(URL)


def test_another_import_error_is_raised_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, HIVE.module, raising=False)
    monkeypatch.setitem(
        sys.modules, "acidstream.metastore.hive.transport", None
    )  # a fault of ours, not the extra
    with pytest.raises(ImportError) as err:
        backend_kind(URL).opener(URL)
    assert not isinstance(err.value, MetastoreUrlError)
