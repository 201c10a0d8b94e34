"""A row value tested against a subquery as a filter -- ``(a, b) IN (SELECT x, y ...)``, ``(a, b) = ANY (...)`` --
is read as an EXISTS of a matching row.

The common case is "the latest version of each key": ``WHERE (t.id, t.ts) IN (SELECT id, max(ts) FROM t GROUP BY
id)``. It was refused: the lineage rules compare one value with one column.

SQL compares two rows element by element, the comparisons AND-ed (three-valued: a NULL one and no FALSE one give
NULL), and IN is TRUE when some row of the subquery compares TRUE; both engines do so. As a positive filter --
reached from a WHERE through AND, OR and parentheses alone (``correlation.positive_filter``) -- NULL and FALSE both
drop the row, so the IN keeps the rows that::

    EXISTS (SELECT 1 FROM (S) AS _dl_in1 WHERE _dl_in1.x = a AND _dl_in1.y = b)

keeps, and the EXISTS's witnesses are the IN's: the rows of S that compare TRUE (docs/design.md, "Semantics"). An S
of plain rows of its FROM with columns as its items (correlated or not) is written with the comparisons in its own
WHERE instead::

    EXISTS (SELECT 1 FROM u WHERE <S's WHERE> AND u.x = a AND u.y = b)

the same rows of ``u``, tested alike: the items are columns (nothing moved into the WHERE can raise an error of its
own for a row S's WHERE drops), and the row's values hold no subquery and name no table S names (which would bind
them there). That is the form decorrelation takes for a correlated S, which it does not read from inside a derived
table (DuckDB 2.0 itself refuses a correlated row IN, "not yet supported"; Spark runs it).

A negated one (``(a, b) NOT IN (S)``, ``NOT (... = ANY ...)``, ``... IS NULL``: ``shape.negated``) is left as written
under witness semantics, wherever it stands: a negated subquery gives no witnesses, and the engine evaluates it.

Refused, naming the row: a row holding a random draw (the EXISTS would draw it once per row of S), or reading an
enclosing query's column (it would be read two levels down); one in a join's ON (an EXISTS there is not
decorrelated), in a comparison, a CASE, the SELECT list or HAVING (the IN's NULL is not FALSE there); S
holding a LIMIT or OFFSET (sqlglot decorrelates no EXISTS holding one); under control semantics (the
control lineage of an uncorrelated IN is all of S, the EXISTS's only S's rows matching the outer row); a row
compared otherwise than by IN / ``= ANY`` (``= ALL``, ``<> ANY``, ``=`` to a scalar subquery); a subquery of
another number of columns than the row, or with a ``*`` left unexpanded; in the derived table's form, one whose
output names repeat; and (by decorrelation) a correlated S other than plain rows with columns as items. Applied
after qualification: the row's columns are named by their tables, the subquery's by its own.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import compared_with_a_subquery, position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import COMPARISONS, plain_filter_rows
from dltrace.rewriter.passes.decorrelatable import WRITTEN_AS
from dltrace.rewriter.shape import conjuncts, from_items, negated, random_call

ALIAS = "_dl_in"  # alias prefix of the derived table of an uncorrelated subquery (numbered: one per row rewritten)


def row_in_subqueries(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(compared_with_a_subquery(t) for t in expression.find_all(exp.Tuple)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    # innermost first: a row test inside another's subquery is rewritten before that subquery is copied
    rows = [t for t in tree.find_all(exp.Tuple)
            if compared_with_a_subquery(t) and not _evaluated_as_written(t, context)]
    for n, row in enumerate(reversed(rows), 1):
        holder = row.parent
        exists = exp.Exists(this=_matching_rows(row, holder, n, context))
        written = holder.copy()  # (what a refusal names: the user's subquery, under its IN or = ANY)
        exists.meta[WRITTEN_AS] = written.args["query"] if isinstance(written, exp.In) else written.expression.this
        holder.replace(exists)
    return tree


def _matching_rows(row: exp.Tuple, holder: exp.Expression, n: int, context: PassContext) -> exp.Select:
    """The EXISTS's query (the module docstring), or UnsupportedQuery naming why the row test is not read."""
    written = f"a row value ({', '.join(e.sql() for e in row.expressions)}) compared with a subquery"
    if isinstance(holder, exp.In):
        sub = holder.args["query"]
    elif isinstance(holder, exp.EQ) and isinstance(holder.expression, exp.Any):
        sub = holder.expression.this
    else:
        raise UnsupportedQuery(f"{written} is supported by IN or = ANY only (not {_operator(holder)}), at "
                               f"{position(row)}")
    if context.control:
        raise UnsupportedQuery(f"{written} is not supported under control semantics (its control lineage is the "
                               f"whole subquery, which no rewrite keeps), at {position(row)}")
    if not isinstance(filter_clause(holder), exp.Where):  # (a positive filter of a WHERE: correlation.positive_filter)
        raise UnsupportedQuery(f"{written} is supported only as a filter in a WHERE, through AND, OR and "
                               f"parentheses (not in a join's ON, in a CASE, a comparison, the SELECT list or "
                               f"HAVING; a negated one, NOT IN, runs anywhere), at {position(row)}")
    owner = holder.find_ancestor(exp.Select)
    own = {item.alias_or_name.lower() for item in from_items(owner)} if owner is not None else set()
    if any(c.table and c.table.lower() not in own for c in row.find_all(exp.Column)):
        # (the row would be read inside the subquery's EXISTS, two levels below the query it reads: refused there as
        # "correlated two levels up", which the user did not write)
        raise UnsupportedQuery(f"{written}, reading a column of an enclosing query, is not supported, at "
                               f"{position(row)}")
    if (call := random_call(row)) is not None:
        raise UnsupportedQuery(f"{written}, holding a random draw ({call.sql()}), is not supported (it would be "
                               f"drawn once per row of the subquery), at {position(row)}")
    query = sub.this if isinstance(sub, exp.Subquery) else sub
    if query.find(exp.Limit, exp.Offset, exp.Fetch) is not None:
        # (sqlglot decorrelates no EXISTS holding a LIMIT, also inside its derived table)
        raise UnsupportedQuery(f"{written} is not supported over a subquery with LIMIT or OFFSET, at "
                               f"{position(row)}")
    items = _items(query)
    if any(isinstance(i.unalias(), exp.Star) or isinstance(i.unalias(), exp.Column)
           and isinstance(i.unalias().this, exp.Star) for i in items):
        raise UnsupportedQuery(f"{written} is supported over a subquery whose columns are listed (not `*`), at "
                               f"{position(row)}")
    if len(items) != len(row.expressions):
        raise UnsupportedQuery(f"{written} of {len(items)} column{'s' if len(items) != 1 else ''}: the row has "
                               f"{len(row.expressions)} values, at {position(row)}")
    if not plain_rows(query) or not movable(row, query):
        names = query.named_selects
        if not all(names) or len({name.lower() for name in names}) != len(names):
            raise UnsupportedQuery(f"{written} is supported over a subquery whose columns have distinct names, at "
                                   f"{position(row)}")
        # (a correlated one is then read from inside the derived table: decorrelation refuses it, naming the IN)
        alias = f"{ALIAS}{n}"
        tests = [exp.EQ(this=exp.column(name, alias, quoted=True), expression=value.copy())
                 for name, value in zip(names, row.expressions)]
        derived = exp.Subquery(this=query.copy(), alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
        return exp.select(one_item()).from_(derived, copy=False).where(exp.and_(*tests, copy=False), copy=False)
    return rows_matching(query, row.expressions)


def rows_matching(query: exp.Select, values: list[exp.Expression]) -> exp.Select:
    """``SELECT 1 FROM <query's FROM> WHERE <query's WHERE> AND item_1 = value_1 AND ...``: the rows of plain-rows
    ``query`` whose items equal ``values`` (the query of an EXISTS of a matching row; ``passes/ranged_in.py`` too)."""
    body = query.copy()
    tests = [exp.EQ(this=item.unalias().copy(), expression=value.copy())
             for item, value in zip(body.expressions, values)]
    body.set("expressions", [one_item()])
    body.set("where", exp.Where(this=exp.and_(*conjuncts(body.args.get("where")), *tests, copy=False)))
    return body


def _evaluated_as_written(row: exp.Tuple, context: PassContext) -> bool:
    """Is ``row``'s IN / ``= ANY`` negated (``NOT IN``, ``NOT (... IN ...)``, ``IS NULL``...; shape.negated) under
    witness semantics? A negated subquery gives no witnesses there, wherever it stands, and nothing reads it but the
    engine, which evaluates it as written: no EXISTS is needed (nor exact for its NULL: the IN's NULL is not FALSE)."""
    holder, owner = row.parent, row.find_ancestor(exp.Select)
    compared = isinstance(holder, exp.In) or isinstance(holder, exp.EQ) and isinstance(holder.expression, exp.Any)
    return not context.control and compared and owner is not None and negated(holder, owner)


def filter_clause(node: exp.Expression) -> exp.Expression | None:
    """The clause ``node`` is reached from through AND, OR and parentheses (a Where, a Join...)."""
    node = node.parent
    while isinstance(node, (exp.And, exp.Or, exp.Paren)):
        node = node.parent
    return node


def _items(query: exp.Expression) -> list[exp.Expression]:
    """The SELECT items that name ``query``'s columns (a set operation's: its first SELECT's)."""
    while isinstance(query, exp.SetOperation):
        query = query.this
    return query.expressions if isinstance(query, exp.Select) else []


def plain_rows(query: exp.Expression) -> bool:
    """Is ``query`` a SELECT of rows of its FROM, each item a column (see the module docstring)?"""
    return plain_filter_rows(query) and all(isinstance(item.unalias(), exp.Column) for item in query.expressions)


def movable(row: exp.Tuple, query: exp.Select) -> bool:
    """Can the row's values move into ``query``'s WHERE and read what they read outside it: no subquery in them,
    and no table they name that a FROM item of ``query`` names too (which would bind it there)?"""
    if row.find(exp.Query) is not None:
        return False
    inner = {source.alias_or_name.lower() for source in from_items(query)}
    return not any(column.table.lower() in inner for column in row.find_all(exp.Column))


def one_item() -> exp.Expression:
    return exp.alias_(exp.Literal.number(1), "_dl_one", quoted=True)


def _operator(holder: exp.Expression) -> str:
    if isinstance(holder, exp.Binary):
        quantifier = holder.expression if isinstance(holder.expression, (exp.Any, exp.All)) else None
        symbol = COMPARISONS.get(holder.key, holder.key.upper())
        return f"{symbol} {type(quantifier).__name__.upper()}" if quantifier is not None else symbol
    return holder.key.upper()
