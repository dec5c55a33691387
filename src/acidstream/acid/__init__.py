"""The Hive 3 full-ACID on-disk format: pure and stateless, it knows nothing of the metastore."""
