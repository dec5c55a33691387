"""One statement parsed by sqlglot's Hive dialect, with errors as :class:`SqlSyntaxError` at an offset.

sqlglot reports line and column of the token it stopped at; users get the 0-based offset and a caret, as the
DDL parser gives them. Nodes of the parsed tree know where their identifiers, literals and functions start,
so a construct acidstream does not run is reported at its place too (:func:`unsupported`).
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Tokenizer, TokenType

from acidstream.errors import SqlSyntaxError

DIALECT = Dialect.get_or_raise("hive")


def parse_statement(sql: str) -> exp.Expr:
    """The one statement of ``sql`` (a trailing ``;`` allowed)."""
    tokenizer = DIALECT.tokenizer_class()
    try:
        tokens = tokenizer.tokenize(sql)
    except TokenError as exc:
        raise token_error(exc, tokenizer, sql) from None
    try:
        statements = [s for s in DIALECT.parser().parse(tokens, sql) if s is not None]
    except ParseError as exc:
        raise _syntax_error(exc, sql) from None
    if len(statements) != 1:
        ends = [t.end + 1 for t in tokens if t.token_type == TokenType.SEMICOLON]
        raise SqlSyntaxError(
            f"expected one statement, found {len(statements) or 'none'}", sql, ends[0] if statements else 0
        )
    return statements[0]


def token_error(exc: TokenError, tokenizer: Tokenizer, sql: str) -> SqlSyntaxError:
    """The pure-Python tokenizer keeps the start of the token it failed in (an unterminated quote)."""
    start = getattr(getattr(tokenizer, "_core", tokenizer), "_start", None)
    missing = re.match(r"Missing (\S+) from", str(exc.__cause__ or ""))
    message = (
        f"unterminated quote: no closing {missing.group(1)}"
        if missing
        else "cannot read the statement from here (an unterminated comment or quote?)"
    )
    return SqlSyntaxError(message, sql, start if isinstance(start, int) else 0)


def _syntax_error(exc: ParseError, sql: str) -> SqlSyntaxError:
    if not exc.errors:
        return SqlSyntaxError(str(exc), sql, 0)
    first = exc.errors[0]
    line, col, highlight = first.get("line") or 1, first.get("col") or 0, first.get("highlight") or ""
    line_start = 0
    for _ in range(line - 1):
        line_start = sql.index("\n", line_start) + 1
    # sqlglot's column is that of the highlighted token's last character (1-based)
    position = max(0, min(len(sql), line_start + col - len(highlight)))
    description = str(first.get("description") or "syntax error")
    token = re.search(r"but got <Token token_type: TokenType\.(\w+), text: (.*?), line: ", description)
    if token:  # sqlglot shows the token object: say what it is
        ends = token.group(1) == "SENTINEL"
        found = "the statement ends" if ends else f"found {token.group(2)!r}"
        description = f"{description[: token.start()]}but {found}"
        if ends:
            position = len(sql.rstrip())
    missing = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*\.(\w+)'>", description)
    if missing:  # sqlglot built a node without a required part: the statement stops too early
        node = missing.group(2)
        after = f" after {highlight!r}" if highlight.strip() else ""
        description = _INCOMPLETE.get(node, f"incomplete expression: expected more{after}")
    return SqlSyntaxError(description, sql, position)


_INCOMPLETE = {
    "Whens": "expected WHEN [NOT] MATCHED ... THEN clauses",
    "Where": "expected a condition after WHERE",
}


def position(node: exp.Expr) -> int | None:
    """Offset of the first token of ``node`` whose place sqlglot kept (identifiers, literals, functions)."""
    starts = [n.meta["start"] for n in node.walk() if isinstance(n.meta.get("start"), int)]
    return min(starts) if starts else None


def _offset(sql: str, node: exp.Expr) -> int:
    found = position(node)
    if found is not None and isinstance(node, exp.Query | exp.Subquery):
        return _query_start(sql, found)
    if found is not None:
        return found
    parent = node.parent
    return _offset(sql, parent) if parent is not None else 0


def _query_start(sql: str, first_kept: int) -> int:
    """Where a query (or a subquery, with its parenthesis) begins: sqlglot keeps no place for its SELECT, only
    for the names after it, so the query starts at the last SELECT before the first of those."""
    selects = [m.start() for m in _SELECT.finditer(sql, 0, first_kept)]
    if not selects:
        return first_kept
    before = sql[: selects[-1]].rstrip()
    return len(before) - 1 if before.endswith("(") else selects[-1]


_SELECT = re.compile(r"\bselect\b", re.IGNORECASE)


def unsupported(sql: str, node: exp.Expr, what: str | None = None) -> SqlSyntaxError:
    """``what`` (default: the construct's SQL) is not something acidstream runs, reported at ``node``."""
    return SqlSyntaxError(
        f"{what or type(node).__name__} is not supported here: {shown(node)}", sql, _offset(sql, node)
    )


def shown(node: exp.Expr) -> str:
    """The node's SQL, shortened for a message."""
    text = node.sql(dialect=DIALECT)
    return text if len(text) <= 60 else text[:57] + "..."


def error_at(sql: str, node: exp.Expr, message: str) -> SqlSyntaxError:
    return SqlSyntaxError(message, sql, _offset(sql, node))
