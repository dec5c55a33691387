"""The value of a ``--delimiter`` option: one ASCII character, or a backslash escape naming one as Hive's DDL
does (``FIELDS TERMINATED BY '\\t'`` or ``'\\001'``), so that a shell user need not type a tab or a Ctrl-A."""

from __future__ import annotations

import click

#: The escapes a delimiter may be written as, for messages and help.
ESCAPES = "\\t a tab, \\001 or \\x01 a control character, \\\\ a backslash"


def delimiter_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Click callback: the one character ``value`` names (None stays None), or a usage error (exit 2)."""
    if value is None:
        return None
    text = value
    if value.startswith("\\") and len(value) > 1:
        try:
            text = value.encode("ascii").decode("unicode_escape")
        except (UnicodeError, ValueError):
            text = value  # not an escape: reported below as what it is
    if len(text) != 1 or not text.isascii():
        raise click.BadParameter(f"{value!r} is not one ASCII character (or an escape naming one: {ESCAPES})")
    return text
