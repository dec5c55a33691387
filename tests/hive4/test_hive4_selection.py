"""Our directory selection against Hive 4's ``AcidUtils.getAcidState`` on random trees: bases, streaming and
per-statement deltas, delete deltas, compactor output with visibility suffixes (``_vT``) whose txn T is
committed, open, aborted or above the snapshot, at random snapshots (write ids and txns)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from acidstream.acid.names import base_dir, delete_delta_dir, delta_dir
from acidstream.acid.selection import get_acid_state
from acidstream.acid.writeids import ValidTxnList, ValidWriteIdList, write_id_list_from_states
from acidstream.errors import NotEnoughHistory
from hive4.judge import NOT_ENOUGH_HISTORY
from hive4.referee import HiveError, Referee

pytestmark = pytest.mark.hive4

FS = pafs.LocalFileSystem()
MAX_ID = 10
#: compactor txns: ids above the write ids' range, so that a tree's txns and write ids never collide
TXNS = range(20, 26)


def random_tree(rnd: random.Random) -> list[str]:
    names: set[str] = set()
    for _ in range(rnd.randint(1, 9)):
        a = rnd.randint(1, MAX_ID)
        b = a if rnd.random() < 0.5 else rnd.randint(a, MAX_ID)
        visibility = rnd.choice(TXNS) if rnd.random() < 0.4 else None
        suffix = f"_v{visibility:07d}" if visibility is not None else ""
        stmt = rnd.choice([None, None, 0, 1]) if a == b and visibility is None else None
        kind = rnd.random()
        if kind < 0.2:
            names.add(base_dir(b) + suffix)
        elif kind < 0.45:
            names.add(delete_delta_dir(a, b, stmt) + suffix)
            if rnd.random() < 0.7:
                names.add(delta_dir(a, b, stmt) + suffix)
        else:
            names.add(delta_dir(a, b, stmt) + suffix)
    return sorted(names)


def random_snapshot(rnd: random.Random) -> tuple[ValidWriteIdList, ValidTxnList]:
    hwm = rnd.randint(0, MAX_ID)
    states = {w: rnd.choice("cccoa") for w in range(1, hwm + 1)}
    write_ids = write_id_list_from_states(
        "db.t", hwm, [w for w, s in states.items() if s == "o"], [w for w, s in states.items() if s == "a"]
    )
    txn_hwm = rnd.choice([*TXNS, TXNS[-1] + 5])
    txn_states = {t: rnd.choice("ccoa") for t in TXNS if t <= txn_hwm}
    opened = [t for t, s in txn_states.items() if s == "o"]
    txns = ValidTxnList(
        txn_hwm,
        tuple(opened),
        tuple(t for t, s in txn_states.items() if s == "a"),
        min_open_txn=min(opened, default=2**63 - 1),
    )
    return write_ids, txns


def ours(
    path: Path, write_ids: ValidWriteIdList, txns: ValidTxnList
) -> tuple[str | None, list[str], list[str]] | str:
    try:
        s = get_acid_state(FS, str(path), write_ids, txns)
    except NotEnoughHistory:
        return NOT_ENOUGH_HISTORY
    return (
        s.base.name if s.base else None,
        [d.name for d in s.deltas],
        sorted(Path(p).name for p in s.obsolete),
    )


def theirs(hive4: Referee, path: Path, write_ids: ValidWriteIdList, txns: ValidTxnList) -> object:
    try:
        return hive4.select(path, write_ids, txns)
    except HiveError as exc:
        if NOT_ENOUGH_HISTORY not in str(exc):
            raise
        return NOT_ENOUGH_HISTORY


def test_get_acid_state_matches_hive_4(hive4: Referee, tmp_path: Path) -> None:
    rnd = random.Random(20261127)
    kinds: set[str] = set()
    for i in range(150):
        names = random_tree(rnd)
        write_ids, txns = random_snapshot(rnd)
        root = tmp_path / f"t{i}"
        for name in names:
            (root / name).mkdir(parents=True)
            (root / name / "bucket_00000").write_bytes(
                b"x"
            )  # Hive lists files: an empty directory is no delta
            if name.startswith("base_") and "_v" not in name:
                (root / name / "_metadata_acid").write_text(
                    '{"thisFileVersion":"0","dataFormat":"compacted"}'
                )
        mine = ours(root, write_ids, txns)
        assert mine == theirs(hive4, root, write_ids, txns), (names, str(write_ids), str(txns))
        if isinstance(mine, tuple):
            kinds.add("base" if mine[0] else "nobase")
            kinds.update({"obsolete"} if mine[2] else set())
            kinds.update({"visibility"} if any("_v" in n for n in mine[1]) else set())
        else:
            kinds.add("history")
    assert kinds == {"base", "nobase", "obsolete", "visibility", "history"}
