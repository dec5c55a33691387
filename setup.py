"""The one compiled part, ``acidstream.streaming.records._native``: write()'s per-record path and the split of
delimited records.

Optional: without a C compiler (or Python's headers) the package installs without it and uses the same
behaviour in Python (``records.buffer``, ``records.text_values``), only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "acidstream.streaming.records._native",
            ["src/acidstream/streaming/records/_native.c"],
            optional=True,
        )
    ]
)
