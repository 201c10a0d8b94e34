"""IN / ANY / ALL over a subquery compared in the type the engine compares them in, before any rewrite writes them
as comparisons.

DuckDB binds ``x IN (SELECT e ...)`` (and ``x op ANY|ALL (SELECT e ...)``) by casting both sides to their common
supertype, and ``x = e`` by its comparison rule. The two agree but for DECIMALs whose integer digits and scale
together pass 38: the common supertype keeps the integer digits and drops scale, the comparison keeps the scale.
``DECIMAL(18,4) 1.5 IN (SELECT DECIMAL(38,0) 2)`` is TRUE (both cast to ``DECIMAL(38,0)``: 2 = 2) where
``1.5 = 2`` is not. Every rewrite that reads an IN as a comparison -- sqlglot's decorrelation joins on ``x = _u.e``,
the witnesses of an IN kept in place are the rows with ``x = e``, a correlated ANY / ALL becomes an [NOT] EXISTS of
a comparison -- would then drop rows the engine keeps (found by a probe: ``d IN (SELECT sum(x) ...)`` gave no row).

This pass runs before them, on an engine that says so (``LineageFunctions.quantified_common_type``). For each IN /
ANY / ALL over a SELECT it decides from the two sides' types:

- a side whose type dltrace knows exactly: a column of a base table (the schema's type), or a CAST;
- ``max``, ``min``, ``any_value``, ``first``, ``last`` of a known side have its type, ``sum`` a DECIMAL(38, s) of a
  DECIMAL(p, s), a HUGEINT of integers (DuckDB's);
- a side it does not (an expression, a column of a derived table: sqlglot's types do not follow DuckDB's DECIMAL
  arithmetic) is an integer of unknown width where sqlglot reads an integer (no scale either way), else a number
  of unknown digits whose scale is at most the sum of the scales of every DECIMAL the query reads or writes (a
  product adds its factors' scales; a sum, an addition, a rounding keep the largest; a division gives a DOUBLE);
- a side of another type (a string, a date, a DOUBLE column) compares alike either way.

Where the common supertype cannot drop scale, nothing changes. Where both types are known and it does, both sides
are cast to it (``CAST(x AS DECIMAL(38,0)) IN (SELECT CAST(e AS DECIMAL(38,0)) ...)``), which is what the engine
compares, so every later rewrite compares as the engine does. Where a side's digits are unknown and it may, the
query is refused, naming the IN: cast both sides to one type.

Valid with a schema; without one (``dltrace.rewrite`` given none) nothing is known and nothing is changed: an IN
over DECIMALs whose digits together pass 38 may then be compared otherwise than the engine does.
"""

from __future__ import annotations

import re

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.key_types import typed_twins

T = exp.DataType.Type
MAX_DIGITS = 38  # DuckDB's widest DECIMAL
# integer types as the DECIMAL(width, 0) the engine reads them as (DuckDB's GetDecimalProperties)
INTEGER_DIGITS = {T.TINYINT: 3, T.UTINYINT: 3, T.SMALLINT: 5, T.USMALLINT: 5, T.INT: 10, T.UINT: 10, T.BIGINT: 19,
                  T.UBIGINT: 20, T.INT128: 38}
DECIMALS = frozenset({T.DECIMAL, T.DECIMAL32, T.DECIMAL64, T.DECIMAL128, T.DECIMAL256, T.BIGDECIMAL, T.UDECIMAL})
NUMBERS = DECIMALS | frozenset(INTEGER_DIGITS) | {T.UINT128, T.INT256, T.UINT256, T.UNKNOWN}
DEFAULT_DECIMAL = (18, 3)  # DuckDB's DECIMAL without a width


def quantified_types(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not context.fns.quantified_common_type or context.schema is None:
        return expression
    if not any(_over_a_select(h) for h in expression.find_all(exp.In, exp.Any, exp.All)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    twins = typed_twins(tree, context.schema, context.dialect)
    if twins is None:
        return tree  # (no types: as without a schema)
    twin = twins[id(tree)]
    scale_bound = _scale_bound(twin)
    ctes = {cte.alias_or_name.lower() for cte in twin.find_all(exp.CTE)}
    tables = {name.lower() for name in context.schema}
    for holder in list(tree.find_all(exp.In, exp.Any, exp.All)):
        if not _over_a_select(holder):
            continue
        typed = twins[id(holder)]
        written, read = _sides(holder), _sides(typed)
        if written is None or read is None:
            continue
        common = _common_type(*(_digits(node, ctes, tables) for node in read), scale_bound)
        if common is False:
            raise UnsupportedQuery(
                f"{_name(holder)} over a subquery comparing numbers whose DECIMAL digits dltrace cannot tell (the "
                f"engine compares both sides in their common type, which may round a DECIMAL), at "
                f"{position(holder)}: cast both sides to one type")
        if common is not None:
            for node in written:
                node.replace(exp.cast(node.copy(), common))
    return tree


def _over_a_select(holder: exp.Expression) -> bool:
    query = holder.args.get("query") if isinstance(holder, exp.In) else holder.this
    query = query.this if isinstance(query, exp.Subquery) else query
    return isinstance(query, exp.Select) and len(query.expressions) == 1 and (
        isinstance(holder, exp.In) or isinstance(holder.parent, exp.Binary))


def _sides(holder: exp.Expression) -> tuple[exp.Expression, exp.Expression] | None:
    """The compared operand and the subquery's one item (its alias's value)."""
    if isinstance(holder, exp.In):
        operand, query = holder.this, holder.args["query"]
    elif holder.parent.args.get("expression") is holder:
        operand, query = holder.parent.this, holder.this
    else:
        return None
    query = query.this if isinstance(query, exp.Subquery) else query
    item = query.expressions[0]
    return operand, item.this if isinstance(item, exp.Alias) else item


def _name(holder: exp.Expression) -> str:
    return "IN" if isinstance(holder, exp.In) else type(holder).__name__.upper()


def _digits(node: exp.Expression, ctes: set[str], tables: set[str]) -> tuple[int, int] | str | None:
    """(integer digits, scale) of a side whose type is known exactly; "integer" for an integer of unknown width,
    "number" for a number of unknown digits; None for another type (compared alike by both rules)."""
    typed = node.unnest()
    data_type = typed.type if isinstance(typed.type, exp.DataType) else None
    kind = data_type.this if data_type is not None else T.UNKNOWN
    if kind not in NUMBERS:
        return None
    if isinstance(typed, (exp.Max, exp.Min, exp.AnyValue, exp.First, exp.Last)) and typed.this is not None:
        return _digits(typed.this, ctes, tables)  # (the engine's type of its argument)
    if isinstance(typed, exp.Sum) and not isinstance(typed.this, exp.Distinct):
        summed = _digits(typed.this, ctes, tables)  # DuckDB: a DECIMAL(p, s) sums to a DECIMAL(38, s), integers
        if isinstance(summed, tuple):                # to a HUGEINT
            return MAX_DIGITS - summed[1], summed[1]
        return summed if summed is None else "number"
    known = isinstance(typed, exp.Cast) or (isinstance(typed, exp.Column) and _base_column(typed, ctes, tables))
    if not known or kind not in DECIMALS and kind not in INTEGER_DIGITS:
        # an integer in sqlglot's reading may be another integer in the engine's (a sum is a HUGEINT), never a
        # DECIMAL with a scale
        return "integer" if kind in INTEGER_DIGITS else "number"
    if kind in INTEGER_DIGITS:
        return INTEGER_DIGITS[kind], 0
    params = [p.this for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
    try:
        width, scale = (int(params[0].name), int(params[1].name)) if len(params) == 2 else \
            (int(params[0].name), 0) if params else DEFAULT_DECIMAL
    except (ValueError, AttributeError):
        return "number"
    return width - scale, scale


def _base_column(column: exp.Column, ctes: set[str], tables: set[str]) -> bool:
    """Does ``column`` read a base table's column (whose type is the schema's), not a derived table's or a CTE's?"""
    select = column.find_ancestor(exp.Select)
    while select is not None:
        for source in [select.args.get("from_"), *(select.args.get("joins") or [])]:
            table = source.this if source is not None else None
            if isinstance(table, exp.Table) and table.alias_or_name == column.table:
                return table.name.lower() in tables and table.name.lower() not in ctes
            if table is not None and table.alias_or_name == column.table:
                return False
        select = select.find_ancestor(exp.Select)  # a correlated column: the outer query's source
    return False


def _common_type(left, right, scale_bound: int) -> exp.DataType | None | bool:
    """None: both rules compare alike; a type: cast both sides to it; False: they may not, and the digits are
    not known."""
    if left is None or right is None:
        return None
    if all(side == "integer" or isinstance(side, tuple) and side[1] == 0 for side in (left, right)):
        return None  # integers of at most 38 digits, no scale: the common type holds both
    left, right = (("integer" if side == "integer" else side) for side in (left, right))
    if isinstance(left, tuple) and isinstance(right, tuple):
        digits, scale = max(left[0], right[0]), max(left[1], right[1])
        if digits + scale <= MAX_DIGITS:
            return None
        return exp.DataType.build(f"DECIMAL({MAX_DIGITS}, {max(MAX_DIGITS - digits, 0)})")
    if isinstance(left, str) and isinstance(right, str):
        return False if scale_bound > 0 else None  # (two numbers of no scale: integers, compared alike)
    digits, scale = left if isinstance(left, tuple) else right
    unknown = right if isinstance(left, tuple) else left
    if unknown == "integer":  # up to 38 integer digits, no scale: the known side's scale may be dropped
        return False if scale > 0 else None
    # the unknown side: any integer digits, a scale of at most scale_bound. The common type drops scale when the
    # known side has some (the unknown one may have 38 integer digits) or their digits may pass 38 together
    return False if scale > 0 or digits + scale_bound > MAX_DIGITS else None


def _scale_bound(twin: exp.Expression) -> int:
    """The sum of the scales of every DECIMAL the query reads or writes: no expression of it has a larger one."""
    total = 0
    for node in twin.walk():
        if isinstance(node, exp.Literal) and node.is_number and "." in node.name:
            total += len(re.sub(r"[eE].*$", "", node.name).split(".")[1])
        elif isinstance(node, (exp.Column, exp.Cast)) and isinstance(node.type, exp.DataType) \
                and node.type.this in DECIMALS:
            params = [p.this for p in node.type.expressions if isinstance(p, exp.DataTypeParam)]
            try:
                total += int(params[1].name) if len(params) == 2 else 0 if params else DEFAULT_DECIMAL[1]
            except (ValueError, AttributeError):
                total += MAX_DIGITS
    return total
