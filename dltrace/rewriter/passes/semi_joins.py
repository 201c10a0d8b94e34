"""``FROM t [LEFT] SEMI JOIN u ON c`` -> ``FROM t WHERE EXISTS (SELECT 1 FROM u WHERE c)``; ANTI -> NOT EXISTS.

A semi join keeps each row of its left side for which some row of ``u`` makes ``c`` TRUE, and shows the left
side's columns only; an anti join keeps the others (a NULL comparison matches nothing, as in NOT EXISTS, not
NOT IN). That is what ``[NOT] EXISTS (SELECT 1 FROM u WHERE c)`` keeps, and the lineage rules know EXISTS: a
kept row's witnesses are the rows of ``u`` that match it (none for an anti join). DuckDB writes ``SEMI JOIN`` /
``ANTI JOIN``, Spark ``LEFT SEMI JOIN`` / ``LEFT ANTI JOIN``.

Valid where moving the test from the join to the WHERE keeps the rows: the joins after it are inner, cross or
LEFT joins (a filter on the left side's columns commutes with them; a RIGHT or FULL join after it would pad rows
the filter removed, and is refused). ``USING (k)`` is ``u.k = <left>.k`` when the left side is one named
relation; NATURAL, and USING after several relations, are refused. Applied before qualification: an
unqualified name in the condition resolves in the subquery's scope, a column of ``u`` or else the left side's,
as in the join (where a name both sides have is ambiguous).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext

KINDS = ("SEMI", "ANTI")


def semi_joins(expression: exp.Expression, context: PassContext | None = None,
               copy: bool = True) -> exp.Expression:
    if not any(_is_semi(j) for j in expression.find_all(exp.Join)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    # innermost first: a semi join inside another's right side is rewritten before that side moves
    for select in reversed(list(tree.find_all(exp.Select))):
        joins = select.args.get("joins") or []
        if not any(_is_semi(j) for j in joins):
            continue
        tests = []
        for i, join in enumerate(joins):
            if not _is_semi(join):
                continue
            later = [j for j in joins[i + 1:] if (j.side or "").upper() in ("RIGHT", "FULL")]
            if later:
                raise UnsupportedQuery(f"a {later[0].side.upper()} JOIN after a {join.args['kind']} JOIN is not "
                                       f"supported, at {position(later[0])}")
            tests.append(_as_exists(select, joins[:i], join))
        kept = [j for j in joins if not _is_semi(j)]
        select.set("joins", kept or None)
        where = select.args.get("where")
        conditions = ([where.this] if where is not None else []) + tests
        select.set("where", exp.Where(this=exp.and_(*conditions, copy=False)))
    return tree


def _is_semi(join: exp.Join) -> bool:
    return (join.args.get("kind") or "").upper() in KINDS


def _as_exists(select: exp.Select, before: list[exp.Join], join: exp.Join) -> exp.Expression:
    kind = join.args["kind"].upper()
    if join.args.get("method") or (join.side or "").upper() not in ("", "LEFT"):
        raise UnsupportedQuery(f"{join.args.get('method') or join.side} {kind} JOIN is not supported, at "
                               f"{position(join)}")
    condition = join.args.get("on")
    using = join.args.get("using")
    if using:
        left = select.args["from_"].this
        if before or not left.alias_or_name:
            raise UnsupportedQuery(f"{kind} JOIN ... USING after several relations is not supported (write ON), "
                                   f"at {position(join)}")
        right = join.this.alias_or_name
        condition = exp.and_(*[exp.EQ(this=exp.column(k.name, right, quoted=k.quoted),
                                      expression=exp.column(k.name, left.alias_or_name, quoted=k.quoted))
                               for k in using], copy=False)
    if condition is None:
        raise UnsupportedQuery(f"a {kind} JOIN needs an ON or USING condition, at {position(join)}")
    body = exp.select(exp.Literal.number(1)).from_(join.this.pop(), copy=False).where(condition.pop(), copy=False)
    exists = exp.Exists(this=body)
    return exp.Not(this=exists) if kind == "ANTI" else exists
