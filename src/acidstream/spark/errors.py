"""acidstream's typed errors across Spark's task boundary.

An exception raised in a Python task reaches the driver as Spark's ``PythonException``, whose only content is
the worker's traceback text. A task wraps an acidstream error it raises (:func:`task_errors`) so that its class
and message travel in that text; the driver (:func:`driver_errors`) raises the same class with the same message
(chained to Spark's exception, which keeps the task's traceback), so a caller handles a ``BucketIdException``
from a Spark job as it would from the Python API.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import re
from collections.abc import Iterator

from acidstream.errors import AcidStreamError
from acidstream.runtime import configure

_MARK = "acidstream-error"
_PAYLOAD = re.compile(_MARK + r"\[([A-Za-z0-9+/=]+)\]")


class TaskFailure(RuntimeError):
    """What a task raises in place of an acidstream error: readable, and carrying the original's class."""


@contextlib.contextmanager
def task_errors() -> Iterator[None]:
    """In a task: acidstream errors leave as :class:`TaskFailure` carrying their class and message. A task runs
    in one of Spark's Python workers, a process that works for acidstream: it is tuned (``runtime.configure``)."""
    configure()
    try:
        yield
    except AcidStreamError as exc:
        raise TaskFailure(f"{type(exc).__name__}: {exc} {encode(exc)}") from exc


@contextlib.contextmanager
def driver_errors() -> Iterator[None]:
    """Around a Spark action on the driver: a task's acidstream error is raised again as itself."""
    try:
        yield
    except AcidStreamError:
        raise
    except Exception as exc:
        original = decode(str(exc))
        if original is None:
            raise
        raise original from exc


def encode(exc: AcidStreamError) -> str:
    cls = type(exc)
    data = json.dumps({"module": cls.__module__, "name": cls.__qualname__, "message": str(exc)})
    return f"{_MARK}[{base64.b64encode(data.encode()).decode()}]"


def decode(text: str) -> AcidStreamError | None:
    """The first error :func:`encode` put in ``text``, rebuilt (None if there is none, or it is not ours)."""
    found = _PAYLOAD.search(text)
    if found is None:
        return None
    try:
        data = json.loads(base64.b64decode(found[1]))
        cls = getattr(importlib.import_module(data["module"]), data["name"])
    except (ValueError, KeyError, ImportError, AttributeError):
        return None
    if not (isinstance(cls, type) and issubclass(cls, AcidStreamError)):
        return None
    exc = cls.__new__(cls)  # constructors differ; the message is what crossed
    Exception.__init__(exc, data["message"])
    return exc
