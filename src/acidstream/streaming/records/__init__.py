"""Record parsing for the record writers: raw records (bytes) → Arrow batches of a table's columns."""

from acidstream.streaming.records.base import ParseResult, RecordParser, record_bytes, records_array
from acidstream.streaming.records.streams import split_records

__all__ = ["ParseResult", "RecordParser", "record_bytes", "records_array", "split_records"]
