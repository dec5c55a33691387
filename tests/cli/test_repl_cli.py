"""``acidstream repl dump|load|sync|status`` through click."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter
from acidstream.cli import cli


def _source(wh: Path, *, create: bool = True) -> str:
    url = f"sqlite:///{wh / 'metastore.db'}"
    with Metastore.connect(url, warehouse=wh) as ms:
        if create:
            ms.execute("CREATE TABLE t (id int, msg string) TBLPROPERTIES ('transactional'='true')")
        writer = StrictDelimitedInputWriter.builder().with_field_delimiter(",").build()
        with (
            StreamingConnection.builder()
            .with_metastore(ms)
            .with_database("default")
            .with_table("t")
            .with_record_writer(writer)
            .with_transaction_batch_size(3)
            .connect()
        ) as conn:
            for i in range(2):
                conn.begin_transaction()
                conn.write_batch(pa.table({"id": [i], "msg": [f"m{i}"]}))
                conn.commit_transaction()
    return url


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"ACIDSTREAM_METASTORE": "", "ACIDSTREAM_WAREHOUSE": ""})
    return result.exit_code, result.stdout, result.stderr


def _count(url: str, wh: Path) -> int:
    from acidstream.catalog import Metastore as Catalog

    with Catalog.connect(url, warehouse=wh) as ms:
        return ms.table("t").scan().count()


def test_dump_load_status(tmp_path: Path) -> None:
    src_wh, dst_wh = tmp_path / "src", tmp_path / "dst"
    source = _source(src_wh)
    target = f"sqlite:///{dst_wh / 'metastore.db'}"
    dumps = tmp_path / "dumps"
    code, out, err = _invoke(
        "repl", "dump", "--metastore", source, "--warehouse", str(src_wh), "--to", str(dumps)
    )
    assert code == 0, err
    assert out.startswith("bootstrap dump ")
    last = int(out.split("..")[1].split(",")[0])
    code, out, err = _invoke("repl", "load", "--metastore", target, "--warehouse", str(dst_wh), str(dumps))
    assert code == 0, err
    assert out.startswith("bootstrapped")
    assert _count(target, dst_wh) == 2
    incremental = ("repl", "dump", "--metastore", source, "--warehouse", str(src_wh), "--to", str(dumps))
    code, out, err = _invoke(*incremental, "--from", str(last))
    assert code == 0 and out.startswith("nothing to dump"), err
    _source(src_wh, create=False)  # two more rows
    code, out, err = _invoke(*incremental, "--from", str(last))
    assert code == 0 and out.startswith("incremental dump "), err
    code, out, err = _invoke("repl", "load", "--metastore", target, "--warehouse", str(dst_wh), str(dumps))
    assert code == 0, err
    assert _count(target, dst_wh) == 4
    code, out, err = _invoke(
        "repl", "status", "--metastore", target, "--warehouse", str(dst_wh), "--source", source
    )
    assert code == 0, err
    assert re.search(r"^lag \(events\) +0$", out, re.M), out


def test_sync_and_status(tmp_path: Path) -> None:
    src_wh, dst_wh = tmp_path / "src", tmp_path / "dst"
    source = _source(src_wh)
    target = f"sqlite:///{dst_wh / 'metastore.db'}"
    code, out, err = _invoke("repl", "sync", source, target, "--target-warehouse", str(dst_wh))
    assert code == 0, err
    assert out.startswith("bootstrapped, 0 events applied")
    assert _count(target, dst_wh) == 2
    code, out, _ = _invoke("repl", "status", "--metastore", target, "--warehouse", str(dst_wh))
    assert code == 0 and "last event applied" in out and "lag" not in out


def test_status_never_creates_a_metastore(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    code, _, err = _invoke("repl", "status", "--metastore", url, "--warehouse", str(tmp_path))
    assert code == 4 and "no metastore" in err
    assert not (tmp_path / "none.db").exists()
