"""Interop: our directory selection and write-id lists against Hive's own classes (tests/support/hivejvm.py).

Hive 2.3.10's ``AcidUtils.getAcidState`` takes txn ids where Hive 3+ takes write ids (same numbers here) and
treats every base as a compacted one, so the trees below give every base the Hive 3 compacted marker and
carry no visibility suffixes. storage-api 2.8.1's ``ValidReaderWriteIdList`` is the Hive 3 class itself.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from acidstream.acid.names import base_dir, delete_delta_dir, delta_dir
from acidstream.acid.selection import get_acid_state
from acidstream.acid.writeids import LONG_MAX, ValidWriteIdList, write_id_list_from_states
from acidstream.errors import NotEnoughHistory

FS = pafs.LocalFileSystem()
MAX_ID = 10


def random_tree(rnd: random.Random) -> list[str]:
    """Arbitrary mixes of bases, streaming/minor-compacted ranges and per-statement deltas."""
    names: set[str] = set()
    for _ in range(rnd.randint(1, 9)):
        a = rnd.randint(1, MAX_ID)
        b = a if rnd.random() < 0.5 else rnd.randint(a, MAX_ID)
        stmt = rnd.choice([None, None, 0, 1]) if a == b else None
        kind = rnd.random()
        if kind < 0.15:
            names.add(base_dir(b))
        elif kind < 0.4:
            names.add(delete_delta_dir(a, b, stmt))
            if rnd.random() < 0.7:
                names.add(delta_dir(a, b, stmt))
        else:
            names.add(delta_dir(a, b, stmt))
    return sorted(names)


def random_write_ids(rnd: random.Random) -> ValidWriteIdList:
    hwm = rnd.randint(0, MAX_ID)
    states = {w: rnd.choice("cccoa") for w in range(1, hwm + 1)}
    return write_id_list_from_states(
        "db.t", hwm, [w for w, s in states.items() if s == "o"], [w for w, s in states.items() if s == "a"]
    )


def hive23_txn_list(wl: ValidWriteIdList) -> str:
    """Hive 2.3's ``ValidReadTxnList`` string: ``hwm:minOpenTxn[:exception]...``."""
    return ":".join(map(str, [wl.high_watermark, wl.min_open_write_id, *wl.exceptions]))


def hive_state(jvm: Any, conf: Any, path: str, txns: str) -> tuple[str | None, list[str], list[str]] | str:
    acid = jvm.org.apache.hadoop.hive.ql.io.AcidUtils
    try:
        d = acid.getAcidState(
            jvm.org.apache.hadoop.fs.Path(path),
            conf,
            jvm.org.apache.hadoop.hive.common.ValidReadTxnList(txns),
        )
    except Exception as exc:  # py4j wraps the IOException
        assert "Not enough history available" in str(exc), exc
        return "not enough history"
    base = d.getBaseDirectory()
    return (
        None if base is None else base.getName(),
        [x.getPath().getName() for x in d.getCurrentDirectories()],
        sorted(x.getPath().getName() for x in d.getObsolete()),
    )


def our_state(path: str, wl: ValidWriteIdList) -> tuple[str | None, list[str], list[str]] | str:
    try:
        s = get_acid_state(FS, path, wl)
    except NotEnoughHistory:
        return "not enough history"
    return (
        None if s.base is None else s.base.name,
        [d.name for d in s.deltas],
        sorted(Path(p).name for p in s.obsolete),
    )


def test_get_acid_state_matches_hive(jvm: Any, spark: Any, tmp_path: Path) -> None:
    conf = spark._jsc.hadoopConfiguration()
    rnd = random.Random(20240601)
    compared = 0
    kinds: set[str] = set()
    for i in range(60):
        names, wl = random_tree(rnd), random_write_ids(rnd)
        if any(n.startswith("base_") and int(n[5:]) == wl.min_open_write_id for n in names):
            continue  # Hive 4's "w <= minOpenWriteId" shortcut postdates Hive 2.3 (see test_selection)
        root = tmp_path / f"t{i}"
        for name in names:
            (root / name).mkdir(parents=True)
            if name.startswith("base_"):
                (root / name / "_metadata_acid").write_text(
                    '{"thisFileVersion":"0","dataFormat":"compacted"}'
                )
        ours = our_state(str(root), wl)
        theirs = hive_state(jvm, conf, str(root), hive23_txn_list(wl))
        assert ours == theirs, (names, str(wl))
        compared += 1
        kinds.add("nehist" if ours == "not enough history" else "base" if ours[0] else "nobase")
        if isinstance(ours, tuple) and ours[2]:
            kinds.add("obsolete")
    assert compared > 45 and kinds == {"nehist", "base", "nobase", "obsolete"}


def _java_list(jvm: Any, text: str) -> Any:
    return jvm.org.apache.hadoop.hive.common.ValidReaderWriteIdList(text)


@pytest.mark.parametrize(
    "text",
    ["t:5:9223372036854775807::", "null:7:9223372036854775807:", "db.t:10:7:7:", "t:9:4:8,4:7,5", "t:5:3::"],
)
def test_write_id_list_strings_match_hive(jvm: Any, text: str) -> None:
    assert str(ValidWriteIdList.parse(text)) == _java_list(jvm, text).writeToString()


def test_write_id_list_semantics_match_hive(jvm: Any) -> None:
    rnd = random.Random(7)
    for _ in range(200):
        wl = random_write_ids(rnd)
        if rnd.random() < 0.2:  # minOpenWriteId as written but no exceptions: Hive keeps it
            wl = ValidWriteIdList.parse(f"db.t:{wl.high_watermark}:{rnd.randint(1, MAX_ID)}::")
        java = _java_list(jvm, str(wl))
        assert java.writeToString() == str(wl)
        assert ValidWriteIdList.parse(java.writeToString()) == wl
        for w in range(0, wl.high_watermark + 2):
            assert (java.isWriteIdValid(w), java.isWriteIdAborted(w), java.isValidBase(w)) == (
                wl.is_write_id_valid(w),
                wl.is_write_id_aborted(w),
                wl.is_valid_base(w),
            ), (str(wl), w)
        for _ in range(4):
            lo = rnd.randint(1, MAX_ID + 1)
            hi = rnd.randint(lo, MAX_ID + 2)
            assert java.isWriteIdRangeValid(lo, hi).toString() == wl.is_write_id_range_valid(lo, hi).value
            assert java.isWriteIdRangeAborted(lo, hi).toString() == wl.is_write_id_range_aborted(lo, hi).value
        assert (java.getMinOpenWriteId() or LONG_MAX) == wl.min_open_write_id


def test_compactor_list_semantics_match_hive(jvm: Any) -> None:
    """``for_compactor`` read back by storage-api's ValidCompactorWriteIdList answers like ours."""
    rnd = random.Random(11)
    for _ in range(100):
        cl = random_write_ids(rnd).for_compactor()
        java = jvm.org.apache.hadoop.hive.common.ValidCompactorWriteIdList(str(cl))
        assert java.writeToString() == str(cl)
        for w in range(0, MAX_ID + 2):
            assert (java.isWriteIdValid(w), java.isValidBase(w)) == (
                cl.is_write_id_valid(w),
                cl.is_valid_base(w),
            )
        lo = rnd.randint(1, MAX_ID)
        hi = rnd.randint(lo, MAX_ID + 1)
        assert java.isWriteIdRangeValid(lo, hi).toString() == cl.is_write_id_range_valid(lo, hi).value
