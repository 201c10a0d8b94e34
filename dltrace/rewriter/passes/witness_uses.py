"""Mark when each decorrelated subquery's rows are witnesses of its SELECT's rows (witness semantics).

An analysis pass (:data:`dltrace.rewriter.analysis.ANALYSIS_PASSES`), run after decorrelation and before the
witnesses are translated, while every use of a decorrelated subquery still reads as ``x IS NULL`` / ARRAY_ANY
or as its value. Witness semantics gives a subquery's rows to a row only where they made a predicate TRUE:

- an existence test (an EXISTS, an IN) used positively somewhere: always; used only under a negation: never;
- the user's EXISTS read as a count of its rows (an EXISTS over an aggregate): by the EXISTS's polarity;
- a scalar's value: always when used as a value, or compared in a top-level conjunct of WHERE / ON / HAVING
  (TRUE for every row that passes); else where one of its positive comparisons is TRUE, evaluated per input row.

Both directions read the marks through :func:`dltrace.rewriter.analysis.contributes` and
:func:`~dltrace.rewriter.analysis.witness_condition`.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.decorrelatable import EXISTS_COUNT, SPLIT_VALUE
from dltrace.rewriter.passes.decorrelate import DECORRELATED, SCALAR_VALUE, ZERO_FILL, has_decorrelated
from dltrace.rewriter.passes.scalar_lookups import GUARD
from dltrace.rewriter.shape import negated

CLAUSES = ("expressions", "where", "having", "qualify")  # where a SELECT's subqueries can be written
USED_POSITIVELY = "dl_used_positively"  # meta key of a decorrelated subquery: some use of it is not negated
WITNESS_CONDITION = "dl_witness_condition"  # meta key: when its rows are witnesses (see witness_condition)


def mark_witness_uses(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    """Record on every decorrelated subquery when its rows are witnesses of its SELECT's rows (before witnesses
    are translated, while its uses still read as ``x IS NULL`` / ARRAY_ANY): ``meta[USED_POSITIVELY]``, and
    ``meta[WITNESS_CONDITION]`` (see :func:`dltrace.rewriter.analysis.witness_condition`)."""
    if not has_decorrelated(expression):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for sub in tree.find_all(exp.Subquery):
        if sub.meta.get(DECORRELATED):
            select = sub.find_ancestor(exp.Select)
            refs = _uses(select, sub)
            if sub.this.meta.get(EXISTS_COUNT):  # the user's EXISTS, tested as `COALESCE(count, 0) IS NULL`
                positive = any(not negated(value_use(r), select) for r in refs)
                condition = None if positive else exp.false()
            elif not sub.this.meta.get(SCALAR_VALUE) and any(_is_existence_test(ref) for ref in refs):
                positive = any(not _is_existence_test(r) or not negated(r, select) for r in refs)
                condition = None if positive else exp.false()
            else:  # a scalar subquery's value
                condition = value_condition([value_use(r) for r in refs], select, sub.alias_or_name)
            sub.meta[WITNESS_CONDITION] = condition
            sub.meta[USED_POSITIVELY] = not never(condition)
    return tree


def value_use(ref: exp.Expression) -> exp.Expression:
    """The node a scalar subquery's value is used as (through sqlglot's MAX() wrapper, its COALESCE(_, 0) of a
    COUNT, a lookup's guard, and parentheses; a piece
    of a split subquery: the split's expression, where the user's subquery was)."""
    node = ref
    split = ref.parent
    while split is not None and not isinstance(split, exp.Select):
        if split.meta.get(SPLIT_VALUE):
            node = split
            break
        split = split.parent
    while isinstance(node.parent, (exp.Max, exp.Paren)) or (
            isinstance(node.parent, exp.Coalesce) and node.parent.meta.get(ZERO_FILL) and node.arg_key == "this") or (
            isinstance(node.parent, exp.Case) and node.parent.meta.get(GUARD) and node.arg_key == "default"):
        node = node.parent
    return node


def value_condition(uses: list[exp.Expression], select: exp.Select, alias: str) -> exp.Expression | None:
    """When a scalar subquery's rows are witnesses: always (None) if it is used as a value, or compared in a
    top-level conjunct of WHERE / ON / HAVING (TRUE for every row that passes); else when one of its positive
    comparisons is TRUE; never (FALSE) when every comparison is negated."""
    conditions = []
    for use in uses:
        comparison = use.parent
        if not (isinstance(comparison, exp.Binary) and comparison.key in _COMPARISON_KEYS):
            return None  # a value: its rows made it
        if negated(comparison, select):
            continue
        if _top_level_conjunct(comparison):
            return None
        per_row = _per_row_value(use, alias)
        use.replace(per_row)
        condition = comparison.copy()
        per_row.replace(use)
        if any(a.find_ancestor(exp.Select) is None for a in condition.find_all(exp.AggFunc)):  # (a subquery's
            # own aggregates are its rows')
            raise UnsupportedQuery(f"a scalar subquery compared with an aggregate outside a top-level HAVING "
                                   f"conjunct is not supported, at {position(comparison)}")
        conditions.append(exp.func("coalesce", condition, exp.false()))
    return exp.or_(*conditions) if conditions else exp.false()


def _per_row_value(use: exp.Expression, alias: str) -> exp.Expression:
    """A copy of a subquery's value as read per input row: without the MAX() a grouped SELECT reads its joined
    column ``alias.c`` through (sqlglot's, or :func:`decorrelatable.read_group_constants_per_row`'s). The value is
    the same for every input row of a group (it reads only the group's keys), so a comparison of it holds for each
    input row exactly when it holds for the group, and the witness condition is evaluated on input rows. Only
    such wrappers go: a MAX of the query's own (inside a split value's pieces, ``(SELECT max(c) FROM u)``) stays."""
    value = use.copy()
    for wrapper in list(value.find_all(exp.Max)):
        if wrapper.find_ancestor(exp.Select) is not None or not isinstance(
                wrapper.this.unnest(), (exp.Column, exp.Coalesce)) or not any(
                c.table == alias for c in wrapper.this.find_all(exp.Column)):
            continue
        if wrapper is value:
            value = wrapper.this
        else:
            wrapper.replace(wrapper.this)
    return value


_COMPARISON_KEYS = ("eq", "neq", "gt", "gte", "lt", "lte", "nullsafeeq")


def _top_level_conjunct(node: exp.Expression) -> bool:
    """Is ``node`` ANDed into WHERE, HAVING or an inner join's ON (TRUE for every row that gets past it)?"""
    child, parent = node, node.parent
    while isinstance(parent, (exp.And, exp.Paren)):
        child, parent = parent, parent.parent
    if isinstance(parent, (exp.Where, exp.Having)):
        # an aggregate's FILTER (WHERE ...) drops a row from that aggregate only: the row stays in its group
        return not isinstance(parent.parent, exp.Filter)
    return isinstance(parent, exp.Join) and child.arg_key == "on" and not parent.side \
        and (parent.kind or "").upper() in ("", "INNER", "CROSS")


def never(condition: exp.Expression | None) -> bool:
    return isinstance(condition, exp.Boolean) and not condition.this


def _uses(select: exp.Select, sub: exp.Subquery) -> list[exp.Column]:
    """The columns of ``select`` that read the decorrelated subquery ``sub``: in its clauses and in the ON of
    its joins (a correlated EXISTS in an inner join's ON stays there as its test). A use in the ON of an outer
    join (or of a join followed by a RIGHT/FULL join) is refused, as for a subquery left in place there."""
    alias = sub.alias_or_name
    refs = []
    for key in CLAUSES:
        value = select.args.get(key)
        for node in value if isinstance(value, list) else [value]:
            if node is not None:
                refs += [c for c in node.find_all(exp.Column) if c.table == alias and not _in_guard_test(c)]
    joins = select.args.get("joins") or []
    for i, join in enumerate(joins):
        on = join.args.get("on")
        if on is None or join.this is sub:
            continue  # (the decorrelated join's own ON is its correlation)
        found = [c for c in on.find_all(exp.Column) if c.table == alias]
        if found and outer_on(joins, i):
            raise UnsupportedQuery(f"a subquery in the ON clause of an outer join (or of a join followed by a "
                                   f"RIGHT/FULL join) is not supported, at {position(join)}")
        refs += found
    return refs


def _in_guard_test(column: exp.Column) -> bool:
    """Is ``column`` read by the test of a lookup's guard (``CASE WHEN <join condition> AND _u._dl_rows > 1 THEN
    error(...) ...``, :mod:`dltrace.rewriter.passes.scalar_lookups`)? That test raises or passes; it is no use of
    the subquery's value, whose witnesses are decided where the guard is read."""
    child, parent = column, column.parent
    while parent is not None and not isinstance(parent, exp.Select):
        if isinstance(parent, exp.Case) and parent.meta.get(GUARD) and child.arg_key == "ifs":
            return True
        child, parent = parent, parent.parent
    return False


def _is_existence_test(ref: exp.Column) -> bool:
    parent = ref.parent
    if isinstance(parent, exp.Is) and isinstance(parent.expression, exp.Null):
        return True
    return isinstance(parent, exp.ArrayAny)


def outer_on(joins: list[exp.Join], i: int) -> bool:
    """Is the ON of ``joins[i]`` an outer join's, or followed by a RIGHT/FULL join (which pads its rows)?"""
    join = joins[i]
    outer = join.side or (join.kind or "").upper() not in ("", "INNER", "CROSS")
    return bool(outer) or any(j.side in ("RIGHT", "FULL") for j in joins[i + 1:])
