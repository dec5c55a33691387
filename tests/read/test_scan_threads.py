"""Buckets read side by side (``read.threads``): the same batches in the same order as a sequential scan, the
same typed errors, and no thread left reading once the scan is closed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from readhelpers import create, delete_rows, row_id, stream

from acidstream import Metastore
from acidstream.compactor import Compactor, CompactorConfig
from acidstream.errors import CorruptFileError
from acidstream.read import scan as scan_module
from acidstream.read.scan import TableScan
from acidstream.read.threads import in_order


@pytest.fixture(autouse=True)
def thread_small_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tables are small: read them in threads all the same."""
    monkeypatch.setattr(scan_module, "THREADED_MIN_BYTES", 0)


@pytest.fixture
def wide(ms: Metastore) -> Metastore:
    """``db.wide``: 2 partitions x 4 buckets, three txns, every 7th row of partition ``a`` deleted."""
    create(ms, "wide", "id int, msg string", "PARTITIONED BY (p string) CLUSTERED BY (id) INTO 4 BUCKETS")
    txns = []
    for i in range(3):
        ids = list(range(i, 6000, 3))
        txns.append(({"id": ids, "msg": [f"m{n}" for n in ids], "p": ["a", "b"] * 1000}, True))
    stream(ms, "wide", txns)
    in_a = TableScan(ms, ms.table("db.wide"), with_row_id=True, partition_filter={"p": "a"}).to_arrow()
    victims = [row_id(r) for r in in_a.to_pylist()[::7]]
    delete_rows(ms, "wide", victims, partition_dir=f"{ms.table('db.wide').location}/p=a")
    return ms


def scan(ms: Metastore, threads: int, **kw: object) -> TableScan:
    return TableScan(ms, ms.table("db.wide"), read_threads=threads, batch_rows=300, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"with_row_id": True},
        {"columns": ["msg", "p"], "filter": pc.field("id") > 4000},
        {"filter": pc.field("ROW__ID", "rowid") < 100},
    ],
)
def test_threaded_scan_yields_the_sequential_batches_in_order(wide: Metastore, kw: dict[str, object]) -> None:
    sequential = list(scan(wide, 1, **kw).to_batches())
    assert len(sequential) > 8  # several batches per bucket: the order inside a bucket matters too
    for threads in (2, 3, 16):
        threaded = list(scan(wide, threads, **kw).to_batches())
        assert [b.num_rows for b in threaded] == [b.num_rows for b in sequential]
        assert all(t.equals(s) for t, s in zip(threaded, sequential, strict=True))
    tagged = [(values, b.num_rows) for values, b in scan(wide, 2, **kw).partition_batches()]
    assert tagged == [(values, b.num_rows) for values, b in scan(wide, 1, **kw).partition_batches()]


@pytest.fixture
def compacted(wide: Metastore) -> Metastore:
    """``db.wide`` major-compacted into bases of many stripes, then more rows deleted and streamed: buckets
    whose one large file is read in several parts, each part applying the bucket's deletes."""
    compactor = Compactor(wide, CompactorConfig(retention=0, batch_rows=100, stripe_bytes=1))
    for p in ("a", "b"):
        assert (
            compactor.compact("db.wide", kind="major", partition={"p": p}).info.state == "ready for cleaning"
        )
    in_b = TableScan(wide, wide.table("db.wide"), with_row_id=True, partition_filter={"p": "b"}).to_arrow()
    victims = [row_id(r) for r in in_b.to_pylist()[::5]]
    delete_rows(wide, "wide", victims, partition_dir=f"{wide.table('db.wide').location}/p=b")
    stream(wide, "wide", [({"id": [7000, 7001], "msg": ["x", "y"], "p": ["a", "b"]}, True)])
    return wide


def test_a_bucket_read_in_parts_yields_its_sequential_batches(compacted: Metastore) -> None:
    readers = list(scan(compacted, 1)._readers())
    smallest_base = min(f.length for r in readers for f in r.task.insert_files if f.base)
    parts = [part for reader in readers for part in reader.split(smallest_base // 3)]
    assert len(parts) > len(readers)
    cut = [f.part for part in parts for f in part.task.insert_files if f.part is not None]
    assert cut and all(n > 1 for _, n in cut)  # the bases' stripes were spread over several parts
    sequential = list(scan(compacted, 1, with_row_id=True).to_batches())
    assert sum(b.num_rows for b in sequential) == 6000 + 2 - len(range(0, 3000, 7)) - len(range(0, 3000, 5))
    for threads in (2, 3):
        threaded = list(scan(compacted, threads, with_row_id=True).to_batches())
        assert [b.num_rows for b in threaded] == [b.num_rows for b in sequential]
        assert all(t.equals(s) for t, s in zip(threaded, sequential, strict=True))
    by_part = [b for part in parts for b in part.batches()]
    assert pa.Table.from_batches(by_part).equals(
        pa.Table.from_batches([b for r in readers for b in r.batches()])
    )


def test_deletes_apply_in_every_thread(wide: Metastore) -> None:
    rows = scan(wide, 4).to_arrow()
    assert rows.num_rows == 6000 - len(range(0, 3000, 7))
    assert sorted(rows.column("id").to_pylist()) == sorted(scan(wide, 1).to_arrow().column("id").to_pylist())


def test_an_error_in_a_thread_surfaces_as_the_same_typed_error_after_the_earlier_buckets(
    wide: Metastore,
) -> None:
    plan = scan(wide, 1).plan_files()
    damaged = plan.tasks[2].insert_files[0].path
    Path(damaged).write_bytes(Path(damaged).read_bytes()[:-10])
    errors = []
    for threads in (1, 3):
        got: list[int] = []
        with pytest.raises(CorruptFileError) as info:
            for batch in scan(wide, threads).to_batches():
                got.append(batch.num_rows)
        errors.append((info.value.path, str(info.value), got))
    assert errors[0] == errors[1]
    assert errors[0][0] == damaged


def _read_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("acidstream-bucket-read")]


def test_closing_a_threaded_scan_early_stops_its_threads_and_releases_its_registration(
    wide: Metastore,
) -> None:
    table_scan = scan(wide, 3)
    batches = table_scan._batches()
    next(batches)
    reader_id = table_scan.reader_id
    assert [r[0] for r in wide.active_readers("db.wide")] == [reader_id]
    assert _read_threads()
    batches.close()
    assert not _read_threads()  # stopped before the registration went: no file read after it
    assert table_scan.reader_id is None
    assert wide.active_readers("db.wide") == []


def test_small_buckets_are_read_without_threads(wide: Metastore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread's hand-overs would cost more than reading a small bucket."""
    monkeypatch.setattr(scan_module, "THREADED_MIN_BYTES", 1 << 20)
    table_scan = scan(wide, 3)
    batches = table_scan._batches()
    next(batches)
    assert not _read_threads()
    batches.close()
    assert wide.table("db.wide").scan(read_threads=1).read_threads == 1
    with pytest.raises(ValueError, match="at least 1"):
        wide.table("db.wide").scan(read_threads=0)


def test_a_narrow_read_of_the_same_buckets_is_read_without_threads(
    wide: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What counts is what a reader decodes: one column of two holds about half the files' bytes."""
    readers = list(scan(wide, 3)._readers())
    per_bucket = sum(f.length for r in readers for f in (*r.task.insert_files, *r.task.delete_files)) / len(
        readers
    )
    monkeypatch.setattr(scan_module, "THREADED_MIN_BYTES", int(per_bucket * 0.75))
    for columns, threaded in ((None, True), (["id"], False), (["msg"], False)):
        batches = scan(wide, 3, columns=columns)._batches()
        next(batches)
        assert bool(_read_threads()) is threaded, columns
        batches.close()


# --- in_order itself -----------------------------------------------------------------------------------------


def _source(name: str, n: int, gate: threading.Event | None = None) -> Callable[[], Iterator[str]]:
    def items() -> Iterator[str]:
        if gate is not None:
            assert gate.wait(10)
        for i in range(n):
            yield f"{name}{i}"

    return items


def test_in_order_keeps_source_order_whichever_source_finishes_first() -> None:
    gate = threading.Event()
    sources = [_source("a", 3, gate), _source("b", 5), _source("c", 0), _source("d", 2)]
    out = in_order(sources, threads=3, readahead=1)
    started = threading.Timer(0.05, gate.set)  # the first source is the slowest to start
    started.start()
    assert list(out) == ["a0", "a1", "a2", "b0", "b1", "b2", "b3", "b4", "d0", "d1"]
    started.join()


def test_in_order_runs_at_most_threads_sources_ahead_of_the_caller() -> None:
    started: list[int] = []

    def source(i: int) -> Callable[[], Iterator[int]]:
        def items() -> Iterator[int]:
            started.append(i)
            yield from range(100)

        return items

    out = in_order([source(i) for i in range(6)], threads=2, readahead=2)
    assert next(out) == 0
    for _ in range(50):  # give the threads time to run ahead as far as they may
        threading.Event().wait(0.001)
    assert sorted(started) == [0, 1]
    out.close()
    assert not _read_threads()


def test_in_order_starts_later_sources_when_short_ones_end_up_to_twice_threads_ahead() -> None:
    """A source that has handed over all its items frees its thread while the caller is still on an earlier
    one (short parts keep both cores busy), but no more than ``2 * threads`` sources are started ahead."""
    gate = threading.Event()
    started: list[int] = []

    def source(i: int) -> Callable[[], Iterator[int]]:
        def items() -> Iterator[int]:
            started.append(i)
            if i == 0:
                assert gate.wait(10)
            yield i

        return items

    out = in_order([source(i) for i in range(8)], threads=2, readahead=2)
    first = threading.Timer(0.2, gate.set)
    first.start()
    assert next(out) == 0  # waited for the gate: meanwhile the short sources ran
    assert sorted(started) == [0, 1, 2, 3]
    assert list(out) == [1, 2, 3, 4, 5, 6, 7]
    first.join()
    assert not _read_threads()


def test_in_order_raises_the_source_error_itself() -> None:
    boom = KeyError("gone")

    def failing() -> Iterator[str]:
        yield "x0"
        raise boom

    out = in_order([_source("a", 2), failing, _source("c", 2)], threads=2)
    assert [next(out) for _ in range(3)] == ["a0", "a1", "x0"]
    with pytest.raises(KeyError) as info:
        next(out)
    assert info.value is boom
    assert not _read_threads()
