"""Throughput of the ORC ACID event writer against pyarrow's own ORC writer, same process and settings.

    python bench/bench_orc_writer.py [--rows 10000000] [--batch 100000] [--compression ZLIB]

Rows are ``id int, msg string`` (~20 characters). Reported: rows/s of
  1. pyarrow.orc.write_table of the plain table,
  2. pyarrow.orc.write_table of the same rows wrapped as ACID events (event columns built with numpy),
  3. AcidWriter.insert in batches + close (our stitched stripes, tails, key index),
  4. AcidWriter with a flush (intermediate footer + side file) after every batch,
and the ratios of 3 and 4 to 1 and 2.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po

from _tuning import tuned
from acidstream.acid.orc import AcidWriter, WriterOptions, event_schema
from acidstream.acid.types import parse_columns

BUCKET0 = 536870912


def make_rows(n: int) -> pa.Table:
    ids = np.arange(n, dtype=np.int32)
    msg = pa.compute.binary_join_element_wise(
        pa.array(np.char.mod("message-%012d", ids % 1_000_000)), pa.array(["-x"] * n), ""
    )
    return pa.table({"id": ids, "msg": msg})


def wrap_events(rows: pa.Table, write_id: int) -> pa.Table:
    n = rows.num_rows
    wid = pa.array(np.full(n, write_id, dtype=np.int64))
    row = pa.StructArray.from_arrays([c.combine_chunks() for c in rows.columns], fields=list(rows.schema))
    return pa.Table.from_arrays(
        [
            pa.array(np.zeros(n, dtype=np.int32)),
            wid,
            pa.array(np.full(n, BUCKET0, dtype=np.int32)),
            pa.array(np.arange(n, dtype=np.int64)),
            wid,
            row,
        ],
        schema=event_schema(pa.struct(list(rows.schema))),
    )


def timed(label: str, n: int, fn: Callable[[], None], repeat: int) -> float:
    best = min(_once(fn) for _ in range(repeat))
    print(f"{label:<48} {best:7.2f} s  {n / best / 1e6:7.2f} M rows/s")
    return best


def _once(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=100_000, help="rows per insert (and per flush in run 4)")
    ap.add_argument("--compression", default="ZLIB")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    rows = make_rows(args.rows)
    batches = [rows.slice(i, args.batch) for i in range(0, args.rows, args.batch)]
    cols = parse_columns("id int, msg string")
    opts = WriterOptions(compression=args.compression)
    kwargs = opts.pyarrow_kwargs()
    fs = pafs.LocalFileSystem()
    print(f"{args.rows:,} rows, {rows.nbytes / 1e6:.0f} MB in Arrow, settings {kwargs}")

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)

        def plain() -> None:
            po.write_table(rows, str(base / "plain.orc"), **kwargs)  # type: ignore[arg-type]

        def events() -> None:
            po.write_table(wrap_events(rows, 1), str(base / "events.orc"), **kwargs)  # type: ignore[arg-type]

        def ours(flush: bool) -> Callable[[], None]:
            def run() -> None:
                d = base / ("delta_0000001_0000002" if flush else "delta_0000001_0000001")
                shutil.rmtree(d, ignore_errors=True)  # the writer never overwrites a data file
                w = AcidWriter(fs, str(d / "bucket_00000"), cols, options=opts, side_file=flush)
                for b in batches:
                    w.insert(1, BUCKET0, b)
                    if flush:
                        w.flush()
                w.close()

            return run

        t_plain = timed("pyarrow write_table, plain rows", args.rows, plain, args.repeat)
        t_events = timed("pyarrow write_table, event-wrapped rows", args.rows, events, args.repeat)
        t_ours = timed(f"AcidWriter, insert per {args.batch:,} rows", args.rows, ours(False), args.repeat)
        t_flush = timed(
            f"AcidWriter, insert + flush per {args.batch:,} rows", args.rows, ours(True), args.repeat
        )
        sizes = {p.name: p.stat().st_size for p in base.rglob("*") if p.is_file()}
        print(f"file sizes: {sizes}")
    print(f"AcidWriter / plain pyarrow          = {t_ours / t_plain:5.2f}x time")
    print(f"AcidWriter / event-wrapped pyarrow  = {t_ours / t_events:5.2f}x time")
    flushes = -(-args.rows // args.batch)
    print(
        f"flush every {args.batch:,} rows: {t_flush / t_ours:5.2f}x time, "
        f"{(t_flush - t_ours) / flushes * 1e3:.2f} ms per flush ({flushes} flushes)"
    )


if __name__ == "__main__":
    tuned()
    main()
