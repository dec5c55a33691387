"""``repl dump --spark``: a bootstrap's files copied by Spark tasks make the same dump as one process does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replhelpers import view
from workload import TABLES, create_tables, run_workload

from acidstream import repl
from acidstream.catalog import Metastore
from acidstream.spark.repl import spark_file_copier


def test_bootstrap_files_copied_by_spark(spark: Any, tmp_path: Path) -> None:
    with (
        Metastore.connect(f"sqlite:///{tmp_path / 's.db'}", warehouse=tmp_path / "src") as source,
        Metastore.connect(f"sqlite:///{tmp_path / 'r.db'}", warehouse=tmp_path / "dst") as replica,
    ):
        create_tables(source)
        run_workload(source, 21, 10, lambda: None)
        info = repl.dump(source, str(tmp_path / "dumps"), copy_files=spark_file_copier(spark))
        assert info.bytes > 0
        repl.load(replica, str(tmp_path / "dumps"))
        assert view(replica, TABLES) == view(source, TABLES)
