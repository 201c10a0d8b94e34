"""INTERSECT ALL / EXCEPT ALL over a column whose equal values need not be identical are refused.

The lineage rule (rules/setops.py) groups both sides by every output column and repeats each group's row ``min(l,
r)`` / ``l - r`` times, so every copy shows the one value the group is shown by. The engine keeps each row's own
value: over a DOUBLE, ``0.0`` and ``-0.0`` are one group and the engine gives ``0.0, -0.0`` where the copies would
be ``0.0, 0.0``; under a collation, ``'A'`` and ``'a'`` likewise (found by a review). A distinct INTERSECT / EXCEPT
shows one row per group, either value, as the engine does. So each output column of a bag operation must be of a
type whose equal values are identical (``key_types.IDENTICAL_WHEN_GROUPED``, strings where no collation applies),
as sqlglot types both sides over the schema; a type it cannot tell is refused too. Applied after qualification.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.key_types import IDENTICAL_WHEN_GROUPED, STRINGS, strings_identical, typed_twins


def bag_setops(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    bags = [s for s in expression.find_all(exp.Intersect, exp.Except) if s.args.get("distinct") is False]
    if not bags:
        return expression
    twins = typed_twins(expression, context.schema, context.dialect) if context.schema is not None else None
    identical = IDENTICAL_WHEN_GROUPED | (STRINGS if strings_identical(expression, context.collations) else set())
    for bag in bags:
        op = "INTERSECT ALL" if isinstance(bag, exp.Intersect) else "EXCEPT ALL"
        for side in (bag.this, bag.expression):
            select = _first_select(side)
            typed = twins.get(id(select)) if twins is not None and select is not None else None
            for j, item in enumerate(select.expressions if select is not None else []):
                kind = typed.expressions[j].type if typed is not None and j < len(typed.expressions) else None
                if kind is None or kind.this not in identical or kind.args.get("collate"):
                    what = kind.sql(context.dialect) if kind is not None and kind.this != exp.DataType.Type.UNKNOWN \
                        else "a type dltrace cannot tell"
                    raise UnsupportedQuery(
                        f"{op} over column {item.alias_or_name or j + 1} of {what} is not supported: its equal "
                        f"values need not be identical (0.0 and -0.0, 'A' and 'a' under a collation), and each copy "
                        f"would show one of them where the engine shows each row's own (cast it to an exact type, "
                        f"or use {op.split()[0]} without ALL), at {position(bag)}")
    return expression


def _first_select(query: exp.Expression) -> exp.Select | None:
    """The SELECT that names a set operation's (or a parenthesised query's) columns: its leftmost."""
    while isinstance(query, (exp.Subquery, exp.SetOperation)):
        query = query.this
    return query if isinstance(query, exp.Select) else None
