"""Keeps pip-installed pyspark's own archives off the path of Spark's Python workers.

Imported at every interpreter start by ``acidstream-spark-workers.pth``; ``scripts/bootstrap.sh`` installs both
files in the venv's site-packages. Spark puts pyspark's ``python/lib/*.zip`` and its spark-core jar on its
Python workers' path, which costs twice:

* zipimport cannot cache bytecode, so every worker process recompiled pyspark from the zip (about 1 s each);
* every task calls ``importlib.invalidate_caches()``, which on Python 3.11 makes each zip importer re-read its
  archive's directory (CPython gh-103200, fixed in 3.12): the jar's 5,000 entries, no Python, about 30 ms per
  task, each time.

Dropping those archives from the path, and their importers from the cache, makes workers import the same
installed, compiled pyspark and py4j, and start their tasks without that cost.
"""

import os
import sys

_SPARK_ARCHIVES = tuple(
    os.sep + os.path.join("site-packages", "pyspark", *folder, "")
    for folder in (("python", "lib"), ("jars",))
)


def _is_spark_archive(entry: str) -> bool:
    return any(folder in entry for folder in _SPARK_ARCHIVES)


sys.path[:] = [entry for entry in sys.path if not _is_spark_archive(entry)]
for _entry in [entry for entry in sys.path_importer_cache if _is_spark_archive(entry)]:
    del sys.path_importer_cache[_entry]
