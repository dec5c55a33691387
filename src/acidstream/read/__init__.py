"""Snapshot scans of ACID tables to Arrow."""
