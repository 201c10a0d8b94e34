"""A correlation through ``IS NOT DISTINCT FROM`` (Spark's ``<=>``) as an equality of one-field structs.

sqlglot decorrelates a subquery correlated by equalities alone, so ``EXISTS (SELECT 1 FROM u WHERE u.k <=> t.k)``
-- also Spark's ``t LEFT SEMI JOIN u ON u.k <=> t.k``, which ``passes/semi_joins.py`` reads as that EXISTS -- was
refused. A top-level conjunct of a correlated subquery's WHERE that compares an expression of the subquery's own
columns with one of the outer query's alone is written here::

    u.k <=> t.k   ->   {'v': u.k} = {'v': t.k}          (Spark: named_struct('v', u.k) = named_struct('v', t.k))

Valid (the same truth value for every pair of values) because both engines compare structs field by field with
NULL equal to NULL: ``{'v': NULL} = {'v': NULL}`` is TRUE, ``{'v': 1} = {'v': NULL}`` FALSE, and a struct is never
NULL, so the equality is never NULL either, as ``<=>`` is not. Decorrelation then groups the subquery by the struct,
whose groups are ``<=>``'s: the NULL key is one group, matched by a NULL outer value. Taken only where both sides have
one type (Spark compares no structs of two types, where ``<=>`` casts), and it is one whose equal values are identical:
integers, decimals (as columns on both sides: sqlglot and Spark type ``d + 0`` otherwise), dates, timestamps (with
a time zone too: one instant), booleans, and strings where no collation applies (a collated struct field need not
compare as the collated string does); elsewhere the correlation stays as written and is refused by name.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.engines.lineage_sql import NAMED_STRUCT
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import outer_columns
from dltrace.rewriter.passes.key_types import IDENTICAL_WHEN_GROUPED, STRINGS, typed_twins
from dltrace.rewriter.shape import conjuncts

FIELD = "v"  # the one field of the structs compared
T = exp.DataType.Type
DECIMALS = frozenset({T.DECIMAL, T.DECIMAL32, T.DECIMAL64, T.DECIMAL128, T.DECIMAL256, T.BIGDECIMAL, T.UDECIMAL})
INSTANTS = frozenset({T.TIMESTAMPTZ, T.TIMESTAMPLTZ})  # (Spark's TIMESTAMP: one instant, equal only to itself)


def null_safe_keys(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if expression.find(exp.NullSafeEQ) is None or context.schema is None:
        return expression
    tree = exp.maybe_copy(expression, copy)
    found = []
    for select in tree.find_all(exp.Select):
        outer = {id(c) for c in outer_columns(select)}
        if not outer:
            continue
        for conjunct in conjuncts(select.args.get("where")):
            if isinstance(conjunct, exp.NullSafeEQ) and _one_side_each(conjunct, outer):
                found.append(conjunct)
    if not found:
        return tree
    twins = typed_twins(tree, context.schema, context.dialect)
    if twins is None:
        return tree
    for comparison in found:
        left, right = (twins[id(side)].type for side in (comparison.this, comparison.expression))
        if not _one_type(left, right, comparison, context.collations or tree.find(exp.Collate) is not None):
            continue
        sides = [comparison.this, comparison.expression]
        if left != right:  # (two names of the string type: one name, for the structs' types to be one)
            sides = [exp.cast(side.copy(), exp.DataType.build("VARCHAR")) for side in sides]
        comparison.replace(exp.EQ(this=_struct(sides[0]), expression=_struct(sides[1])))
    return tree


def _one_type(left: exp.DataType | None, right: exp.DataType | None, comparison: exp.NullSafeEQ,
              collations: bool) -> bool:
    """Do both sides have one type, whose equal values are identical? Strings are one type (sqlglot types Spark's
    STRING column TEXT and lower() of it VARCHAR), where no collation may apply; a DECIMAL only as a column on both
    sides (sqlglot keeps DECIMAL(10,2) for `d + 0`, which Spark widens to DECIMAL(11,2), and Spark compares no two
    structs of two decimal types)."""
    if left is None or right is None:
        return False
    if left.this in STRINGS and right.this in STRINGS:
        return not collations
    if left != right:
        return False
    if left.this in DECIMALS:
        return isinstance(comparison.this, exp.Column) and isinstance(comparison.expression, exp.Column)
    return left.this in IDENTICAL_WHEN_GROUPED or left.this in INSTANTS


def _one_side_each(comparison: exp.NullSafeEQ, outer: set[int]) -> bool:
    """Does one side read the subquery's own columns alone, and the other the outer query's alone?"""
    sides = []
    for side in (comparison.this, comparison.expression):
        columns = list(side.find_all(exp.Column))
        if not columns or side.find(exp.Query, exp.AggFunc, exp.Window) is not None:
            return False
        reads_outer = [id(c) in outer for c in columns]
        if any(reads_outer) and not all(reads_outer):
            return False
        sides.append(all(reads_outer))
    return sides[0] != sides[1]


def _struct(value: exp.Expression) -> exp.Struct:
    struct = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier(FIELD, quoted=True),
                                                    expression=value.copy())])
    struct.meta[NAMED_STRUCT] = True  # (Spark: NAMED_STRUCT, never unpacked)
    return struct
