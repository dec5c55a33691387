"""PySpark integration: the only package that imports pyspark."""
