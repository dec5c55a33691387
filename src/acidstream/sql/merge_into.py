"""``MERGE INTO target USING source ON ... WHEN ...``: one mutation txn, routed row by row as SQL routes it.

The source is another table of the metastore, read at the txn's own snapshot (the one the target's ROW__IDs
are read at), so both are seen at one point in time. ON needs at least one equality between a target and a
source column (the join keys); its other conditions may name either side and decide which pairs match. The
WHEN clauses of each kind are tried in order, and the first whose condition holds takes the row:

- ``WHEN MATCHED [AND c] THEN UPDATE SET col = expr, ... | UPDATE SET * | DELETE``
- ``WHEN NOT MATCHED [BY TARGET] [AND c] THEN INSERT [(cols)] VALUES (...) | INSERT *``
- ``WHEN NOT MATCHED BY SOURCE [AND c] THEN UPDATE SET ... | DELETE``

``*`` means the columns the source shares with the target, by name. A target row matched by two source rows
is an error, as in SQL; rows never move between partitions or buckets.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from sqlglot import exp

from acidstream.errors import InvalidObjectException
from acidstream.mutate.merge import TableMutation, evaluate_assignment
from acidstream.read.scan import TableScan
from acidstream.sql.expressions import Resolve, Translator, common_type
from acidstream.sql.parse import error_at
from acidstream.sql.tables import TableRef, assignments, qualifier_of, refuse_extras

if TYPE_CHECKING:
    from acidstream.metastore import MetastoreFacade

Side = Literal["t", "s"]
TARGET: Side = "t"
SOURCE: Side = "s"
Indices = npt.NDArray[np.int64]
_BOTH: set[Side] = {TARGET, SOURCE}


@dataclass
class Clause:
    """One WHEN clause: what it does, to which rows, with which values (target column → expression)."""

    action: Literal["update", "delete", "insert"]
    condition: pc.Expression | None
    values: dict[str, pc.Expression] = field(default_factory=dict)
    #: SET col = ... (checked as UPDATE's are: no partition key, no bucketed column); SET * is not, its values
    #: are checked row by row (a row that would move is refused)
    explicit: bool = True


@dataclass
class Key:
    target: str
    source: str
    #: the type both sides are joined as (int and bigint: bigint)
    type: pa.DataType


@dataclass
class MergePlan:
    target: TableRef
    source: TableRef
    keys: list[Key]
    #: the ON conditions besides the key equalities, over the pair's columns
    on: pc.Expression | None
    matched: list[Clause]
    not_matched: list[Clause]
    by_source: list[Clause]
    #: the columns of each side that conditions and values read
    used: dict[Side, set[str]]

    def target_columns(self) -> list[str]:
        needed = {k.target for k in self.keys} | self.used[TARGET]
        if any(c.action == "update" for c in (*self.matched, *self.by_source)):
            needed |= {c.name for c in self.target.table.columns}  # an updated row keeps its other values
        return [c for c in self.target.types if c in needed]

    def source_columns(self) -> list[str]:
        needed = {k.source for k in self.keys} | self.used[SOURCE]
        return [c for c in self.source.types if c in needed]


def run_merge(ms: MetastoreFacade, sql: str, statement: exp.Merge) -> dict[str, int]:
    plan = _plan(ms, sql, statement)
    with TableMutation(ms, plan.target.table.full_name) as m:
        for clause in (*plan.matched, *plan.by_source):
            if clause.action == "update" and clause.explicit:
                m.changes.check_assignments(clause.values)
        source = TableScan(
            ms, plan.source.table, columns=plan.source_columns(), snapshot=m.snapshot
        ).to_arrow()
        # without BY SOURCE clauses only target rows whose keys the source holds matter
        target, parts = m.read_target(
            plan.target_columns(), None if plan.by_source else _key_filter(plan, source)
        )
        t_idx, s_idx = _match(plan, target, source)
        pieces: list[pa.Table] = []
        if plan.matched and len(t_idx):
            rows = _rows(plan, target, t_idx, source, s_idx)
            for clause, chosen in _route(rows, plan.matched):
                pieces.append(_act(m, plan, clause, target, parts, t_idx[chosen], rows.take(chosen)))
        if plan.not_matched:
            unmatched = np.setdiff1d(np.arange(source.num_rows), s_idx)
            rows = _rows(plan, None, unmatched, source, unmatched)
            for clause, chosen in _route(rows, plan.not_matched):
                pieces.append(
                    m.changes.inserts(_values(plan, clause, rows.take(chosen)), parts, m.known_partitions())
                )
        if plan.by_source:
            orphans = np.setdiff1d(np.arange(target.num_rows), t_idx)
            rows = _rows(plan, target, orphans, None, orphans)
            for clause, chosen in _route(rows, plan.by_source):
                pieces.append(_act(m, plan, clause, target, parts, orphans[chosen], rows.take(chosen)))
        m.write(pieces, parts)
        return m.commit()


# --- planning ---------------------------------------------------------------------------------------------------


def _plan(ms: MetastoreFacade, sql: str, statement: exp.Merge) -> MergePlan:
    refuse_extras(sql, statement, {"this", "using", "on", "whens"}, "MERGE")
    target = TableRef.of(ms, sql, statement.this)
    using = statement.args["using"]
    source = TableRef.of(ms, sql, using)
    shared = target.qualifiers & source.qualifiers
    if shared:
        raise error_at(
            sql, using, f"the target and the source are both called {min(shared)}: give one an alias"
        )
    scope = _Scope(sql, target, source)
    on = statement.args.get("on")
    if not isinstance(on, exp.Expr):
        raise error_at(sql, statement, "MERGE needs ON with an equality of a target and a source column")
    keys, rest = scope.keys(on)
    translator = Translator(sql, scope.resolver({TARGET, SOURCE}, "ON"))
    conditions = [translator.predicate(c) for c in rest]
    condition = conditions[0] if conditions else None
    for other in conditions[1:]:
        condition = pc.and_kleene(condition, other)
    plan = MergePlan(target, source, keys, condition, [], [], [], scope.used)
    for when in statement.args["whens"].expressions:
        _add_clause(sql, plan, scope, when)
    return plan


def _add_clause(sql: str, plan: MergePlan, scope: _Scope, when: exp.When) -> None:
    then = when.args["then"]
    if when.args.get("matched"):
        place, sides, clauses = "WHEN MATCHED", {TARGET, SOURCE}, plan.matched
    elif when.args.get("source"):
        place, sides, clauses = "WHEN NOT MATCHED BY SOURCE", {TARGET}, plan.by_source
    else:
        place, sides, clauses = "WHEN NOT MATCHED", {SOURCE}, plan.not_matched
    translator = Translator(sql, scope.resolver(sides, place))
    condition = when.args.get("condition")
    predicate = translator.predicate(condition) if condition is not None else None
    inserting = clauses is plan.not_matched
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE" and not inserting:
        clauses.append(Clause("delete", predicate))
    elif isinstance(then, exp.Update) and not inserting:
        refuse_extras(sql, then, {"expressions"}, "UPDATE SET")
        if any(isinstance(item, exp.Star) for item in then.expressions):
            if SOURCE not in sides:
                raise error_at(
                    sql, then, f"UPDATE SET * in {place}: there is no source row to take values from"
                )
            clauses.append(Clause("update", predicate, scope.shared_values(), explicit=False))
        else:
            clauses.append(
                Clause("update", predicate, assignments(sql, then.expressions, plan.target, translator))
            )
    elif isinstance(then, exp.Insert) and inserting:
        clauses.append(Clause("insert", predicate, _insert_values(sql, plan, scope, then, translator)))
    else:
        allowed = "INSERT" if inserting else "UPDATE SET or DELETE"
        found = then.name.upper() if isinstance(then, exp.Var) else then.key.upper()
        raise error_at(sql, then, f"{place} clauses do {allowed}, not {found}")


def _insert_values(
    sql: str, plan: MergePlan, scope: _Scope, insert: exp.Insert, translator: Translator
) -> dict[str, pc.Expression]:
    refuse_extras(sql, insert, {"this", "expression"}, "INSERT")
    columns_node, values_node = insert.this, insert.args.get("expression")
    if isinstance(columns_node, exp.Star):  # INSERT *
        values = scope.shared_values()
        missing = [c for c in plan.target.types if c not in values]
        if missing:
            raise error_at(sql, insert, f"INSERT * needs source columns named as the target's: no {missing}")
        return values
    if columns_node is None:  # every column, in the table's order (partition keys last), as Hive does
        names = list(plan.target.types)
    else:
        names = []
        for column in columns_node.expressions:
            if not isinstance(column, exp.Column):
                raise error_at(sql, column, "expected a column name")
            name = plan.target.resolver()(column)[0]
            if name in names:
                raise error_at(sql, column, f"column {name} is listed twice")
            names.append(name)
    if not isinstance(values_node, exp.Tuple):
        raise error_at(sql, insert, "expected INSERT [(columns)] VALUES (values) or INSERT *")
    if len(values_node.expressions) != len(names):
        raise error_at(
            sql,
            values_node,
            f"{len(values_node.expressions)} values for {len(names)} columns ({', '.join(names)})",
        )
    return {
        name: translator.value(value, plan.target.types[name])
        for name, value in zip(names, values_node.expressions, strict=True)
    }


class _Scope:
    """Resolves the statement's column references to the target (``t.col``) or the source (``s.col``)."""

    def __init__(self, sql: str, target: TableRef, source: TableRef) -> None:
        self.sql = sql
        self.tables: dict[Side, TableRef] = {TARGET: target, SOURCE: source}
        self.used: dict[Side, set[str]] = {TARGET: set(), SOURCE: set()}

    def side_of(self, column: exp.Column, allowed: set[Side] = _BOTH) -> Side:
        """The table a column reference names; an unqualified name of both tables is the allowed one's."""
        sides = [side for side, ref in self.tables.items() if ref.owns(column)]
        qualifier = qualifier_of(column)
        if len(sides) > 1 and not qualifier and len(allowed) == 1:
            sides = [s for s in sides if s in allowed]
        if len(sides) == 1:
            return sides[0]
        if qualifier:
            known = " and ".join(ref.shown for ref in self.tables.values())
            raise error_at(
                self.sql, column, f"unknown table {qualifier!r} (this statement's tables are {known})"
            )
        if sides:
            raise error_at(self.sql, column, f"column {column.name} is in both tables: qualify it")
        raise error_at(self.sql, column, f"neither table has a column {column.name.lower()!r}")

    def resolver(self, sides: set[Side], place: str) -> Resolve:
        def resolve(column: exp.Column) -> tuple[str, pa.DataType]:
            side = self.side_of(column, sides)
            name, column_type = self.tables[side].column_type(column)
            if side not in sides:
                which = "target" if side == TARGET else "source"
                raise error_at(
                    self.sql, column, f"{place} has no {which} row: {column.sql()} cannot be used here"
                )
            self.used[side].add(name)
            return f"{side}.{name}", column_type

        return resolve

    def keys(self, on: exp.Expr) -> tuple[list[Key], list[exp.Expr]]:
        """The ON clause's equalities of a target and a source column, and its other conditions."""
        keys, rest = [], []
        for condition in _conjuncts(on):
            sides = (
                [self.side_of(c) for c in (condition.this, condition.expression)]
                if isinstance(condition, exp.EQ)
                and isinstance(condition.this, exp.Column)
                and isinstance(condition.expression, exp.Column)
                else []
            )
            if sorted(sides) != [SOURCE, TARGET]:
                rest.append(condition)
                continue
            by_side = dict(zip(sides, (condition.this, condition.expression), strict=True))
            (t_name, t_type), (s_name, s_type) = (
                self.tables[side].column_type(by_side[side]) for side in (TARGET, SOURCE)
            )
            try:
                joined = common_type(t_type, s_type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise error_at(self.sql, condition, f"cannot join {t_type} with {s_type}: {exc}") from None
            keys.append(Key(t_name, s_name, joined))
        if not keys:
            raise error_at(self.sql, on, "ON needs an equality of a target and a source column (t.k = s.k)")
        return keys, rest

    def shared_values(self) -> dict[str, pc.Expression]:
        """``*``: each target column from the source column of the same name."""
        shared = [c for c in self.tables[TARGET].types if c in self.tables[SOURCE].types]
        self.used[SOURCE].update(shared)
        return {c: pc.field(f"{SOURCE}.{c}") for c in shared}


def _conjuncts(node: exp.Expr) -> Iterator[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


# --- execution --------------------------------------------------------------------------------------------------


def _key_filter(plan: MergePlan, source: pa.Table) -> pc.Expression:
    """Target rows whose keys are among the source's (each key on its own: a superset of the matches)."""
    expr: pc.Expression | None = None
    for key in plan.keys:
        values = pc.unique(pc.drop_null(source.column(key.source).cast(key.type)).combine_chunks())
        field_ = pc.field(key.target)
        if plan.target.types[key.target] != key.type:
            field_ = field_.cast(key.type)
        term = pc.is_in(field_, value_set=values)
        expr = term if expr is None else pc.and_kleene(expr, term)
    assert expr is not None
    return expr


def _match(plan: MergePlan, target: pa.Table, source: pa.Table) -> tuple[Indices, Indices]:
    """(target row, source row) of every matching pair, by target row; null keys never match."""
    names = [f"k{i}" for i in range(len(plan.keys))]

    def keyed(table: pa.Table, columns: Sequence[str], index: str) -> pa.Table:
        data = {n: table.column(c).cast(k.type) for n, c, k in zip(names, columns, plan.keys, strict=True)}
        keyed = pa.table({**data, index: pa.array(np.arange(table.num_rows, dtype=np.int64))})
        valid = pc.is_valid(keyed.column(names[0]))
        for n in names[1:]:
            valid = pc.and_(valid, pc.is_valid(keyed.column(n)))
        return keyed.filter(valid)

    joined = keyed(target, [k.target for k in plan.keys], "__t").join(
        keyed(source, [k.source for k in plan.keys], "__s"), keys=names, join_type="inner"
    )
    t_idx = joined.column("__t").to_numpy().astype(np.int64)
    s_idx = joined.column("__s").to_numpy().astype(np.int64)
    if plan.on is not None and len(t_idx):
        keep = _truth(_rows(plan, target, t_idx, source, s_idx), plan.on)
        t_idx, s_idx = t_idx[keep], s_idx[keep]
    if plan.matched and len(t_idx):
        counts = np.bincount(t_idx, minlength=target.num_rows)
        if counts.max() > 1:
            row = int(np.argmax(counts > 1))
            key = {k.target: target.column(k.target)[row].as_py() for k in plan.keys}
            raise InvalidObjectException(
                f"{int(counts[row])} source rows match the target row with {key}: a MERGE changes a row at most "
                "once (deduplicate the source, or narrow ON)"
            )
    order = np.argsort(t_idx, kind="stable")
    return t_idx[order], s_idx[order]


def _rows(
    plan: MergePlan,
    target: pa.Table | None,
    t_idx: Indices,
    source: pa.Table | None,
    s_idx: Indices,
) -> pa.Table:
    """The columns conditions and values read (``t.col``, ``s.col``) for the given rows of each side."""
    columns: dict[str, pa.ChunkedArray | pa.Array] = {
        "__row": pa.array(np.arange(len(t_idx), dtype=np.int64))
    }
    for side, table, idx in ((TARGET, target, t_idx), (SOURCE, source, s_idx)):
        if table is None:
            continue
        take = pa.array(idx)
        for name in sorted(plan.used[side]):
            columns[f"{side}.{name}"] = table.column(name).take(take)
    return pa.table(columns)


def _route(rows: pa.Table, clauses: Sequence[Clause]) -> Iterator[tuple[Clause, Indices]]:
    """Each clause with the rows it takes: those its condition holds for that no earlier clause took."""
    free = np.ones(rows.num_rows, dtype=bool)
    for clause in clauses:
        if not free.any():
            return
        chosen = free.copy() if clause.condition is None else free & _truth(rows, clause.condition)
        free &= ~chosen
        if chosen.any():
            yield clause, np.flatnonzero(chosen).astype(np.int64)


def _truth(rows: pa.Table, condition: pc.Expression) -> npt.NDArray[np.bool_]:
    """Where ``condition`` holds (unknown: not)."""
    result = ds.dataset(rows).to_table(columns={"v": condition}).column("v")
    return np.asarray(pc.fill_null(result, False).to_numpy(zero_copy_only=False), dtype=bool)


def _values(plan: MergePlan, clause: Clause, rows: pa.Table) -> pa.Table:
    """The clause's values for ``rows``, as a table of target columns of the target's types."""
    return pa.table(
        {
            name: evaluate_assignment(value, rows, plan.target.types[name], name)
            for name, value in clause.values.items()
        }
    )


def _act(
    m: TableMutation,
    plan: MergePlan,
    clause: Clause,
    target: pa.Table,
    parts: list[tuple[str | None, ...]],
    t_idx: Indices,
    rows: pa.Table,
) -> pa.Table:
    """The mutations of an UPDATE or DELETE clause on target rows ``t_idx`` (``rows``: their columns)."""
    if clause.action == "delete":
        return m.changes.marked(target.take(pa.array(t_idx)))
    return m.changes.updates(
        target, parts, _values(plan, clause, rows), t_idx, np.arange(len(t_idx), dtype=np.int64)
    )
