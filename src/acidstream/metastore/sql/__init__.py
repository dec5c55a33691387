"""acidstream's own SQL metastore (SQLite or PostgreSQL through SQLAlchemy): the backend
:class:`~acidstream.metastore.sql.client.MetastoreClient` and the modules it runs its calls in."""
