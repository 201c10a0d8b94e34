"""One analysis of a query, shared by forward rewriting and backward tracing, so the two cannot drift.

``prepare(tree, dialect, schema)`` takes the LINEAGE ON clause off the query, writes DuckDB's PIVOT as the GROUP BY
it stands for and its UNPIVOT as its plan runs it (:mod:`.passes.pivots`) and a parenthesised join out flat where
that is the same rows (:mod:`.passes.parenthesised_joins`), refuses what has no lineage rule, and runs
:data:`ANALYSIS_PASSES`: a parenthesised query's ORDER BY / LIMIT onto a SELECT of their own, an IN list holding a
subquery as the OR of its comparisons, SEMI / ANTI joins as [NOT] EXISTS, a LIMIT inside EXISTS or on a one-row
aggregate dropped, DISTINCT ON as a QUALIFY, a table function generating rows from constants and an unnest in FROM
named as the engine names them, DuckDB's implicit LATERAL written out, qualify, a correlation through IS NOT DISTINCT
FROM as an equality of structs, a parenthesised join that is not the same rows flat as a derived table, GROUP BY
ALL as its keys, LATERAL joins as joins of derived tables, a correlated EXISTS that groups as one over its groups, a
correlated scalar subquery in an inner join's ON into the WHERE, decorrelate, mark how each decorrelated subquery is
used, read and translate non-equality witnesses, make cross joins explicit. Both directions then ask the same
questions of the prepared tree through the functions below:

- :func:`contributes`: does a decorrelated subquery give lineage to the rows of its SELECT? (witness: only
  where it made a predicate true, i.e. it is used positively; control: always);
- :func:`clause_subqueries`: the subqueries still written in a SELECT's clauses and how their lineage reaches
  its rows (whole, or the witnesses of IN / ANY / ALL), refusing those without exact lineage;
- :func:`array_witness`: a non-equality correlation's test (:mod:`.passes.array_witness`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from dltrace.errors import DltraceError, UnsupportedQuery
from dltrace.names import RID
from dltrace.rewriter.lineage_on import OnSpec, resolve, take_clause
from dltrace.rewriter.parse import check_query, position
from dltrace.rewriter.passes.aggregate_limit import aggregate_limit
from dltrace.rewriter.passes.array_witness import ARRAY_WITNESS, ArrayWitness
from dltrace.rewriter.passes.array_witness import array_witness as read_array_witnesses
from dltrace.rewriter.passes.coarse_keys import COARSE
from dltrace.rewriter.passes.column_lists import column_lists
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import (COMPARISONS, is_correlated, outer_columns, reaches_past_itself,
                                                 subquery_kind)
from dltrace.rewriter.passes.cross_joins import explicit_cross_joins
from dltrace.rewriter.passes.decorrelatable import WRITTEN_AS
from dltrace.rewriter.passes.decorrelate import (
    DECORRELATED,
    PREDICATE_CLAUSE,
    PREDICATE_SUBQUERIES,
    decorrelate,
)
from dltrace.rewriter.passes.distinct_on import distinct_on
from dltrace.rewriter.passes.exists_limit import exists_limit
from dltrace.rewriter.passes.group_by_all import group_by_all
from dltrace.rewriter.passes.grouped_exists import grouped_exists
from dltrace.rewriter.passes.having_to_where import having_to_where
from dltrace.rewriter.passes.in_lists import in_lists
from dltrace.rewriter.passes.inner_join_lookups import inner_join_lookups
from dltrace.rewriter.passes.implicit_laterals import implicit_laterals
from dltrace.rewriter.passes.known_aggregates import known_aggregates
from dltrace.rewriter.passes.lateral_joins import lateral_joins
from dltrace.rewriter.passes.outer_join_filters import outer_join_filters
from dltrace.rewriter.passes.covered_witnesses import COVERED_WITNESSES
from dltrace.rewriter.passes.late_witness_exists import LATE_WITNESS
from dltrace.rewriter.passes.nested_joins import nested_joins
from dltrace.rewriter.passes.null_safe_keys import null_safe_keys
from dltrace.rewriter.passes.or_correlations import or_correlations
from dltrace.rewriter.passes.uncorrelated_ors import uncorrelated_ors
from dltrace.rewriter.passes.lateral_views import lateral_views
from dltrace.rewriter.passes.parenthesised import parenthesised
from dltrace.rewriter.passes.parenthesised_joins import parenthesised_joins
from dltrace.rewriter.passes.lateral_unnests import lateral_unnests
from dltrace.rewriter.passes.grouping_tuples import grouping_tuples
from dltrace.rewriter.passes.identifier_tables import identifier_tables
from dltrace.rewriter.passes.redundant_parentheses import redundant_parentheses
from dltrace.rewriter.passes.row_constructors import row_constructors
from dltrace.rewriter.passes.pivots import pivots
from dltrace.rewriter.passes.qualify import qualify
from dltrace.rewriter.passes.quantified_types import quantified_types
from dltrace.rewriter.passes.row_generators import row_generators
from dltrace.rewriter.passes.bag_setops import bag_setops
from dltrace.rewriter.passes.exists_unions import exists_unions
from dltrace.rewriter.passes.ranged_in import ranged_in
from dltrace.rewriter.passes.row_in_subqueries import row_in_subqueries
from dltrace.rewriter.passes.semi_joins import semi_joins
from dltrace.rewriter.passes.unnest_columns import unnest_columns
from dltrace.rewriter.passes.union_by_name import union_by_name
from dltrace.rewriter.passes.witness_uses import (
    CLAUSES,
    USED_POSITIVELY,
    WITNESS_CONDITION,
    mark_witness_uses,
    never,
    outer_on,
    value_condition,
    value_use,
)

# facts both directions read, re-exported beside the analysis's own
from dltrace.rewriter.shape import global_aggregate_row as global_aggregate_row
from dltrace.rewriter.shape import is_aggregate as is_aggregate
from dltrace.rewriter.shape import negated as negated
from dltrace.rewriter.shape import conjuncts, engine_reads, from_items, random_call_read, reads_no_table

SEMANTICS = ("witness", "control")


#: meta of a prepared tree whose subqueries' witnesses are kept where they stand (LINEAGE ON: late_witnesses off)
WITNESSES_KEPT_IN_PLACE = "dl_witnesses_kept_in_place"


def _why_not_decorrelated(query: exp.Expression, coarse: str | None = None,
                          holder: exp.Expression | None = None) -> str:
    """A hint for a refusal of ``query`` (standing in ``holder`` of its SELECT): an equality coarser than grouping
    (:mod:`.passes.coarse_keys`), a correlation through ``IS NOT DISTINCT FROM`` (Spark's ``<=>``, also a SEMI JOIN's
    ON read as an EXISTS), which sqlglot does not decorrelate, where it stands or what it holds that is not
    decorrelated, else nothing."""
    select = holder.find_ancestor(exp.Select) if holder is not None else None
    if not isinstance(query, exp.SetOperation) and reaches_past_itself(query):
        # (first: where it stands changes nothing then, and a grouped query's subquery item stands in the aggregate
        # a pass wrapped it in, named as the user's: a new user's)
        inside_from = any(isinstance(a, (exp.From, exp.Join)) for c in outer_columns(query)
                          for a in _ancestors_upto(c, query))
        if inside_from:
            return ": a derived table in its FROM reads the outer query, which is not decorrelated; read the outer " \
                   "query in the subquery's own WHERE (or join the derived table there)"
        return ": a subquery inside it reads a query outside this one (correlated two levels up); correlate each " \
               "subquery with the query just outside it"
    if select is not None and any(a.find_ancestor(exp.Select) is select for a in _ancestors_upto(holder, select)
                                  if isinstance(a, exp.AggFunc)):
        return ": it stands inside an aggregate's argument, which is not decorrelated; compute it in a derived " \
               "table first and aggregate that"
    if select is not None and any(isinstance(a, exp.Join) for a in _ancestors_upto(holder, select)):
        return ": it stands in a join's ON condition, which is not decorrelated (an inner join's moves to WHERE " \
               "unless a RIGHT, FULL or POSITIONAL join follows it)"
    if coarse and "collation" in coarse:  # (a cast or a COLLATE on both sides is a collated string equality still)
        return f": it is correlated through {coarse}; join the subquery's rows in FROM instead (a derived table " \
               f"grouped by its key), where the engine's own equality decides"
    if coarse:
        return f": it is correlated through {coarse}; cast both sides to one type (a COLLATE leaves a side's type " \
               f"unknown)"
    outer = {id(c) for c in outer_columns(query)}
    if any(outer & {id(c) for c in test.find_all(exp.Column)} for test in query.find_all(exp.NullSafeEQ)):
        return ": it is correlated through IS NOT DISTINCT FROM (<=>), which is decorrelated only in the subquery's " \
               "own WHERE between two sides of one type (integers, decimals, dates, timestamps, booleans, strings " \
               "without a collation); cast both sides to one type, or compare with = where a NULL key may match nothing"
    if isinstance(query, exp.Select) and (query.args.get("limit") or query.args.get("offset")):
        return ": it has a LIMIT or OFFSET, which is read only in a lookup of plain rows correlated by equalities " \
               "of its own columns with the outer query's alone and ordered by its own columns (for a LIMIT 1 " \
               "under a range correlation: compare with the max in a subquery of its own, or use arg_max)"
    if isinstance(query, exp.SetOperation):
        # (its branches read the outer query one level down, which reaches_past_itself takes for two: a review)
        return ": it is a set operation whose branches read the outer query, which is not decorrelated (an EXISTS " \
               "over a UNION [ALL] is, branch by branch); compute the set operation in a derived table and correlate " \
               "the subquery reading it"
    if isinstance(query, exp.Select) and query.args.get("having") is not None:
        return ": it has a HAVING of its own, which is not decorrelated; filter its value in the outer query"
    if any(outer & {id(c) for c in test.find_all(exp.Column)} for test in query.find_all(exp.Or)):
        return ": it is correlated under OR, which is not decorrelated"
    if _range_on_a_computed_value(query, outer, select):
        return ": it compares the outer row by a range or inequality, which forward lineage decorrelates where both " \
               "sides are columns as they are, the outer one of a table or CTE; compute that value as a column of " \
               "a CTE and compare the column"
    if (holder if holder is not None else query).root().meta.get(WITNESSES_KEPT_IN_PLACE):
        # (an EXISTS by a range beside a GROUP BY runs without the clause: a review's)
        return ": under LINEAGE ON, which keeps a subquery's witnesses where the subquery stands (the rule that " \
               "joins them after the query's filter, and reads such a subquery, is off); without the clause it may run"
    return ""


def _range_on_a_computed_value(query: exp.Expression, outer: set[int], select: exp.Select | None) -> bool:
    """Does ``query``'s WHERE compare by a range or inequality a value of the outer row that is not a column as it
    is (an expression of one) or a derived table's column (:mod:`.passes.outer_domains` reads neither: its domain
    would compute the value for rows the query never evaluates it for, where it may raise)?"""
    if not isinstance(query, exp.Select):
        return False
    derived = {i.alias_or_name for i in (from_items(select) if select is not None else [])
               if not isinstance(i, exp.Table)}
    for test in conjuncts(query.args.get("where")):
        if not isinstance(test, (exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
            continue
        for side in (test.this, test.expression):
            if outer & {id(c) for c in side.find_all(exp.Column)} and (
                    not isinstance(side, exp.Column) or side.table in derived):
                return True
    return False


def _ancestors_upto(node: exp.Expression, top: exp.Expression):
    node = node.parent
    while node is not None and node is not top:
        yield node
        node = node.parent


ANALYSIS_PASSES = (parenthesised, column_lists, in_lists, semi_joins, exists_limit, aggregate_limit, distinct_on,
                   known_aggregates, row_generators, unnest_columns, implicit_laterals, qualify, row_in_subqueries,
                   null_safe_keys, nested_joins, lateral_views, group_by_all, lateral_joins, grouped_exists,
                   outer_join_filters, inner_join_lookups, having_to_where, union_by_name, quantified_types,
                   bag_setops, ranged_in, exists_unions, or_correlations, uncorrelated_ors, decorrelate,
                   mark_witness_uses, read_array_witnesses, explicit_cross_joins)


@dataclass(frozen=True)
class Prepared:
    """A query in the form both directions read: qualified, decorrelated, witnesses marked."""

    tree: exp.Expression
    on: OnSpec | None  # the LINEAGE ON clause, resolved (None without one)
    tables: tuple[str, ...]  # base tables read, in order of appearance
    columns: tuple[str, ...]  # the query's own output columns

    @property
    def lineage_off(self) -> bool:
        return self.on is not None and self.on.off


def prepare(tree: exp.Expression, context: PassContext) -> Prepared:
    """Analyse a parsed query (never mutated). ``LINEAGE ON ()`` returns the query as written."""
    if context.semantics not in SEMANTICS:
        raise DltraceError(f"unknown semantics {context.semantics!r}: choose one of {', '.join(SEMANTICS)}")
    tree = tree.copy()
    clause = take_clause(tree)
    # (before the checks, which read SELECTs and their FROM items: a PIVOT is a grouped SELECT, an UNPIVOT an
    # unnesting one, a parenthesised join hides its tables from them; ((q)) holds q behind two parentheses)
    tree = redundant_parentheses(tree, context, copy=False)
    tree = row_constructors(tree, context, copy=False)  # (a ROW(a, b) compared with a subquery: a row value)
    tree = pivots(tree, context, copy=False)
    tree = parenthesised_joins(tree, context, copy=False)
    tree = lateral_unnests(tree, context, copy=False)
    tree = grouping_tuples(tree, context, copy=False)
    tree = identifier_tables(tree, context, copy=False)
    check_query(tree)
    on = resolve(clause, tree, context.schema) if clause is not None else None
    if on is not None and on.table:
        read = next((c for c in tree.find_all(exp.Column) if c.name.lower() == RID), None)
        if read is not None:
            # the clause numbers the table's rows by their values (passes/dictionary_ids.py): a query reading dl_rid
            # read those numbers, and filtered, counted and ordered by them (a review's)
            raise UnsupportedQuery(f"reading dl_rid under LINEAGE ON (...) is not supported: the clause numbers "
                                   f"{on.table}'s rows by their values; read the ids without the clause, at "
                                   f"{position(read)}")
    if on is not None and on.off:
        return Prepared(tree, on, tuple(base_tables(tree)), tuple(tree.named_selects))
    if on is not None:  # (a granularity clause reads lineage the rebuilt query would move: left as it is)
        context = replace(context, late_witnesses=False)
        tree.meta[WITNESSES_KEPT_IN_PLACE] = True  # (a refusal this causes says so: _why_not_decorrelated)
    for analysis_pass in ANALYSIS_PASSES:
        tree = analysis_pass(tree, context, copy=False)  # the tree is this call's own copy
    return Prepared(tree, on, tuple(base_tables(tree)), tuple(tree.named_selects))


def base_tables(tree: exp.Expression) -> list[str]:
    """Every base table the query reads, in order of appearance (references of a CTE in scope excluded, a table
    read inside a CTE of its own name included: :func:`~dltrace.rewriter.shape.engine_reads`)."""
    return list(dict.fromkeys(t.name.lower() for t in engine_reads(tree)))


# -- facts both directions read ------------------------------------------------------------------------


def contributes(sub: exp.Subquery, control: bool) -> bool:
    """Does the decorrelated subquery ``sub`` give lineage to its SELECT's rows?"""
    return control or bool(sub.meta.get(USED_POSITIVELY))


def witness_condition(sub: exp.Subquery) -> exp.Expression | None:
    """When the decorrelated subquery ``sub``'s rows are witnesses of a row of its SELECT: None = whenever they
    join it; else a condition over the SELECT's row (a scalar compared outside a top-level conjunct: only where
    the comparison is TRUE)."""
    condition = sub.meta.get(WITNESS_CONDITION)
    return None if condition is None or never(condition) else condition


def array_witness(sub: exp.Subquery) -> ArrayWitness | None:
    """The non-equality witness test of a decorrelated subquery, if it has one."""
    return sub.meta.get(ARRAY_WITNESS)


def is_decorrelated(source: exp.Expression) -> bool:
    return isinstance(source, exp.Subquery) and bool(source.meta.get(DECORRELATED))


@dataclass(frozen=True)
class ClauseSubquery:
    """A subquery still written in a clause of a SELECT, and how its lineage reaches the SELECT's rows.

    ``how == "whole"``: every row gets all of the subquery's lineage (EXISTS, a scalar subquery, and in
    control mode every predicate subquery). ``how == "witness"``: a row gets the subquery rows ``s`` with
    ``operand <comparison> s`` TRUE (``quantifier == "any"``: IN, ``op ANY``), or all of them when every
    comparison is TRUE (``"all"``: ``op ALL``) -- nothing when the predicate is not TRUE.
    ``clause`` is where it is written: "expressions", "where", "having", "qualify" or "on".
    """

    query: exp.Expression
    clause: str
    how: str = "whole"
    quantifier: str | None = None
    comparison: str | None = None
    operand: exp.Expression | None = None
    condition: exp.Expression | None = None  # "whole": only where this is TRUE (a scalar compared under OR...)


def clause_subqueries(select: exp.Select, control: bool) -> list[ClauseSubquery]:
    """The subqueries of ``select`` (not FROM items) whose lineage its rows get, in order of appearance.

    Refuses what has no exact lineage: a correlated subquery that could not be decorrelated, a subquery in
    an outer join's ON (or an inner join's ON followed by a RIGHT/FULL join), in ORDER BY or GROUP BY.
    """
    out = []
    for clause, holder, query in direct_subqueries(select):
        if holder.meta.get(LATE_WITNESS):
            continue  # its witnesses are joined to the rows that passed it (passes/late_witnesses.py)
        if holder.meta.get(COVERED_WITNESSES):
            continue  # its witnesses are among the rows it filters (passes/covered_witnesses.py)
        kind, predicate, comparison = subquery_kind(holder)
        # a predicate's polarity counts in every clause (a SELECT-list `x IN (S) IS NULL` is negated); a scalar's
        # value is no predicate: only a comparison of it is (its condition, below)
        negative = kind != "scalar" and negated(predicate, select)
        if negative and not control:
            continue  # NOT IN / NOT EXISTS / NOT (x > ANY ...): witness lineage is empty (nothing evaluates it again)
        call = random_call_read(query)
        if call is not None:
            # the subquery's value is computed where it stands, its lineage by another evaluation: a random draw
            # would differ between the two (a row kept by one draw, its witnesses from another)
            raise UnsupportedQuery(f"a call that gives another value each time, in a subquery kept in a clause, is "
                                   f"not supported (its lineage is computed apart from its value), at {position(call)}")
        if is_correlated(query) and reads_no_table(query):
            # over the outer row's own values alone (`EXISTS (SELECT 1 FROM unnest(t.l) AS e(e) WHERE e > 1)`):
            # no base row of its own to give, and the outer row is in its SELECT's lineage already; evaluated
            # where it stands, as written
            continue
        if is_correlated(query):
            written = holder.meta.get(WRITTEN_AS, holder)
            what = subquery_kind(written)[0].upper()  # the user's: an EXISTS read as a count, a split's scalar
            lineage_of = "control lineage of " if negative or control and kind in ("in", "any") else ""
            if isinstance(written, exp.Binary) and written.key in COMPARISONS and written.find(exp.All) is not None:
                # (passes/quantified_all.py: the user's ALL, read as a NOT EXISTS and a count)
                what, negative = f"{COMPARISONS[written.key]} ALL", False
                lineage_of = "control lineage of " if control else ""
            raise UnsupportedQuery(
                f"a correlated subquery that could not be decorrelated ({lineage_of}"
                f"{'NOT ' if negative else ''}{what}), at {position(written)}"
                f"{_why_not_decorrelated(query, query.meta.get(COARSE), holder)}"
            )
        if control and clause in ("where", "having"):
            continue  # taken whole below, as it was before decorrelation
        if control or kind == "exists":
            out.append(ClauseSubquery(query, clause))
        elif kind == "scalar":
            condition = value_condition([value_use(holder)], select, "")
            if not never(condition):
                out.append(ClauseSubquery(query, clause, condition=condition))
        else:
            operand = predicate.this if kind == "in" else _other_side(predicate, holder)
            out.append(ClauseSubquery(query, clause, "witness", "all" if kind == "all" else "any", comparison,
                                      operand))
    if control:
        out += [ClauseSubquery(q, q.meta.get(PREDICATE_CLAUSE, "where"))
                for q in select.meta.get(PREDICATE_SUBQUERIES, [])]
    return out


def _other_side(comparison: exp.Expression, holder: exp.Expression) -> exp.Expression:
    """The operand of ``x op ANY/ALL (S)``: the side of the comparison that is not the quantifier."""
    quantifier = holder if isinstance(holder, (exp.Any, exp.All)) else holder.parent
    if comparison.expression is quantifier:
        return comparison.this
    raise UnsupportedQuery(f"ANY/ALL must be the right operand of its comparison, at {position(comparison)}")


def direct_subqueries(select: exp.Select) -> list[tuple[str, exp.Expression, exp.Expression]]:
    """(clause, holder, query) for subqueries written directly in ``select``'s clauses (not FROM items).

    The holder is the EXISTS node, the ALL node, or the parenthesised subquery (inside IN / ANY or alone).
    """
    found = []
    for key in (*CLAUSES, "order", "group"):
        for node in _clause_nodes(select, key):
            for holder, query in _holders_in(node, select):
                if key in ("order", "group"):
                    raise UnsupportedQuery(f"a subquery in {'ORDER BY' if key == 'order' else 'GROUP BY'} is "
                                           f"not supported, at {position(holder)}")
                found.append((key, holder, query))
    joins = select.args.get("joins") or []
    for i, join in enumerate(joins):
        on = join.args.get("on")
        if on is None:
            continue
        for holder, query in _holders_in(on, select):
            if outer_on(joins, i):
                raise UnsupportedQuery(f"a subquery in the ON clause of an outer join (but a LEFT JOIN's reading its "
                                       f"right side alone), or of a join followed by a RIGHT/FULL join, is not "
                                       f"supported, at {position(holder)}")
            found.append(("on", holder, query))
    return found


def _clause_nodes(select: exp.Select, key: str) -> list[exp.Expression]:
    value = select.args.get(key)
    return [n for n in (value if isinstance(value, list) else [value]) if n is not None]


def _holders_in(node: exp.Expression, select: exp.Select):
    for holder in node.find_all(exp.Subquery, exp.Exists, exp.All):
        if isinstance(holder, exp.Subquery) and isinstance(holder.parent, exp.All):
            continue  # seen as its ALL
        if not isinstance(holder.this, exp.Query):
            continue
        if holder.find_ancestor(exp.Select, exp.SetOperation) is not select:
            continue
        yield holder, holder.this
