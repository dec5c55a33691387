"""Hive column types: parse Hive's type strings, print them canonically, map them to Arrow.

Every layer shares this one model: the catalog stores canonical strings, record writers parse into the Arrow
types, the ORC writer declares the ORC types and the reader converts back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from acidstream.errors import InvalidObjectException

#: Hive's primitive type names (and the aliases Hive's parser accepts) → canonical name.
PRIMITIVES: dict[str, str] = {
    "tinyint": "tinyint",
    "smallint": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "boolean": "boolean",
    "float": "float",
    "double": "double",
    "double precision": "double",
    "string": "string",
    "date": "date",
    "timestamp": "timestamp",
    "binary": "binary",
}
PARAMETERISED = ("decimal", "numeric", "char", "varchar")
COMPLEX = ("array", "map", "struct")

DEFAULT_DECIMAL = (10, 0)
MAX_DECIMAL_PRECISION = 38
MAX_VARCHAR_LENGTH = 65535
MAX_CHAR_LENGTH = 255


@dataclass(frozen=True)
class HiveType:
    """A Hive type: ``name`` is canonical (``int``, ``decimal``, ``array``, ...).

    ``params`` holds (precision, scale) for decimal and (length,) for char/varchar; ``children`` the element,
    key/value or field types; ``field_names`` the struct field names (lower-cased as Hive stores them).
    """

    name: str
    params: tuple[int, ...] = ()
    children: tuple[HiveType, ...] = ()
    field_names: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.name in ("decimal", "char", "varchar"):
            return f"{self.name}({','.join(map(str, self.params))})"
        if self.name == "array":
            return f"array<{self.children[0]}>"
        if self.name == "map":
            return f"map<{self.children[0]},{self.children[1]}>"
        if self.name == "struct":
            inner = ",".join(f"{n}:{t}" for n, t in zip(self.field_names, self.children, strict=True))
            return f"struct<{inner}>"
        return self.name

    @property
    def is_primitive(self) -> bool:
        return self.name not in COMPLEX

    @property
    def is_string_like(self) -> bool:
        return self.name in ("string", "char", "varchar")

    @property
    def precision(self) -> int:
        return self.params[0]

    @property
    def scale(self) -> int:
        return self.params[1]

    @property
    def length(self) -> int:
        return self.params[0]

    def to_arrow(self) -> pa.DataType:
        """The Arrow type acidstream uses in memory for values of this Hive type."""
        simple = _ARROW_PRIMITIVES.get(self.name)
        if simple is not None:
            return simple
        if self.name == "decimal":
            return pa.decimal128(self.precision, self.scale)
        if self.name == "array":
            return pa.list_(self.children[0].to_arrow())
        if self.name == "map":
            return pa.map_(self.children[0].to_arrow(), self.children[1].to_arrow())
        if self.name == "struct":
            return pa.struct(
                [pa.field(n, t.to_arrow()) for n, t in zip(self.field_names, self.children, strict=True)]
            )
        raise AssertionError(f"unmapped Hive type {self}")  # pragma: no cover - parse() admits no other


_ARROW_PRIMITIVES: dict[str, pa.DataType] = {
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "boolean": pa.bool_(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "char": pa.string(),
    "varchar": pa.string(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("ns"),
    "binary": pa.binary(),
}


@dataclass(frozen=True)
class Column:
    """A table column: lower-cased name (Hive is case-insensitive), type, optional comment."""

    name: str
    type: HiveType
    comment: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.name} {self.type}"

    def to_arrow(self) -> pa.Field:
        return pa.field(self.name, self.type.to_arrow())


# --- parsing -------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<num>\d+)|(?P<punct>[<>(),:])|(?P<bad>\S))")


#: Builds the error of a type that does not parse from why and where (0-based, in the type's text).
ErrorAt = Callable[[str, int], Exception]


class _TypeParser:
    def __init__(self, text: str, error: ErrorAt | None = None) -> None:
        self.text = text
        self._error = error or (
            lambda why, pos: InvalidObjectException(f"{why} in type '{text}' at position {pos}")
        )
        self.tokens: list[tuple[str, str, int]] = []
        for m in _TOKEN.finditer(text):
            kind = m.lastgroup or "bad"
            self.tokens.append((kind, m.group(kind), m.start(kind)))
        self.i = 0

    def error(self, message: str, token: int | None = None) -> Exception:
        """The error at token ``token`` (default: the next one)."""
        at = self.i if token is None else token
        pos = self.tokens[at][2] if at < len(self.tokens) else len(self.text)
        return self._error(message, pos)

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, kind: str, value: str | None = None) -> str:
        tok = self.peek()
        if tok is None or tok[0] != kind or (value is not None and tok[1] != value):
            expected = repr(value) if value is not None else kind
            found = repr(tok[1]) if tok else "end of type"
            raise self.error(f"expected {expected}, found {found}")
        self.i += 1
        return tok[1]

    def number(self) -> int:
        return int(self.take("num"))

    def parse_type(self) -> HiveType:
        start = self.i
        word = self.take("word").lower()
        if word == "double":
            nxt = self.peek()
            if nxt and nxt[0] == "word" and nxt[1].lower() == "precision":
                self.i += 1
        if word in PRIMITIVES:
            return HiveType(PRIMITIVES[word])
        if word in ("decimal", "numeric"):
            precision, scale = DEFAULT_DECIMAL
            if self._accept("("):
                precision = self.number()
                scale = self.number() if self._accept(",") else 0
                self.take("punct", ")")
            if not 1 <= precision <= MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
                raise self.error(f"invalid decimal({precision},{scale})", start)
            return HiveType("decimal", (precision, scale))
        if word in ("char", "varchar"):
            self.take("punct", "(")
            length = self.number()
            self.take("punct", ")")
            limit = MAX_CHAR_LENGTH if word == "char" else MAX_VARCHAR_LENGTH
            if not 1 <= length <= limit:
                raise self.error(f"invalid {word} length {length} (1..{limit})", start)
            return HiveType(word, (length,))
        if word == "array":
            self.take("punct", "<")
            elem = self.parse_type()
            self.take("punct", ">")
            return HiveType("array", children=(elem,))
        if word == "map":
            self.take("punct", "<")
            key_start = self.i
            key = self.parse_type()
            if not key.is_primitive:
                raise self.error("map keys must be primitive", key_start)
            self.take("punct", ",")
            value = self.parse_type()
            self.take("punct", ">")
            return HiveType("map", children=(key, value))
        if word == "struct":
            self.take("punct", "<")
            names: list[str] = []
            types: list[HiveType] = []
            while True:
                name = self.take("word").lower()
                if name in names:
                    raise self.error(f"duplicate struct field '{name}'")
                self.take("punct", ":")
                names.append(name)
                types.append(self.parse_type())
                if not self._accept(","):
                    break
            self.take("punct", ">")
            return HiveType("struct", children=tuple(types), field_names=tuple(names))
        self.i -= 1
        raise self.error(f"unknown type '{word}'")

    def _accept(self, punct: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "punct" and tok[1] == punct:
            self.i += 1
            return True
        return False


def parse_type(text: str, error: ErrorAt | None = None) -> HiveType:
    """Parse a Hive type string such as ``decimal(10,2)`` or ``map<string,array<int>>``. What it raises when
    the text does not parse is ``error(why, position)`` (default: an ``InvalidObjectException`` naming both),
    so that a statement's parser can point into the statement."""
    parser = _TypeParser(text, error)
    result = parser.parse_type()
    if parser.peek() is not None:
        raise parser.error("unexpected trailing input")
    return result


def parse_columns(text: str) -> list[Column]:
    """Parse a column list ``"id int, msg string"`` (Hive DDL column syntax without comments)."""
    parser = _TypeParser(text)
    columns: list[Column] = []
    while parser.peek() is not None:
        name = parser.take("word").lower()
        if any(c.name == name for c in columns):
            raise parser.error(f"duplicate column '{name}'")
        columns.append(Column(name, parser.parse_type()))
        if not parser._accept(","):
            break
    if parser.peek() is not None:
        raise parser.error("unexpected trailing input")
    if not columns:
        raise InvalidObjectException("empty column list")
    return columns
