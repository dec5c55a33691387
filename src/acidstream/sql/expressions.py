"""SQL expressions (sqlglot nodes) as Arrow compute expressions, typed as Hive types them.

A literal takes the type of what it meets — ``d = '2024-01-31'`` compares a date column with a date,
``price > 9.99`` a decimal with a decimal — and is otherwise typed as Hive types it (``1`` an int, ``3000000000``
a bigint, ``1.5`` a decimal, ``1e3`` a double). Arithmetic is Hive's: integers wrap around on overflow as Java's
do (``int * int`` is an int), ``/`` and ``%`` by zero are NULL, and a value narrowed to a smaller integer keeps
its low bits (Java's cast). Predicates keep SQL's three-valued logic: a comparison with NULL is unknown, and
unknown never selects a row, under NOT or NOT IN too. Every expression is bound to the columns' types as it is
built, so a type mismatch is reported at the construct, before any txn opens; a construct without a
translation is a :class:`~acidstream.errors.SqlSyntaxError` naming it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from sqlglot import exp

from acidstream.acid.types import parse_type
from acidstream.errors import InvalidObjectException, SqlSyntaxError
from acidstream.sql.parse import DIALECT, error_at, shown, unsupported

#: Resolves a column reference to (field name in the evaluated table, type); raises for unknown columns.
Resolve = Callable[[exp.Column], tuple[str, pa.DataType]]

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError)
_ANCHOR = "\x00anchor"  # a column of the type a literal is compared with, to check that they compare
_NULL_BOOL = pc.scalar(pa.scalar(None, pa.bool_()))
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class Operand:
    """A translated expression and its type; a literal also keeps its value, to be retyped by its neighbour."""

    expr: pc.Expression
    type: pa.DataType
    literal: bool = False
    value: Any = None


def literal(value: Any, type: pa.DataType | None = None) -> Operand:
    scalar = pa.scalar(value, type) if type is not None else pa.scalar(value)
    return Operand(pc.scalar(scalar), scalar.type, literal=True, value=scalar.as_py())


class Translator:
    """Translates the expressions of one statement, over the columns ``resolve`` knows."""

    def __init__(self, sql: str, resolve: Resolve) -> None:
        self.sql = sql
        self._resolve = resolve
        self._fields: dict[str, pa.DataType] = {}

    # --- entry points ---------------------------------------------------------------------------------------

    def predicate(self, node: exp.Expr) -> pc.Expression:
        """A condition (WHERE, ON, WHEN ... AND): a boolean expression; NULL selects nothing."""
        op = self.operand(node)
        if not (pa.types.is_boolean(op.type) or pa.types.is_null(op.type)):
            raise error_at(self.sql, node, f"expected a condition, found a value of type {op.type}")
        return op.expr.cast(pa.bool_()) if pa.types.is_null(op.type) else op.expr  # WHERE NULL

    def value(self, node: exp.Expr, target: pa.DataType) -> pc.Expression:
        """A value for a column of type ``target`` (SET, INSERT VALUES), converted as Hive assigns: a decimal
        rounded to the column's scale (half away from zero), a fraction into an integer truncated."""
        op = self.operand(node)
        if op.literal:
            if pa.types.is_decimal(target) and isinstance(op.value, Decimal | float):
                exponent = Decimal(1).scaleb(-target.scale)
                op = literal(Decimal(str(op.value)).quantize(exponent, rounding=ROUND_HALF_UP))
            return self._coerce(op, target, node, strict=True).expr
        return self._typed(_convert(op, target), node).expr

    # --- translation ----------------------------------------------------------------------------------------

    def operand(self, node: exp.Expr) -> Operand:
        translate = _TRANSLATIONS.get(exp.Cast if isinstance(node, exp.Cast) else type(node))
        if translate is None:
            raise unsupported(self.sql, node, _describe(node))
        return translate(self, node)

    def _paren(self, node: exp.Paren) -> Operand:
        return self.operand(node.this)

    def _logical(self, node: exp.And | exp.Or) -> Operand:
        combine = pc.and_kleene if isinstance(node, exp.And) else pc.or_kleene
        return self._typed(combine(self.predicate(node.this), self.predicate(node.expression)), node)

    def _not(self, node: exp.Not) -> Operand:
        return self._typed(pc.invert(self.predicate(node.this)), node)

    def _comparison(self, node: exp.Binary) -> Operand:
        left, right = self._pair(node.this, node.expression, comparing=True)
        return self._typed(_COMPARISONS[type(node)](left.expr, right.expr), node)

    def _negate(self, node: exp.Neg) -> Operand:
        return self._typed(pc.negate(self.operand(node.this).expr), node)  # -MIN is MIN, as in Java

    def _concat(self, node: exp.DPipe | exp.Concat) -> Operand:
        parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else node.expressions
        strings = [self._coerce(self.operand(p), pa.string(), p, strict=True).expr for p in parts]
        return self._typed(pc.binary_join_element_wise(*strings, ""), node)

    def _coalesce(self, node: exp.Coalesce) -> Operand:
        args = self._common([node.this, *node.expressions])
        return self._typed(pc.coalesce(*(a.expr for a in args)), node)

    def _if(self, node: exp.If) -> Operand:
        then, otherwise = self._common([node.args["true"], node.args.get("false") or exp.Null()])
        return self._typed(pc.if_else(self.predicate(node.this), then.expr, otherwise.expr), node)

    def _function(self, node: exp.Func) -> Operand:
        return self._typed(_FUNCTIONS[type(node)](self.operand(node.this).expr), node)

    def _now(self, node: exp.CurrentDate | exp.CurrentTimestamp) -> Operand:
        if isinstance(node, exp.CurrentDate):
            return literal(dt.date.today())
        return literal(dt.datetime.now(), pa.timestamp("ns"))

    def _column(self, node: exp.Column) -> Operand:
        if isinstance(node.this, exp.Star) or node.args.get("catalog") is not None:
            raise unsupported(self.sql, node, "this column reference")
        name, type = self._resolve(node)
        self._fields[name] = type
        return Operand(pc.field(name), type)

    def _literal(self, node: exp.Expr) -> Operand:
        if isinstance(node, exp.Null):
            return literal(None)
        if isinstance(node, exp.Boolean):
            return literal(bool(node.this))
        assert isinstance(node, exp.Literal)
        text = str(node.this)
        if node.is_string:
            return literal(text)
        try:
            if text.isdigit():
                number = int(text)
                return literal(number, pa.int32() if number <= _INT_MAX else None)
            if "e" in text.lower():
                return literal(float(text))
            return literal(Decimal(text))
        except (ValueError, InvalidOperation, *_ARROW_ERRORS):
            raise error_at(self.sql, node, f"cannot read the number {text}") from None

    def _cast(self, node: exp.Cast) -> Operand:
        target = _arrow_type(self.sql, node.to)
        op = self.operand(node.this)
        if op.literal:
            try:
                return self._coerce(op, target, node.this, strict=True)
            except SqlSyntaxError:
                if not (_numeric(op.type) and _numeric(target)):  # CAST(2.5 AS INT) is 2, as Hive has it
                    raise
        return self._typed(_convert(op, target), node)

    def _null_safe_equal(self, node: exp.NullSafeEQ) -> Operand:
        left, right = self._pair(node.this, node.expression, comparing=True)
        a_null, b_null = pc.is_null(left.expr), pc.is_null(right.expr)
        same = pc.if_else(
            pc.or_kleene(a_null, b_null), pc.and_kleene(a_null, b_null), pc.equal(left.expr, right.expr)
        )
        return self._typed(same, node)

    def _is(self, node: exp.Is) -> Operand:
        subject = self.operand(node.this).expr
        if isinstance(node.expression, exp.Null):
            return self._typed(pc.is_null(subject), node)
        if isinstance(node.expression, exp.Boolean):  # IS TRUE / IS FALSE: never unknown
            return self._typed(
                pc.coalesce(pc.equal(subject, pc.scalar(bool(node.expression.this))), pc.scalar(False)), node
            )
        raise unsupported(self.sql, node, _describe(node))

    def _in(self, node: exp.In) -> Operand:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise unsupported(self.sql, node.args.get("query") or node.args["unnest"], "a subquery")
        subject = self.operand(node.this)
        items = [self.operand(item) for item in node.expressions]
        if not all(item.literal for item in items):  # expressions in the list: a chain of equalities
            equal = [
                pc.equal(subject.expr, self._meet(subject, item, n, comparing=True).expr)
                for item, n in zip(items, node.expressions, strict=True)
            ]
            result = equal[0]
            for term in equal[1:]:
                result = pc.or_kleene(result, term)
            return self._typed(result, node)
        values = [
            self._coerce(item, subject.type, n, strict=True)
            for item, n in zip(items, node.expressions, strict=True)
        ]
        known = [v.value for v in values if v.value is not None]
        found = pc.is_in(subject.expr, value_set=pa.array(known, subject.type), skip_nulls=True)
        # SQL: NULL IN (...) is unknown, and so is a miss when the list holds a NULL
        result = pc.if_else(pc.is_null(subject.expr), _NULL_BOOL, found)
        if len(known) < len(values):
            result = pc.if_else(result, pc.scalar(True), _NULL_BOOL)
        return self._typed(result, node)

    def _between(self, node: exp.Between) -> Operand:
        subject = self.operand(node.this)
        low, high = (
            self._meet(subject, self.operand(node.args[k]), node.args[k], comparing=True)
            for k in ("low", "high")
        )
        both = pc.and_kleene(pc.greater_equal(subject.expr, low.expr), pc.less_equal(subject.expr, high.expr))
        return self._typed(both, node)

    def _like(self, node: exp.Like | exp.ILike | exp.RegexpLike) -> Operand:
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise error_at(self.sql, pattern, "the pattern must be a string literal")
        subject = self._coerce(self.operand(node.this), pa.string(), node.this, strict=True).expr
        if isinstance(node, exp.RegexpLike):  # Hive's RLIKE finds the pattern anywhere, as Java's find()
            matched = pc.match_substring_regex(subject, pattern=pattern.this)
        else:
            matched = pc.match_like(subject, pattern=pattern.this, ignore_case=isinstance(node, exp.ILike))
        if node.args.get("negate"):
            matched = pc.invert(matched)
        return self._typed(matched, node)

    def _arithmetic(self, node: exp.Expr) -> Operand:
        left, right = self._pair(node.this, node.expression, comparing=False)
        if isinstance(
            node, exp.IntDiv
        ):  # DIV: a bigint quotient, truncated; a zero divisor fails, as in Hive
            a, b = _convert(left, pa.int64()), _convert(right, pa.int64())
            quotient = _ARITHMETIC[exp.IntDiv](a, b)
            return self._typed(pc.if_else(pc.equal(b, -1), pc.negate(a), quotient), node)  # MIN DIV -1 is MIN
        a, b = left.expr, right.expr
        divisor = right.type
        decimal = pa.types.is_decimal(left.type) or pa.types.is_decimal(right.type)
        if isinstance(node, exp.Div) and not decimal:  # Hive's / is a double division
            a, b, divisor = a.cast(pa.float64()), b.cast(pa.float64()), pa.float64()
        if isinstance(node, exp.Div | exp.Mod) and _numeric(divisor):  # x / 0 and x % 0 are NULL
            zero = pa.scalar(Decimal(0) if pa.types.is_decimal(divisor) else 0, divisor)
            b = pc.if_else(pc.equal(b, pc.scalar(zero)), pc.scalar(pa.scalar(None, divisor)), b)
        wraps = pa.types.is_integer(left.type) and pa.types.is_integer(right.type)
        return self._typed((_WRAPPING if wraps else _ARITHMETIC)[type(node)](a, b), node)

    def _case(self, node: exp.Case) -> Operand:
        branches = node.args.get("ifs") or []
        subject = self.operand(node.this) if node.this is not None else None
        conditions = []
        for branch in branches:
            if subject is None:  # CASE WHEN condition THEN ...
                conditions.append(self.predicate(branch.this))
            else:  # CASE subject WHEN value THEN ...
                value = self._meet(subject, self.operand(branch.this), branch.this, comparing=True)
                conditions.append(self._typed(pc.equal(subject.expr, value.expr), branch.this).expr)
        values = self._common([*(b.args["true"] for b in branches), node.args.get("default") or exp.Null()])
        fields = [f"c{i}" for i in range(len(conditions))]
        result = pc.case_when(pc.make_struct(*conditions, field_names=fields), *(v.expr for v in values))
        return self._typed(result, node)

    def _trim(self, node: exp.Trim) -> Operand:
        if node.args.get("expression") is not None:
            raise unsupported(self.sql, node, "TRIM of other characters than spaces")
        subject = self.operand(node.this).expr
        position = str(node.args.get("position") or "").upper()
        function = {"LEADING": pc.utf8_ltrim_whitespace, "TRAILING": pc.utf8_rtrim_whitespace}.get(
            position, pc.utf8_trim_whitespace
        )
        return self._typed(function(subject), node)

    def _round(self, node: exp.Round) -> Operand:
        digits = self._integer(node.args.get("decimals"), "the number of decimals")
        # Hive rounds half away from zero (Java's HALF_UP)
        rounded = pc.round(self.operand(node.this).expr, ndigits=digits, round_mode="half_towards_infinity")
        return self._typed(rounded, node)

    def _substring(self, node: exp.Substring) -> Operand:
        start = self._integer(node.args.get("start"), "the start position")
        length_node = node.args.get("length")
        subject = self._coerce(self.operand(node.this), pa.string(), node.this, strict=True).expr
        begin = max(start - 1, 0)  # Hive counts from 1 (0 means 1 too)
        if start < 0:
            raise error_at(self.sql, node.args["start"], "a negative start position is not supported")
        if length_node is None:
            return self._typed(pc.utf8_slice_codeunits(subject, start=begin), node)
        length = self._integer(length_node, "the length")
        return self._typed(pc.utf8_slice_codeunits(subject, start=begin, stop=begin + max(length, 0)), node)

    def _integer(self, node: exp.Expr | None, what: str) -> int:
        if node is None:
            return 0
        if isinstance(node, exp.Neg):
            return -self._integer(node.this, what)
        if isinstance(node, exp.Literal) and not node.is_string and str(node.this).isdigit():
            return int(node.this)
        raise error_at(self.sql, node, f"{what} must be an integer literal")

    # --- typing ---------------------------------------------------------------------------------------------

    def _pair(self, left: exp.Expr, right: exp.Expr, *, comparing: bool) -> tuple[Operand, Operand]:
        a, b = self.operand(left), self.operand(right)
        return self._meet(b, a, left, comparing=comparing), self._meet(a, b, right, comparing=comparing)

    def _meet(self, anchor: Operand, other: Operand, other_node: exp.Expr, *, comparing: bool) -> Operand:
        """``other`` retyped to meet ``anchor`` if it is a literal and the anchor is not."""
        if not other.literal or anchor.literal:
            return other
        if comparing:
            return self._coerce(other, anchor.type, other_node, strict=False)
        # arithmetic: a literal becomes a decimal beside a decimal, a double beside a floating point value
        if pa.types.is_decimal(anchor.type) and isinstance(other.value, int | Decimal):
            return literal(Decimal(other.value))
        if pa.types.is_floating(anchor.type) and isinstance(other.value, int | Decimal):
            return literal(float(other.value))
        return other

    def _common(self, nodes: Sequence[exp.Expr]) -> list[Operand]:
        """Operands that meet in one result (COALESCE, IF, CASE): literals take the type of the first that is
        not a literal, else of the first that is not NULL."""
        ops = [self.operand(n) for n in nodes]
        typed = next((op for op in ops if not op.literal), None)
        typed = typed or next((op for op in ops if not pa.types.is_null(op.type)), None)
        if typed is None:
            return ops
        return [
            self._coerce(op, typed.type, n, strict=True) if op.literal else op
            for op, n in zip(ops, nodes, strict=True)
        ]

    def _coerce(self, op: Operand, target: pa.DataType, node: exp.Expr, *, strict: bool) -> Operand:
        """A literal converted to ``target``; when it does not convert, an error (``strict``) or the literal as
        it is, left to the comparison's own rules (``d = 1.555`` with a decimal(10,2) ``d``)."""
        if not op.literal or op.type == target:
            return op
        try:
            if op.value is None:
                return literal(None, target)
            value = op.value
            if pa.types.is_floating(target) and isinstance(value, Decimal):
                value = float(value)
            elif pa.types.is_decimal(target) and isinstance(value, int) and not isinstance(value, bool):
                value = Decimal(value)  # an integer scalar casts only to decimals of 19+ digits
            converted = pa.scalar(value).cast(target)
            return Operand(pc.scalar(converted), target, literal=True, value=converted.as_py())
        except _ARROW_ERRORS as exc:
            if not strict:
                try:
                    self._type_of(pc.equal(pc.field(_ANCHOR), op.expr), {_ANCHOR: target})
                    return op
                except _ARROW_ERRORS:
                    pass
            raise error_at(
                self.sql, node, f"cannot use {shown(node)} as a value of type {target}: {exc}"
            ) from None

    def _typed(self, expr: pc.Expression, node: exp.Expr) -> Operand:
        """``expr`` with its type, found by binding it to the columns' types; a mismatch is reported at node."""
        try:
            return Operand(expr, self._type_of(expr))
        except _ARROW_ERRORS as exc:
            raise error_at(self.sql, node, f"cannot evaluate {shown(node)}: {exc}") from None

    def _type_of(self, expr: pc.Expression, extra: dict[str, pa.DataType] | None = None) -> pa.DataType:
        empty = pa.schema(list({**self._fields, **(extra or {})}.items())).empty_table()
        return ds.dataset(empty).to_table(columns={"v": expr}).schema.field("v").type


_COMPARISONS: dict[type[exp.Expr], Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
    exp.EQ: pc.equal,
    exp.NEQ: pc.not_equal,
    exp.GT: pc.greater,
    exp.GTE: pc.greater_equal,
    exp.LT: pc.less,
    exp.LTE: pc.less_equal,
}

_ARITHMETIC: dict[type[exp.Expr], Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
    exp.Add: pc.add_checked,
    exp.Sub: pc.subtract_checked,
    exp.Mul: pc.multiply_checked,
    exp.Div: pc.divide_checked,
    exp.IntDiv: pc.divide,  # of bigints: a zero divisor fails the statement, as Hive's DIV does
    exp.Mod: pc.remainder_checked,  # the sign of the dividend, as Java's %
}
#: Integer arithmetic in the operands' wider type, wrapping around on overflow as Java's (Hive's) does.
_WRAPPING = {
    **_ARITHMETIC,
    exp.Add: pc.add,
    exp.Sub: pc.subtract,
    exp.Mul: pc.multiply,
    exp.Mod: pc.remainder,
}

_FUNCTIONS: dict[type[exp.Expr], Callable[[pc.Expression], pc.Expression]] = {
    exp.Upper: pc.utf8_upper,
    exp.Lower: pc.utf8_lower,
    exp.Length: pc.utf8_length,
    exp.Abs: pc.abs,  # abs(MIN) is MIN, as Java's Math.abs
}


#: How each kind of node translates (a CAST's subclasses, Hive's TRY_CAST among them, as CAST).
_TRANSLATIONS: dict[type[exp.Expr], Callable[[Translator, Any], Operand]] = {
    exp.Paren: Translator._paren,
    exp.Column: Translator._column,
    exp.Literal: Translator._literal,
    exp.Boolean: Translator._literal,
    exp.Null: Translator._literal,
    exp.Cast: Translator._cast,
    exp.CurrentDate: Translator._now,
    exp.CurrentTimestamp: Translator._now,
    exp.And: Translator._logical,
    exp.Or: Translator._logical,
    exp.Not: Translator._not,
    **dict.fromkeys(_COMPARISONS, Translator._comparison),
    exp.NullSafeEQ: Translator._null_safe_equal,
    exp.Is: Translator._is,
    exp.In: Translator._in,
    exp.Between: Translator._between,
    exp.Like: Translator._like,
    exp.ILike: Translator._like,
    exp.RegexpLike: Translator._like,
    **dict.fromkeys(_ARITHMETIC, Translator._arithmetic),
    exp.Neg: Translator._negate,
    exp.DPipe: Translator._concat,
    exp.Concat: Translator._concat,
    exp.Coalesce: Translator._coalesce,
    exp.If: Translator._if,
    exp.Case: Translator._case,
    **dict.fromkeys(_FUNCTIONS, Translator._function),
    exp.Trim: Translator._trim,
    exp.Round: Translator._round,
    exp.Substring: Translator._substring,
}


def _numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))


def _convert(op: Operand, target: pa.DataType) -> pc.Expression:
    """``op`` as a ``target`` value the way Hive converts: numbers rounded to a decimal's scale (half away from
    zero) or truncated to an integer, where Arrow's cast would refuse to lose digits; an integer narrowed to a
    smaller one keeps its low bits (``CAST(bigint AS int)``, or an int expression set into a tinyint column)."""
    if op.type == target:
        return op.expr
    expr = op.expr
    if pa.types.is_decimal(target) and (pa.types.is_decimal(op.type) or pa.types.is_floating(op.type)):
        expr = pc.round(expr, ndigits=target.scale, round_mode="half_towards_infinity")
    elif pa.types.is_integer(target) and (pa.types.is_decimal(op.type) or pa.types.is_floating(op.type)):
        expr = pc.trunc(expr)
    elif pa.types.is_integer(target) and pa.types.is_integer(op.type):
        return expr.cast(target, safe=False)
    return expr.cast(target)


def _arrow_type(sql: str, node: exp.DataType) -> pa.DataType:
    text = node.sql(dialect=DIALECT)
    try:
        return parse_type(text).to_arrow()
    except InvalidObjectException as exc:
        raise error_at(sql, node, f"cannot cast to {text}: {exc}") from None


def _describe(node: exp.Expr) -> str:
    if isinstance(node, exp.Func):
        return f"the function {node.name.upper() if isinstance(node, exp.Anonymous) else node.sql_name()}"
    if isinstance(node, exp.Subquery | exp.Select):
        return "a subquery"
    return f"the construct {type(node).__name__}"


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type values of types ``a`` and ``b`` meet in, as Arrow's kernels promote them (int and bigint:
    bigint); an Arrow error if they do not meet."""
    empty = pa.schema([("a", a), ("b", b)]).empty_table()
    both = pc.coalesce(pc.field("a"), pc.field("b"))
    return ds.dataset(empty).to_table(columns={"v": both}).schema.field("v").type


__all__ = ["Operand", "Resolve", "Translator", "common_type", "literal"]
