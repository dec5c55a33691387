"""Helpers shared by test modules (``from support.hivejvm import HiveJvm``); ``tests/`` is on sys.path via pytest's ``pythonpath``."""
