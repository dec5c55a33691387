"""A streaming writer process for the fault tests, to be killed at any point.

    python streaming_writer.py URL WAREHOUSE TABLE BATCH_SIZE TXNS PER_TXN FIRST_SEQ CONFIG_JSON TXN_TIMEOUT

Transaction ``seq`` writes the records ``id = seq * 100000 + i`` (i < PER_TXN), ``msg = "s<seq>"``; the process
prints ``BEGIN seq txn_id`` once the txn is open (before any of its records) and ``COMMITTED seq txn_id`` once
``commit_transaction`` returned, so a checker knows which transaction every row belongs to. TXNS = 0 writes
until killed. Faults come from ``ACIDSTREAM_FAULTS`` (acidstream.faults).
"""

from __future__ import annotations

import itertools
import json
import sys

from acidstream import Metastore, StreamingConnection, StrictDelimitedInputWriter


def main(argv: list[str]) -> None:
    url, warehouse, table, batch, txns, per_txn, first_seq, config, txn_timeout = argv
    with Metastore.connect(url, warehouse=warehouse, txn_timeout=float(txn_timeout)) as ms:
        conn = (
            StreamingConnection.builder()
            .with_metastore(ms)
            .with_database("default")
            .with_table(table)
            .with_agent_info("fault-writer")
            .with_record_writer(StrictDelimitedInputWriter.builder().with_field_delimiter(",").build())
            .with_transaction_batch_size(int(batch))
            .with_configuration(json.loads(config))
            .connect()
        )
        seqs = (
            range(int(first_seq), int(first_seq) + int(txns))
            if int(txns)
            else itertools.count(int(first_seq))
        )
        with conn:
            for seq in seqs:
                conn.begin_transaction()
                print("BEGIN", seq, conn.current_transaction_id(), flush=True)
                for i in range(int(per_txn)):
                    conn.write(b"%d,s%d" % (seq * 100000 + i, seq))
                conn.commit_transaction()
                print("COMMITTED", seq, conn.current_transaction_id(), flush=True)
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
