"""Partition directory names exactly as Hive's ``FileUtils.escapePathName``/``makePartName`` build them
(docs/format.md, Directory layout).

Writers and readers must agree byte for byte with Hive on these names, or a partition written by one is
invisible to the other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from acidstream.errors import InvalidPartition

DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"

#: ``FileUtils.charToEscape`` on non-Windows: control chars, 0x7F and ``"#%'*/:=?\{[]^``.
_ESCAPED = frozenset([*map(chr, range(0x20)), "\x7f", *"\"#%'*/:=?\\{[]^"])
#: What Java's ``Integer.parseInt(s.substring(i+1, i+3), 16) >= 0`` accepts after a ``%`` (signs included).
_UNESCAPE_RE = re.compile(r"%([0-9A-Fa-f]{2}|\+[0-9A-Fa-f]|-0)")
_COMPONENT_RE = re.compile(r"([^/]+)=([^/]+)")


def escape_path_name(s: str | None) -> str:
    """Escape one key or value; None or empty becomes the default partition name."""
    if not s:
        return DEFAULT_PARTITION_NAME
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in s)


def unescape_path_name(s: str) -> str:
    """Replace each ``%XX`` (XX hex) by its char; malformed sequences stay as they are, as in Hive.

    Java's quirks are kept: ``%+F`` is char 15 and ``%-0`` char 0 (Hive's escaping never produces them).
    Unlike Java's ``Character.digit``, non-ASCII digits are not taken as hex.
    """
    return _UNESCAPE_RE.sub(lambda m: chr(int(m[1], 16)), s)


def make_part_name(keys: Sequence[str], values: Sequence[str | None]) -> str:
    """``k1=v1/k2=v2`` with keys lower-cased then escaped and values escaped."""
    if len(keys) != len(values):
        raise InvalidPartition(str(list(values)), f"{len(values)} values for {len(keys)} partition keys")
    if not keys:
        raise InvalidPartition("", "no partition keys")
    return "/".join(
        f"{escape_path_name(k.lower())}={escape_path_name(v)}" for k, v in zip(keys, values, strict=True)
    )


def parse_part_name(name: str) -> dict[str, str]:
    """Inverse of ``make_part_name`` (``Warehouse.makeSpecFromName``), keys in path order.

    A component without ``=`` or with an empty side cannot come from Hive and is rejected.
    """
    spec: dict[str, str] = {}
    for component in name.strip("/").split("/"):
        m = _COMPONENT_RE.fullmatch(component)
        if m is None:
            raise InvalidPartition(name, f"component {component!r} is not key=value")
        key = unescape_path_name(m[1])
        if key in spec:
            raise InvalidPartition(name, f"key {key!r} appears twice")
        spec[key] = unescape_path_name(m[2])
    return spec


def partition_path(table_location: str, keys: Sequence[str], values: Sequence[str | None]) -> str:
    """The partition directory under the table location (no trailing slash)."""
    return f"{table_location.rstrip('/')}/{make_part_name(keys, values)}"
