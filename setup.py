"""The one compiled part: write()'s per-record path (``acidstream.streaming.records._buffer``).

Optional: without a C compiler (or Python's headers) the package installs without it and uses the same
behaviour in Python (``acidstream.streaming.records.buffer``), only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "acidstream.streaming.records._buffer",
            ["src/acidstream/streaming/records/_buffer.c"],
            optional=True,
        )
    ]
)
