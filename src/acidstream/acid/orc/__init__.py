"""ORC ACID event files: the writer (stitched pyarrow stripes + our own tails) and the reader.

See docs/format.md: Event files (event schema, user metadata, writer settings) and Side files (intermediate
footers, side files, close).
"""

from acidstream.acid.orc.events import EventKind, KeyIndex, event_schema
from acidstream.acid.orc.reader import AcidFileMetadata, iter_event_batches, read_acid_metadata, read_events
from acidstream.acid.orc.stripes import EncodedEvents
from acidstream.acid.orc.writer import AcidWriter, WriterOptions, prepare_directory, prepare_directory_once

__all__ = [
    "AcidFileMetadata",
    "AcidWriter",
    "EncodedEvents",
    "EventKind",
    "KeyIndex",
    "WriterOptions",
    "event_schema",
    "iter_event_batches",
    "prepare_directory",
    "prepare_directory_once",
    "read_acid_metadata",
    "read_events",
]
