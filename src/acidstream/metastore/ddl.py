"""The Hive DDL subset of ``Metastore.execute``: a tokenizer with positions and a recursive-descent parser.

Errors are :class:`DdlSyntaxError` pointing at the offending token, so a typo in a long CREATE TABLE is found
at a glance; column types are parsed by the shared Hive type parser.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from acidstream.acid import evolution
from acidstream.acid.types import Column, parse_type
from acidstream.errors import DdlSyntaxError
from acidstream.metastore.backend import Catalog, CompactionQueue, Transactions

if TYPE_CHECKING:
    from acidstream.metastore.models import CompactionInfo


class DdlTarget(Catalog, Transactions, CompactionQueue, Protocol):
    """What DDL runs on: the façade's calls (its ``compact`` also waits), named here rather than imported, as
    the façade imports this module."""

    def compact(
        self,
        table_name: str,
        partition: str | Mapping[str, Any] | None = None,
        kind: str = "major",
        *,
        wait: bool = False,
        initiator_id: str | None = None,
    ) -> int: ...


_TOKEN = re.compile(
    r"\s*(?:(?P<ident>`[^`]*`|[A-Za-z_][A-Za-z0-9_]*)|(?P<num>\d+)"
    r"|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<punct>[(),.;=<>:])|(?P<bad>\S))"
)


#: Words that end a column's type (CHANGE COLUMN's clauses follow it).
_AFTER_TYPE = frozenset({"comment", "first", "after", "cascade", "restrict"})


@dataclass(frozen=True)
class Token:
    kind: str  # ident | num | str | punct | end
    text: str
    pos: int
    end: int

    @property
    def word(self) -> str:
        return self.text.lower() if self.kind == "ident" and not self.text.startswith("`") else ""


def tokenize(sql: str) -> list[Token]:
    tokens: list[Token] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        if kind is None:
            continue
        if kind == "bad":
            raise DdlSyntaxError(f"unexpected character {m.group(kind)!r}", sql, m.start(kind))
        tokens.append(Token(kind, m.group(kind), m.start(kind), m.end(kind)))
    tokens.append(Token("end", "", len(sql.rstrip()), len(sql)))
    return tokens


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


class Parser:
    """One statement; each ``parse_*`` method returns a closure over the parsed pieces run against the metastore."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = tokenize(sql)
        self.i = 0

    # --- token helpers ---------------------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, message: str, token: Token | None = None) -> DdlSyntaxError:
        token = token or self.tok
        found = "end of statement" if token.kind == "end" else repr(token.text)
        return DdlSyntaxError(f"{message}, found {found}", self.sql, token.pos)

    def accept(self, *words: str) -> bool:
        """Consume the keyword sequence if it is next."""
        for k, w in enumerate(words):
            t = self.tokens[min(self.i + k, len(self.tokens) - 1)]
            if t.word != w:
                return False
        self.i += len(words)
        return True

    def expect(self, *words: str) -> None:
        for w in words:
            if self.tok.word != w:
                raise self.error(f"expected {w.upper()}")
            self.i += 1

    def accept_punct(self, p: str) -> bool:
        if self.tok.kind == "punct" and self.tok.text == p:
            self.i += 1
            return True
        return False

    def expect_punct(self, p: str) -> None:
        if not self.accept_punct(p):
            raise self.error(f"expected '{p}'")

    def ident(self, what: str) -> str:
        t = self.tok
        if t.kind != "ident":
            raise self.error(f"expected {what}")
        self.i += 1
        return (t.text[1:-1] if t.text.startswith("`") else t.text).lower()

    def string(self, what: str) -> str:
        if self.tok.kind != "str":
            raise self.error(f"expected {what} (a quoted string)")
        self.i += 1
        return _unquote(self.tokens[self.i - 1].text)

    def number(self, what: str) -> int:
        if self.tok.kind != "num":
            raise self.error(f"expected {what}")
        self.i += 1
        return int(self.tokens[self.i - 1].text)

    def table_name(self) -> str:
        first = self.ident("a table name")
        if self.accept_punct("."):
            return f"{first}.{self.ident('a table name after the dot')}"
        return first

    def finish(self) -> None:
        self.accept_punct(";")
        if self.tok.kind != "end":
            raise self.error("expected end of statement")

    # --- pieces -------------------------------------------------------------------------------------------------

    def column(self) -> Column:
        name = self.ident("a column name")
        start = self.tok
        if start.kind != "ident":
            raise self.error(f"expected a type for column '{name}'")
        depth = 0
        while True:
            t = self.tok
            if t.kind == "end":
                break
            if t.kind == "punct" and t.text in "(<":
                depth += 1
            elif t.kind == "punct" and t.text in ")>":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and ((t.kind == "punct" and t.text == ",") or t.word in _AFTER_TYPE):
                break
            self.i += 1
        text = self.sql[start.pos : self.tokens[self.i - 1].end]
        hive_type = parse_type(
            text,
            lambda why, at: DdlSyntaxError(f"bad type for column '{name}': {why}", self.sql, start.pos + at),
        )
        comment = self.string("a column comment") if self.accept("comment") else None
        return Column(name, hive_type, comment)

    def columns(self) -> list[Column]:
        self.expect_punct("(")
        cols = [self.column()]
        while self.accept_punct(","):
            cols.append(self.column())
        self.expect_punct(")")
        return cols

    def properties(self) -> dict[str, str]:
        self.expect_punct("(")
        props: dict[str, str] = {}
        while True:
            key = self.string("a property key")
            self.expect_punct("=")
            props[key] = self.string("a property value")
            if not self.accept_punct(","):
                break
        self.expect_punct(")")
        return props


Result = list[tuple[Any, ...]] | None


#: First words of the statements run here, and of others a misspelling may be meant as (for the hint).
_STATEMENTS = ("create", "drop", "show", "describe", "desc", "alter")
_OTHER_STATEMENTS = ("select", "insert", "delete", "update", "merge", "with", "explain")


def _check_kind(sql: str) -> None:
    """An unknown first word is reported as such, before the rest is read (``SELEC * FROM t`` is not about
    its ``*``)."""
    first = _TOKEN.match(sql)
    if first is None or first.lastgroup != "ident" or first.group("ident").startswith("`"):
        return
    word = first.group("ident")
    if word.lower() in _STATEMENTS:
        return
    close = difflib.get_close_matches(word.lower(), _STATEMENTS + _OTHER_STATEMENTS, n=1)
    hint = f" (did you mean {close[0].upper()}?)" if close else ""
    raise DdlSyntaxError(
        f"unknown statement {word!r}{hint}: expected CREATE, DROP, SHOW, DESCRIBE or ALTER",
        sql,
        first.start("ident"),
    )


def run(ms: DdlTarget, sql: str) -> Result:
    """Parse and execute one statement."""
    _check_kind(sql)
    p = Parser(sql)
    if p.accept("create"):
        if p.accept("database") or p.accept("schema"):
            return _create_database(ms, p)
        if p.accept("table"):
            return _create_table(ms, p)
        raise p.error("expected DATABASE or TABLE after CREATE")
    if p.accept("drop"):
        return _drop(ms, p)
    if p.accept("show"):
        return _show(ms, p)
    if p.accept("describe") or p.accept("desc"):
        return _describe(ms, p)
    if p.accept("alter"):
        return _alter(ms, p)
    raise p.error("expected CREATE, DROP, SHOW, DESCRIBE or ALTER")


def _create_database(ms: DdlTarget, p: Parser) -> Result:
    if_not_exists = p.accept("if", "not", "exists")
    name = p.ident("a database name")
    comment = p.string("a comment") if p.accept("comment") else None
    p.finish()
    ms.create_database(name, if_not_exists=if_not_exists, comment=comment)
    return None


def _create_table(ms: DdlTarget, p: Parser) -> Result:
    from acidstream.metastore.names import split_name

    if_not_exists = p.accept("if", "not", "exists")
    db, name = split_name(p.table_name())
    cols = p.columns()
    if p.accept("comment"):
        p.string("a table comment")
    part_keys: list[Column] = []
    if p.accept("partitioned", "by"):
        part_keys = p.columns()
    bucket_cols: list[str] = []
    buckets = 0
    if p.accept("clustered", "by"):
        p.expect_punct("(")
        bucket_cols.append(p.ident("a bucket column"))
        while p.accept_punct(","):
            bucket_cols.append(p.ident("a bucket column"))
        p.expect_punct(")")
        p.expect("into")
        count_tok = p.tok
        buckets = p.number("the number of buckets")
        if buckets <= 0:
            raise DdlSyntaxError("the number of buckets must be positive", p.sql, count_tok.pos)
        p.expect("buckets")
    if p.accept("stored", "as"):
        if p.tok.word != "orc":
            raise p.error("only STORED AS ORC is supported")
        p.i += 1
    props = p.properties() if p.accept("tblproperties") else {}
    p.finish()
    ms.create_table(
        db,
        name,
        cols,
        partition_keys=part_keys,
        bucket_columns=bucket_cols,
        num_buckets=buckets,
        properties=props,
        if_not_exists=if_not_exists,
    )
    return None


def _drop(ms: DdlTarget, p: Parser) -> Result:
    if p.accept("table"):
        if_exists = p.accept("if", "exists")
        name = p.table_name()
        p.accept("purge")
        p.finish()
        ms.drop_table(name, if_exists=if_exists)
        return None
    if p.accept("database") or p.accept("schema"):
        if_exists = p.accept("if", "exists")
        name = p.ident("a database name")
        cascade = p.accept("cascade")
        if not cascade:
            p.accept("restrict")
        p.finish()
        ms.drop_database(name, cascade=cascade, if_exists=if_exists)
        return None
    raise p.error("expected TABLE or DATABASE after DROP")


def _show(ms: DdlTarget, p: Parser) -> Result:
    if p.accept("databases") or p.accept("schemas"):
        p.finish()
        return [(d,) for d in ms.list_databases()]
    if p.accept("tables"):
        db = p.ident("a database name") if (p.accept("in") or p.accept("from")) else "default"
        p.finish()
        return [(t,) for t in ms.list_tables(db)]
    if p.accept("partitions"):
        name = p.table_name()
        p.finish()
        return [(part.name,) for part in ms.list_partitions(name)]
    if p.accept("transactions"):
        p.finish()
        return [
            (t.txn_id, t.state.name, t.started, t.last_heartbeat, t.user, t.host, t.agent_info)
            for t in ms.show_txns()
        ]
    if p.accept("locks"):
        table = None if p.tok.kind in ("end", "punct") else p.table_name()
        p.finish()
        return [
            (
                lk.lock_id,
                lk.db,
                lk.table,
                lk.partition,
                lk.state.name,
                lk.type.name,
                lk.txn_id,
                lk.last_heartbeat,
                lk.acquired_at,
                lk.user,
                lk.host,
                lk.agent_info,
                lk.blocked_by,
            )
            for lk in ms.show_locks(table)
        ]
    if p.accept("compactions"):
        p.finish()
        return [compaction_row(c) for c in ms.show_compactions()]
    raise p.error("expected DATABASES, TABLES, PARTITIONS, TRANSACTIONS, LOCKS or COMPACTIONS after SHOW")


def _describe(ms: DdlTarget, p: Parser) -> Result:
    formatted = p.accept("formatted") or p.accept("extended")
    name = p.table_name()
    p.finish()
    t = ms.table(name)
    rows: list[tuple[Any, ...]] = [(c.name, str(c.type), c.comment or "") for c in t.columns]
    if t.partition_keys:
        rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        rows += [(c.name, str(c.type), c.comment or "") for c in t.partition_keys]
    if formatted:
        rows += [
            ("# Detailed Table Information", "", ""),
            ("Database:", t.db, ""),
            ("Table:", t.name, ""),
            ("Location:", t.location, ""),
            ("Table Type:", "MANAGED_TABLE", ""),
            ("Table Parameters:", "", ""),
        ]
        rows += [("", k, v) for k, v in sorted(t.properties.items())]
        rows += [
            ("# Storage Information", "", ""),
            ("InputFormat:", "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat", ""),
            ("OutputFormat:", "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat", ""),
            ("Num Buckets:", str(t.num_buckets if t.num_buckets else -1), ""),
            ("Bucket Columns:", "[" + ", ".join(t.bucket_columns) + "]", ""),
        ]
    return rows


def _alter(ms: DdlTarget, p: Parser) -> Result:
    p.expect("table")
    name = p.table_name()
    if p.tok.word in ("partition", "compact"):
        return _compact(ms, p, name)
    if p.tok.word in ("add", "replace", "change"):
        return _alter_columns(ms, p, name)
    p.expect("set", "tblproperties")
    props = p.properties()
    p.finish()
    ms.alter_table_properties(name, props)
    return None


def _alter_columns(ms: DdlTarget, p: Parser, name: str) -> Result:
    """``ADD COLUMNS (...)``, ``REPLACE COLUMNS (...)`` or ``CHANGE [COLUMN] old new type [COMMENT '...']
    [FIRST | AFTER col]``, each optionally ``CASCADE``/``RESTRICT``; checked by Hive's rules
    (:mod:`acidstream.acid.evolution`) here and again by the metastore."""
    table = ms.table(name)
    keys = table.partition_keys
    if p.accept("add"):
        p.expect("columns")
        added = p.columns()
        change = functools.partial(evolution.add_columns, table.columns, added, keys)
    elif p.accept("replace"):
        p.expect("columns")
        new = p.columns()
        change = functools.partial(evolution.replace_columns, table.full_name, table.columns, new, keys)
    else:
        p.expect("change")
        p.accept("column")
        old = p.ident("a column name")
        column = p.column()
        move = p.accept("first") or (p.accept("after") and bool(p.ident("a column name")))
        change = functools.partial(
            evolution.change_column, table.full_name, table.columns, old, column, keys, move=move
        )
    cascade = p.accept("cascade")
    if cascade:
        evolution.check_cascade(table.is_partitioned)
    else:
        p.accept("restrict")
    p.finish()
    columns = change()
    evolution.check_change(table.columns, columns)
    ms.alter_table_columns(name, columns, cascade=cascade)
    return None


def _compact(ms: DdlTarget, p: Parser, name: str) -> Result:
    """``ALTER TABLE t [PARTITION (k='v', ...)] COMPACT 'major'|'minor' [AND WAIT]``: one row (id, state);
    with ``AND WAIT``, :class:`CompactionError` when it was refused or failed."""
    partition: dict[str, str] | None = None
    if p.accept("partition"):
        p.expect_punct("(")
        partition = {}
        while True:
            key = p.ident("a partition key")
            p.expect_punct("=")
            if p.tok.kind == "num":
                partition[key] = str(p.number("a partition value"))
            else:
                partition[key] = p.string("a partition value")
            if not p.accept_punct(","):
                break
        p.expect_punct(")")
    p.expect("compact")
    kind_tok = p.tok
    kind = p.string("the compaction type 'major' or 'minor'").lower()
    if kind not in ("major", "minor"):
        raise DdlSyntaxError(f"compaction type must be 'major' or 'minor', not {kind!r}", p.sql, kind_tok.pos)
    wait = p.accept("and", "wait")
    p.finish()
    cq_id = ms.compact(name, partition, kind, wait=wait)
    info = ms.get_compaction(cq_id)
    if wait:
        info.finished()  # as Hive's AND WAIT: a refused or failed compaction is an error, not a row
    return [(cq_id, info.state)]


#: SHOW COMPACTIONS columns, Hive 4's (``ShowCompactionsOperation``); "Next TxnId" holds the publication's
#: reader bound, acidstream's equivalent of Hive's ``CQ_NEXT_TXN_ID``.
SHOW_COMPACTIONS_COLUMNS = (
    "CompactionId",
    "Database",
    "Table",
    "Partition",
    "Type",
    "State",
    "Worker host",
    "Worker",
    "Enqueue Time",
    "Start Time",
    "Duration(ms)",
    "HadoopJobId",
    "Error message",
    "Initiator host",
    "Initiator",
    "Pool name",
    "TxnId",
    "Next TxnId",
    "Commit Time",
    "Highest WriteId",
)


def compaction_row(c: CompactionInfo) -> tuple[Any, ...]:
    """One SHOW COMPACTIONS row (``SHOW_COMPACTIONS_COLUMNS``); absent values are None."""
    initiator_host = None if c.initiator_id is None else c.initiator_id.rsplit("-", 1)[0]
    return (
        c.id,
        c.db,
        c.table,
        c.partition,
        c.type,
        c.state,
        c.worker_host,
        c.worker_id,
        c.enqueue_time,
        c.start,
        c.duration_ms,
        None,
        c.error_message,
        initiator_host,
        c.initiator_id,
        "default",
        c.txn_id,
        c.next_reader_id,
        c.commit_time,
        c.highest_write_id,
    )
