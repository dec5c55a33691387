"""SQL expressions as Arrow compute expressions: Hive's literal typing, SQL's three-valued logic, errors at the
construct. Evaluated over an in-memory table; a property test checks predicates against a reference evaluator."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlhelpers import java_int

from acidstream.errors import SqlSyntaxError
from acidstream.sql.expressions import Translator
from acidstream.sql.parse import parse_statement

ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3, 4, None], pa.int32()),
        "name": ["ann", "bob", None, "Al", "x_y"],
        "price": pa.array(
            [Decimal("1.50"), Decimal("9.99"), None, Decimal("-2.25"), Decimal("0")], pa.decimal128(10, 2)
        ),
        "score": [1.0, 2.5, None, 4.0, -1.0],
        "day": pa.array([dt.date(2024, 1, d) for d in (1, 15, 31)] + [None, dt.date(2023, 12, 31)]),
        "flag": [True, False, None, True, False],
    }
)
TYPES = dict(zip(ROWS.column_names, ROWS.schema.types, strict=True))


def resolve(column: exp.Column) -> tuple[str, pa.DataType]:
    return column.name, TYPES[column.name]


def where(condition: str, table: pa.Table = ROWS) -> list[Any]:
    """The ids of the rows ``condition`` selects (as DELETE ... WHERE would)."""
    sql = f"DELETE FROM t WHERE {condition}"
    predicate = Translator(sql, resolve).predicate(parse_statement(sql).args["where"].this)
    return ds.dataset(table).to_table(filter=predicate).column("id").to_pylist()


def value(expression: str, target: pa.DataType) -> list[Any]:
    """``expression`` for every row, as UPDATE ... SET c = expression gives it for a column of ``target``."""
    sql = f"UPDATE t SET c = {expression}"
    node = parse_statement(sql).expressions[0].expression
    result = Translator(sql, resolve).value(node, target)
    return ds.dataset(ROWS).to_table(columns={"v": result}).column("v").cast(target).to_pylist()


@pytest.mark.parametrize(
    ("condition", "ids"),
    [
        ("id > 2", [3, 4]),
        ("id = '3'", [3]),  # a string literal takes the column's type
        ("price > 1.5", [2]),  # a decimal literal, compared as decimal
        ("price = 1.555", []),  # more digits than the column: compared, not refused
        ("price * 2 > 3", [2]),
        ("score >= 2.5 AND score < 4", [2]),
        ("day >= '2024-01-15'", [2, 3]),
        ("day = DATE '2023-12-31'", [None]),
        ("day BETWEEN '2024-01-01' AND '2024-01-15'", [1, 2]),
        ("id IN (1, 3)", [1, 3]),
        ("id NOT IN (1, 3)", [2, 4]),  # a NULL id is neither in nor out
        ("NOT id IN (1, NULL)", []),  # a miss against a list holding NULL is unknown
        ("id BETWEEN 2 AND 3 OR name = 'ann'", [1, 2, 3]),
        ("NOT (id > 2)", [1, 2]),
        ("name LIKE 'a%'", [1]),
        ("name NOT LIKE 'a%'", [2, 4, None]),
        ("name LIKE 'x\\_y'", [None]),
        ("name ILIKE 'a%'", [1, 4]),
        ("name RLIKE 'o'", [2]),
        ("name IS NULL", [3]),
        ("name IS NOT NULL AND id IS NULL", [None]),
        ("flag", [1, 4]),
        ("NOT flag", [2, None]),
        ("flag IS NOT TRUE", [2, 3, None]),
        ("id <=> NULL", [None]),
        ("id % 2 = 1", [1, 3]),
        ("id / 2 = 1.5", [3]),  # Hive's / divides as double
        ("id DIV 2 = 1", [2, 3]),
        ("-id < -3", [4]),
        ("upper(name) = 'AL'", [4]),
        ("length(name) = 2", [4]),
        ("coalesce(score, 0) = 0", [3]),
        ("concat(name, '!') = 'bob!'", [2]),
        ("name || '?' = 'Al?'", [4]),
        ("substr(name, 2) = 'ob'", [2]),
        ("substring(name, 1, 1) = 'a'", [1]),
        ("trim(concat(' ', name)) = 'ann'", [1]),
        ("round(price, 1) = 1.5", [1]),
        ("abs(price) > 2", [2, 4]),
        ("cast(id AS string) = '4'", [4]),
        ("CASE WHEN id > 2 THEN 'hi' ELSE 'lo' END = 'hi'", [3, 4]),
        ("CASE id WHEN 1 THEN true WHEN 2 THEN true ELSE false END", [1, 2]),
        ("if(score > 2, 1, 0) = 1", [2, 4]),
        ("id = 300L", []),
        ("TRUE", [1, 2, 3, 4, None]),
        ("NULL", []),
    ],
)
def test_conditions_select_as_sql_does(condition: str, ids: list[Any]) -> None:
    assert where(condition) == ids


@pytest.mark.parametrize(
    ("expression", "target", "values"),
    [
        ("7", pa.int32(), [7] * 5),
        ("'2024-02-29'", pa.date32(), [dt.date(2024, 2, 29)] * 5),
        ("NULL", pa.string(), [None] * 5),
        ("1.25", pa.decimal128(10, 2), [Decimal("1.25")] * 5),
        (
            "price + 1",
            pa.decimal128(10, 2),
            [Decimal("2.50"), Decimal("10.99"), None, Decimal("-1.25"), Decimal("1.00")],
        ),
        ("score * 2", pa.float64(), [2.0, 5.0, None, 8.0, -2.0]),
        ("id * 1.5", pa.float64(), [1.5, 3.0, 4.5, 6.0, None]),
        ("upper(name)", pa.string(), ["ANN", "BOB", None, "AL", "X_Y"]),
        ("CASE WHEN flag THEN 'y' END", pa.string(), ["y", None, None, "y", None]),
        (
            "price * 1.005",
            pa.decimal128(10, 2),
            [Decimal("1.51"), Decimal("10.04"), None, Decimal("-2.26"), Decimal("0.00")],
        ),
        ("1.555", pa.decimal128(10, 2), [Decimal("1.56")] * 5),  # rounded half away from zero, as Hive does
        ("score * 1.5", pa.int32(), [1, 3, None, 6, -1]),  # truncated
        ("CAST(score AS int)", pa.int32(), [1, 2, None, 4, -1]),
        ("CAST(2.5 AS int)", pa.int32(), [2] * 5),
        ("CAST('2024-01-31' AS date)", pa.date32(), [dt.date(2024, 1, 31)] * 5),
    ],
)
def test_values_take_the_column_type(expression: str, target: pa.DataType, values: list[Any]) -> None:
    assert value(expression, target) == values


IDS = [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("expression", "target", "values"),
    [
        # Hive's / and % give NULL for a zero divisor (GenericUDFOPDivide, GenericUDFOPMod)
        ("id / 0", pa.float64(), [None] * 5),
        ("score / 0.0", pa.float64(), [None] * 5),
        ("price / 0", pa.decimal128(10, 2), [None] * 5),
        ("id % 0", pa.int32(), [None] * 5),
        ("score % 0", pa.float64(), [None] * 5),
        ("price % 0", pa.decimal128(10, 2), [None] * 5),
        ("id % (id - 2)", pa.int32(), [0, None, 0, 0, None]),
        ("-7 % id", pa.int32(), [0, -1, -1, -3, None]),  # the sign of the dividend, as Java's %
        # int op int is an int that wraps around, bigint op bigint a bigint (GenericUDFOPPlus/Multiply)
        ("id * 2147483647", pa.int32(), [java_int(i * 2147483647) for i in IDS] + [None]),
        (
            "(id + 2147483647) * 100000",
            pa.int32(),
            [java_int((i + 2147483647) * 100000) for i in IDS] + [None],
        ),
        ("0 - id - 2147483647", pa.int32(), [java_int(-i - 2147483647) for i in IDS] + [None]),
        ("-(id - 2147483647 - 2)", pa.int32(), [java_int(-java_int(i - 2147483649)) for i in IDS] + [None]),
        (
            "CAST(id AS bigint) * 9223372036854775807",
            pa.int64(),
            [java_int(i * 9223372036854775807, 64) for i in IDS] + [None],
        ),
        ("id * 3000000000", pa.int64(), [i * 3000000000 for i in IDS] + [None]),  # int * bigint: a bigint
        # a wider integer set into a narrower column keeps its low bits (Hive's UDFToByte, UDFToInteger)
        ("id + 126", pa.int8(), [java_int(i + 126, 8) for i in IDS] + [None]),
        ("CAST(id AS bigint) * 3000000000", pa.int32(), [java_int(i * 3000000000) for i in IDS] + [None]),
        # DIV truncates to a bigint; MIN DIV -1 wraps as Java's long division
        ("score DIV 2", pa.int64(), [0, 1, None, 2, 0]),
        ("(-9223372036854775807 - 1) DIV (id - id - 1)", pa.int64(), [-9223372036854775808] * 4 + [None]),
    ],
)
def test_arithmetic_is_hive_s(expression: str, target: pa.DataType, values: list[Any]) -> None:
    assert value(expression, target) == values


@pytest.mark.parametrize(
    ("condition", "message", "at"),
    [
        ("id = 'abc'", "cannot use 'abc' as a value of type int32", "'abc'"),
        ("id + name > 1", "cannot evaluate id + name", "id + name"),
        ("id IN (SELECT 1)", "a subquery is not supported", "(SELECT 1)"),
        ("foo(id) = 1", "the function FOO is not supported", "foo("),
        ("id", "expected a condition, found a value of type int32", "id"),
        ("name LIKE name", "the pattern must be a string literal", "name"),
        ("round(price, id) > 1", "the number of decimals must be an integer literal", "id)"),
        ("day = DATE 'soon'", "cannot use 'soon' as a value of type date32", "'soon'"),
        ("trim(BOTH 'x' FROM name) = ''", "TRIM of other characters than spaces", "'x'"),
    ],
)
def test_what_does_not_translate_is_reported_at_its_place(condition: str, message: str, at: str) -> None:
    with pytest.raises(SqlSyntaxError, match=re.escape(message)) as info:
        where(condition)
    assert info.value.position == len("DELETE FROM t WHERE ") + condition.rindex(at)


# --- three-valued logic against a reference evaluator --------------------------------------------------------

Value = int | None


def _compare(op: str, a: Value, b: Value) -> bool | None:
    if a is None or b is None:
        return None
    return {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a


def _in(a: Value, items: list[Value]) -> bool | None:
    if a is None:
        return None
    if a in [i for i in items if i is not None]:
        return True
    return None if None in items else False


operands = st.one_of(st.sampled_from(["a", "b"]), st.integers(-3, 3).map(str), st.just("NULL"))


def _atom(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["cmp", "in", "between", "isnull"]))
    col = draw(st.sampled_from(["a", "b"]))
    if kind == "cmp":
        return f"{col} {draw(st.sampled_from(['=', '<>', '<', '<=', '>', '>=']))} {draw(operands)}"
    if kind == "in":
        items = draw(
            st.lists(st.one_of(st.integers(-3, 3).map(str), st.just("NULL")), min_size=1, max_size=4)
        )
        return f"{col} {draw(st.sampled_from(['IN', 'NOT IN']))} ({', '.join(items)})"
    if kind == "between":
        low, high = draw(operands), draw(operands)
        return f"{col} {draw(st.sampled_from(['BETWEEN', 'NOT BETWEEN']))} {low} AND {high}"
    return f"{col} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"


@st.composite
def predicates(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.booleans()):
        return _atom(draw)
    kind = draw(st.sampled_from(["AND", "OR", "NOT"]))
    if kind == "NOT":
        return f"NOT ({draw(predicates(depth - 1))})"
    return f"({draw(predicates(depth - 1))}) {kind} ({draw(predicates(depth - 1))})"


def reference(node: exp.Expr, row: dict[str, Value]) -> Any:
    """SQL's value of ``node`` for ``row``, computed the textbook way."""
    if isinstance(node, exp.Paren):
        return reference(node.this, row)
    if isinstance(node, exp.Column):
        return row[node.name]
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return int(node.this)
    if isinstance(node, exp.Neg):
        return -reference(node.this, row)
    if isinstance(node, exp.And):
        return _and(reference(node.this, row), reference(node.expression, row))
    if isinstance(node, exp.Or):
        return _or(reference(node.this, row), reference(node.expression, row))
    if isinstance(node, exp.Not):
        return _not(reference(node.this, row))
    if isinstance(node, exp.In):
        return _in(reference(node.this, row), [reference(e, row) for e in node.expressions])
    if isinstance(node, exp.Between):
        a = reference(node.this, row)
        return _and(
            _compare(">=", a, reference(node.args["low"], row)),
            _compare("<=", a, reference(node.args["high"], row)),
        )
    if isinstance(node, exp.Is):
        return reference(node.this, row) is None
    ops = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
    return _compare(ops[type(node)], reference(node.this, row), reference(node.expression, row))


ABS = pa.table(
    {
        "a": pa.array([None, -2, 0, 1, 3, None, 2], pa.int64()),
        "b": pa.array([1, None, 0, -3, 3, None, 2], pa.int64()),
    }
)


@settings(max_examples=300, deadline=None)
@given(predicates())
def test_predicates_follow_three_valued_logic(condition: str) -> None:
    sql = f"DELETE FROM t WHERE {condition}"
    node = parse_statement(sql).args["where"].this
    translator = Translator(sql, lambda c: (c.name, pa.int64()))
    table = ABS.append_column("row", pa.array(range(ABS.num_rows)))
    got = ds.dataset(table).to_table(filter=translator.predicate(node)).column("row").to_pylist()
    expected = [i for i, row in enumerate(ABS.to_pylist()) if reference(node, row) is True]
    assert got == expected, condition
