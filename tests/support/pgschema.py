"""PostgreSQL for the tests: the server's URL, whether it answers, and a fresh schema of one's own on it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

#: The server the tests use; by default the cluster scripts/postgres.sh starts.
PG_URL = os.environ.get("ACIDSTREAM_TEST_PG_URL", "postgresql://postgres@127.0.0.1:54329/test")


def pg_unavailable_reason() -> str | None:
    """None when PostgreSQL answers at PG_URL, else why its tests skip."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - psycopg is a hard dependency
        return f"psycopg not importable: {exc}"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3):
            return None
    except Exception as exc:
        return f"PostgreSQL not reachable at {PG_URL}: {exc}"


@contextmanager
def pg_schema(prefix: str = "t") -> Iterator[str]:
    """A metastore URL on a new schema (dropped afterwards): each test's database of its own."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
