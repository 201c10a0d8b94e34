"""Which uncorrelated IN subqueries forward lineage leaves in place because the rows around them hold their
witnesses already: decided during decorrelation (``passes/decorrelate.py``), on the qualified query.

TPC-H Q18 keeps the orders whose lineitems sum to more than 300 and sums each kept order's lineitems::

    SELECT c_name, ..., sum(l_quantity) FROM customer, orders, lineitem
    WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300)
      AND c_custkey = o_custkey AND o_orderkey = l_orderkey
    GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice

The witnesses of the IN for an order are the lineitems of its group in the subquery: every lineitem of that
order, which are exactly the lineitems the group of the outer SELECT reads. Decorrelated, the subquery's rows
were found again per kept key (a third read of lineitem, a hash table on all orders where the engine's own semi
join probes them: 1.4x the query over parquet); their ids add nothing to any row's lineage. Left in place, the
engine runs the IN as written, and the rules for a subquery left in a clause give it no lineage
(:func:`dltrace.rewriter.analysis.clause_subqueries` skips it).

Valid (each output row's lineage the same: its witnesses are among its own rows) when, in witness semantics,
- the IN is a top-level conjunct of the WHERE of an aggregating SELECT (GROUP BY plain expressions, or none)
  that is no clause's subquery itself: a row passes the WHERE only where the IN is TRUE, and then its
  witnesses are the subquery's rows whose value equals the operand ``x``;
- the subquery is one SELECT of one base table ``T`` (no join, WITH, LIMIT, OFFSET, ORDER BY, QUALIFY, window,
  sample or DISTINCT ON), uncorrelated, deterministic, without subqueries, selecting one of ``T``'s columns
  ``k`` and grouping by nothing or by ``k`` alone (a HAVING only then): the witnesses are the rows of ``T`` with
  ``k = x`` that pass its WHERE ``P`` (a kept group's rows are all witnesses);
- the SELECT reads ``T`` as an item ``t`` of its FROM joined by inner or cross joins only (no outer, USING,
  NATURAL or lateral join), no group key reads ``t`` (nor is a position), and ``x`` is ``t.k`` or equated to it
  (``t.k = x`` a conjunct of the WHERE or an ON); every other conjunct of the WHERE and the ONs that reads ``t``
  is either ``t.k = e`` with ``e`` not reading ``t`` (when ``x`` is not ``t.k``, no such one besides
  ``t.k = x``: through two equalities of other types a witness equal to ``x`` may differ from the row's
  ``t.k``), or reads ``t`` alone and is, renamed, a conjunct of ``P``; and none reads it through a subquery or
  a call that may give another value.
Then for an input row ``r`` of a group and a witness ``w`` (a row of ``T`` with ``w.k = x(r) = r.t.k`` passing
``P``), ``r`` with ``w`` in place of ``r.t`` passes every conjunct (those not reading ``t`` as ``r`` does, the
equalities since ``e(r) = r.t.k = w.k``, the others since ``P`` holds of ``w``, the IN since ``x`` is
unchanged) and falls in the same group (no key reads ``t``): ``w`` is one of the group's rows, its lineage in
the group's.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.correlation import is_correlated
from dltrace.rewriter.rules.covered_lineage import plain_table, renamed
from dltrace.rewriter.rules.late_lineage import plain_keys
from dltrace.rewriter.shape import NONDETERMINISTIC, conjuncts, is_aggregate

COVERED_WITNESSES = "dl_covered_witnesses"  # meta key of an IN subquery left in place: its rows' lineage holds it

_NOT_IN_SUBQUERY = ("with_", "joins", "laterals", "limit", "offset", "fetch", "order", "qualify", "windows",
                    "sample", "pivots", "connect", "prewhere", "match")
_NOT_IN_SELECT = ("laterals", "sample", "pivots", "connect", "prewhere", "match")


def covered_in_subqueries(tree: exp.Expression, in_a_clause_subquery) -> list[exp.Subquery]:
    """The IN subqueries of ``tree`` (a qualified query, before decorrelation) whose witnesses the rows of the
    SELECT they filter hold (the module's conditions). ``in_a_clause_subquery(node)``: is ``node`` inside a
    subquery written in a clause?"""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    found = []
    for test in tree.find_all(exp.In):
        holder = test.args.get("query")
        if isinstance(holder, exp.Subquery) and _covered(test, holder, ctes, in_a_clause_subquery):
            found.append(holder)
    return found


def _covered(test: exp.In, holder: exp.Subquery, ctes: set[str], in_a_clause_subquery) -> bool:
    query = holder.this
    select = test.find_ancestor(exp.Select)
    if not isinstance(query, exp.Select) or select is None or in_a_clause_subquery(select):
        return False
    if not any(c is test for c in conjuncts(select.args.get("where"))):
        return False
    table, column, rows_test = _one_table_column(query, ctes)
    if table is None:
        return False
    operand = test.this.unnest()
    if operand.find(exp.Select, exp.Subquery, exp.Exists, *NONDETERMINISTIC):
        return False
    if not is_aggregate(select) or (select.args.get("group") and not plain_keys(select)):
        return False
    if any(select.args.get(k) for k in _NOT_IN_SELECT) or select.find(exp.TableColumn):
        return False
    joins = select.args.get("joins") or []
    if any(j.side or (j.kind or "INNER").upper() not in ("INNER", "CROSS") or j.args.get("using")
           or j.args.get("method") for j in joins):
        return False
    conditions = [c for c in conjuncts(select.args.get("where")) if c is not test]
    conditions += [c for j in joins for c in conjuncts(j.args.get("on"))]
    keys = select.args["group"].expressions if select.args.get("group") else []
    items = [select.args.get("from_").this if select.args.get("from_") else None, *[j.this for j in joins]]
    for item in items:
        if not (isinstance(item, exp.Table) and _base_table(item, ctes)
                and item.name.lower() == table.name.lower()):
            continue
        alias = item.alias_or_name
        if any(isinstance(k, exp.Literal) or any(c.table == alias for c in k.find_all(exp.Column)) for k in keys):
            continue  # (a position, `GROUP BY 1`, may name a column of t)
        own = [renamed(t, {table.alias_or_name: alias}) for t in rows_test]
        if _covers(alias, column.name, operand, conditions, own):
            return True
    return False


def _one_table_column(query: exp.Select, ctes: set[str]) -> tuple:
    """(its table, the column it selects, its WHERE's conjuncts) when ``query`` is one SELECT of one base table
    selecting one of its columns, grouped by nothing or by that column, deterministic and without subqueries;
    else (None, None, None)."""
    none = (None, None, None)
    if any(query.args.get(k) for k in _NOT_IN_SUBQUERY) or is_correlated(query):
        return none
    distinct = query.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        return none
    from_ = query.args.get("from_")
    table = from_.this if from_ is not None else None
    if not (isinstance(table, exp.Table) and _base_table(table, ctes)) or len(query.expressions) != 1:
        return none
    column = query.expressions[0].unalias()
    if not (isinstance(column, exp.Column) and column.table == table.alias_or_name):
        return none
    group = query.args.get("group")
    if group is not None:
        if not plain_keys(query) or len(group.expressions) != 1 or group.expressions[0] != column:
            return none
    elif query.args.get("having") or is_aggregate(query):
        return none
    if any(query.args.get(k) is not None and query.args[k].find(exp.Select, exp.Subquery, exp.Exists)
           for k in ("where", "having")) or query.find(*NONDETERMINISTIC):
        return none
    return table, column, conjuncts(query.args.get("where"))


def _base_table(table: exp.Table, ctes: set[str]) -> bool:
    """A base table read as it is (:func:`.covered_lineage.plain_table`): not a CTE's name, no schema or catalog,
    no column list."""
    alias = table.args.get("alias")
    return (plain_table(table) and table.name.lower() not in ctes and not table.args.get("db")
            and not table.args.get("catalog") and not (alias is not None and alias.args.get("columns")))


def _covers(alias: str, key: str, operand: exp.Expression, conditions: list[exp.Expression],
            rows_test: list[exp.Expression]) -> bool:
    """Do ``conditions`` (the SELECT's conjuncts besides the IN) read ``alias`` only as the module allows, with
    the operand ``t.k`` itself or equated to it?"""
    def reads(node: exp.Expression) -> bool:
        return any(c.table == alias for c in node.find_all(exp.Column))

    def is_key(node: exp.Expression) -> bool:
        node = node.unnest()
        return isinstance(node, exp.Column) and node.table == alias and node.name == key

    bound = is_key(operand)
    if reads(operand) and not bound:
        return False
    equalities = 0
    for condition in conditions:
        if not reads(condition):
            continue
        if condition.find(exp.Select, exp.Subquery, exp.Exists, *NONDETERMINISTIC):
            return False
        if isinstance(condition, exp.EQ):
            sides = [condition.this.unnest(), condition.expression.unnest()]
            other = sides[1] if is_key(sides[0]) else sides[0] if is_key(sides[1]) else None
            if other is not None and not reads(other):
                bound, equalities = bound or other == operand, equalities + 1
                continue
        if all(c.table == alias for c in condition.find_all(exp.Column)) and any(condition == t for t in rows_test):
            continue
        return False
    # with an operand other than t.k, one equality: through two, of other types, a witness equal to the operand
    # may differ from the row's t.k (a BIGINT beyond 2^53 compared with a DOUBLE) and fail the other
    return bound and (is_key(operand) or equalities == 1)
