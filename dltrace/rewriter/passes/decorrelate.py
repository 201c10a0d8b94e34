"""Decorrelate subqueries (sqlglot's unnest_subqueries) where that keeps the query's answer, and mark them.

sqlglot turns a subquery predicate into a join and replaces the predicate by a two-valued test
(``NOT _u.k IS NULL``) or the subquery by a joined column. That is exact only in some positions, so a
subquery is handed to sqlglot only when its rewrite is valid:

- ``x IN (S)`` / ``x = ANY (S)``: only as a positive filter -- reached from WHERE (or an inner join's ON)
  through AND, OR and parentheses alone. There NULL and FALSE both drop the row (AND/OR are monotone in
  Kleene logic), so the two-valued test is equivalent; under NOT, in a comparison (``= false``), ``IS NULL``,
  CASE, HAVING or the SELECT list it is not (``NULL IN (...)`` is NULL, the test FALSE);
- ``EXISTS`` correlated: anywhere (EXISTS is two-valued, and so is its test); over an aggregate without GROUP
  BY, HAVING, QUALIFY, LIMIT or OFFSET (always TRUE, which sqlglot writes as TRUE, its rows' lineage lost) it is
  first read as a count of the same rows that is never NULL (:func:`decorrelatable.count_rows_of_true_exists`);
- a correlated scalar subquery that looks a value up without aggregating (``(SELECT u.c FROM u WHERE u.a =
  t.a)``) is first read as one-row aggregates, its item raising the engine's error where it finds several rows
  (:func:`scalar_lookups.read_lookups_as_aggregates`);
- a correlated ``x op ALL (subquery)`` in a top-level WHERE conjunct is first read as a NOT EXISTS of a row that
  fails the comparison and a count of the subquery's rows (:func:`quantified_all.read_all_as_not_exists`), and a
  correlated ``x op ANY (subquery)`` (``op`` not ``=``) there, in witness semantics, as an EXISTS of a row that
  makes the comparison hold (:func:`quantified_any.read_any_as_exists`);
- a correlated scalar subquery over an expression of aggregates that sqlglot's decorrelation does not take
  (``coalesce(sum(v), 0)``, ``count(*) + 1``, ``max(v) - min(v)``: over no rows not the NULL a LEFT JOIN gives)
  is first written as the expression over one subquery per aggregate (:func:`decorrelatable.split_aggregate_values`);
- a correlated scalar subquery of one aggregate call sqlglot does not take (``string_agg``, ``list``, ``bool_or``,
  ``count(*) FILTER (...)``, ``arg_max`` ...: sqlglot takes COUNT, SUM, AVG, MIN and MAX alone) whose value over no
  rows dltrace knows on the engine is handed to sqlglot inside a MAX() (NULL over no rows) or a COUNT() (sqlglot
  reads it through a COALESCE, whose fallback becomes the aggregate's value over no rows), the user's call put back
  after (:func:`empty_aggregates.stand_in`); one whose value over no rows is not known is refused, naming it;
- for forward lineage in witness semantics, a correlated scalar aggregate compared with the outer row by more than
  equalities (``WHERE u.d < t.d``), and an EXISTS or IN over plain rows correlated by a range alone or by two, are
  first read over a domain of the outer values, correlated by equalities only
  (:func:`outer_domains.join_outer_domains`);
- a correlated scalar subquery in the SELECT list or HAVING of a plain GROUP BY that reads only group keys of
  its SELECT is first read per input row, through ``MAX()`` (:func:`decorrelatable.read_group_constants_per_row`);
- a scalar subquery: only when it returns exactly one value per outer row -- its one projection over aggregates
  and, when uncorrelated, no GROUP BY / HAVING / LIMIT / OFFSET / DISTINCT / QUALIFY (a CROSS JOIN with zero
  or several rows would drop or repeat outer rows where the engine gives NULL or an error) -- and not in the
  SELECT list or HAVING of a global aggregate (sqlglot reads the joined value through MAX(), NULL over zero
  input rows, where the engine gives the subquery's value), nor, uncorrelated, in the SELECT list of a SELECT
  that calls aggregates only in windows (sqlglot takes it for an aggregation and adds that MAX(): the engine
  refuses it);
- ``op ANY`` (other than ``=``), ``op ALL`` and uncorrelated EXISTS: never (kept in place);
- for forward lineage (``context.late_witnesses``, witness semantics), the correlated EXISTS / NOT EXISTS of
  the aggregating SELECTs whose rows reach the output that ``passes/late_witnesses.py`` rebuilds: kept in place,
  marked ``meta[LATE_WITNESS]``;
- for forward lineage in witness semantics, a correlated EXISTS negated in a WHERE (``NOT EXISTS``): kept in
  place, marked ``meta[NO_WITNESSES]``. A row passes it only when the subquery has no row for it, so it has no
  witnesses, and the rules for a subquery left in a clause give it none (:func:`analysis.clause_subqueries`), as
  they give a decorrelated one used negatively none; the engine then runs it as the user wrote it, its own
  anti join, where the decorrelated LEFT JOIN grouped the subquery's rows by key and the key list that reduces
  that grouping read the outer tables once more (TPC-H Q22 over parquet: 1.52x -> 1.28x of the query);
- for forward lineage in witness semantics, an uncorrelated scalar subquery in a clause of such a SELECT, unless
  it calls a random draw or the clock: kept in place, marked ``meta[SCALAR_IN_PLACE]``. Its lineage is its
  whole lineage either way (one value), which the rules for a subquery left in a clause give it; the engine
  computes the value once, where sqlglot's cross join, read through MAX() in a grouped SELECT, carried it into
  every input row of the grouping (TPC-H Q11's HAVING: 1.90x -> 1.52x of the query);
- for forward lineage in witness semantics, an uncorrelated IN whose witnesses are among the rows of the
  aggregating SELECT it filters (``passes/covered_witnesses.py``: TPC-H Q18): kept in place, marked
  ``meta[COVERED_WITNESSES]``; its lineage is the rows' own, and the engine runs its own semi join.

Every other subquery is kept in place, evaluated by the engine exactly as written; its lineage is traced by
the rules for subqueries left in a clause (or the query is refused there, e.g. when it is correlated).

Marks each subquery that decorrelation made a FROM/JOIN item (``meta[DECORRELATED]``), and, under control
semantics, keeps a copy of every uncorrelated WHERE/HAVING/aggregate FILTER subquery on its SELECT
(``meta[PREDICATE_SUBQUERIES]``, shared by the tree's copies: :class:`KeptCopies`): control lineage needs all of
their rows, and decorrelation rewrites IN into a join that keeps only the matching ones.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify_columns import quote_identifiers
from sqlglot.optimizer.scope import find_in_scope, traverse_scope
from sqlglot.optimizer.unnest_subqueries import unnest_subqueries

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.coarse_keys import COARSE, mark_coarse_keys
from dltrace.rewriter.passes.correlation import (COMPARISONS, enclosing_clause, in_a_clause, is_correlated,
                                                 one_value, outer_columns, positive_filter, reaches_past_itself,
                                                 subquery_kind)
from dltrace.rewriter.passes.decorrelatable import (DECORRELATED, PIECE, WRITTEN_AS, count_rows_of_true_exists,
                                                    hoist_outer_tests, outer_only_tests, read_group_constants_per_row,
                                                    read_scalars_in_expressions, split_aggregate_values)
from dltrace.rewriter.passes.covered_witnesses import COVERED_WITNESSES, covered_in_subqueries
from dltrace.rewriter.passes.empty_aggregates import refuse_unknown, restore, stand_in
from dltrace.rewriter.passes.key_types import may_hold_maps
from dltrace.rewriter.passes.late_witness_exists import LATE_WITNESS, late_witness_exists
from dltrace.rewriter.passes.outer_domains import join_outer_domains
from dltrace.rewriter.passes.quantified_all import read_all_as_not_exists
from dltrace.rewriter.passes.quantified_any import read_any_as_exists
from dltrace.rewriter.passes.scalar_lookups import raise_errors, read_lookups_as_aggregates
from dltrace.rewriter.shape import (conjuncts, differs_in_another_statement, global_aggregate_row,
                                   in_aggregate_argument, is_aggregate, negated, returns_rows_per_row)

PREDICATE_SUBQUERIES = "dl_predicate_subqueries"  # meta key: copies of a SELECT's WHERE/HAVING/FILTER subqueries
PREDICATE_CLAUSE = "dl_predicate_clause"  # meta key of such a copy: "where" (per input row) or "having" (per group)
REDUCTION = "dl_reduction"  # meta key of a key list dltrace joins into a decorrelated subquery (no lineage)
ZERO_FILL = "dl_zero_fill"  # meta key of the COALESCE(_u.c, 0) sqlglot reads a decorrelated COUNT through
SCALAR_IN_PLACE = "dl_scalar_in_place"  # meta key of an uncorrelated scalar subquery left where it is written
NO_WITNESSES = "dl_no_witnesses"  # meta key of a NOT EXISTS left in place: no row has witnesses in it
SCALAR_VALUE = "dl_scalar_value"  # meta key of a scalar subquery's SELECT: its joined column is a value, not a test
_KEPT = "_DL_KEPT_SUBQUERY"  # placeholder function name while sqlglot decorrelates the others
_WRITTEN = "dl_written"  # meta key of the query's own subqueries while sqlglot decorrelates (taken off after)
_QUANTIFIED_AT = "dl_quantified_at"  # meta key: where the user wrote an ANY / ALL (sqlglot may rewrite it)


def _refuse_quantified_aggregates(tree: exp.Expression) -> None:
    """A quantifier over an aggregate after decorrelation (``x < ANY MAX(_u.c)``: DuckDB refuses it, an UNNEST of
    a number, and no rule reads its witnesses) is refused, naming the user's ANY / ALL. The per-group read of a
    scalar made one of a correlated ANY in a grouped SELECT's HAVING (found by the long generator profile); it
    now reads scalars only, and this guards the shape whatever makes it."""
    for quantified in tree.find_all(exp.Any, exp.All):
        if isinstance(quantified.this, exp.AggFunc):
            where = quantified.meta.get(_QUANTIFIED_AT) or position(quantified)
            raise UnsupportedQuery(f"a correlated {type(quantified).__name__.upper()} over an aggregate in a grouped "
                                   f"SELECT could not be decorrelated, at {where}")


def _refuse_group_by_subqueries(tree: exp.Expression) -> None:
    """A GROUP BY key holding a subquery (``GROUP BY a.v > (SELECT max(v) FROM b)``, also by position or alias: the
    keys are the items by then) is refused, naming it: sqlglot's decorrelation reads the joined value through MAX()
    there too, an aggregate in GROUP BY, which DuckDB refused ("GROUP BY clause cannot contain aggregates"; a new
    user). Computed in a derived table first, the key is a column, which runs."""
    for group in tree.find_all(exp.Group):
        sub = next((q for key in group.expressions for q in key.find_all(exp.Subquery)), None)
        if sub is not None:
            raise UnsupportedQuery(f"a subquery in a GROUP BY key is not supported: compute the key in a derived "
                                   f"table (SELECT ..., <key> AS k FROM ...) and group by its column, at "
                                   f"{position(sub)}")


def decorrelate(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not _has_clause_subquery(expression):
        return expression  # only derived tables, CTEs and set operations: nothing to decorrelate, no copy
    tree = exp.maybe_copy(expression, copy)
    _refuse_group_by_subqueries(tree)
    _name_subquery_items(tree)
    # (on the subqueries as the user wrote them, whose types sqlglot reads; the forms written below copy the mark)
    mark_coarse_keys(tree, list(_holders(tree)), context)
    if context.control:  # (read by control lineage alone)
        _remember_predicate_subqueries(tree)
    hoist_outer_tests(tree, control=context.control)
    lookups = context.fns is not None and bool(context.fns.error_function)
    if lookups:
        read_lookups_as_aggregates(tree, WRITTEN_AS, context.fns.checks_unread_lookups)
    read_all_as_not_exists(tree, WRITTEN_AS)
    if context.semantics == "witness":  # (control lineage reads all of the subquery's rows, the EXISTS fewer)
        read_any_as_exists(tree)
    count_rows_of_true_exists(tree)
    split_aggregate_values(tree, context.dialect)
    if context.late_witnesses and context.semantics == "witness":  # (after the split: its pieces too)
        join_outer_domains(tree, REDUCTION, WRITTEN_AS)
    read_group_constants_per_row(tree, context.schema, context.dialect, context.collations)
    read_scalars_in_expressions(tree, context.dialect)
    if context.late_witnesses and context.semantics == "witness":
        compares_maps = context.fns is None or context.fns.compares_maps
        keys_compared = (lambda select: compares_maps or not may_hold_maps(select, context.schema, context.dialect))
        for holder in late_witness_exists(tree, keys_compared):  # left in place, witnesses joined after the filter
            holder.meta[LATE_WITNESS] = True
        for holder in _negated_exists(tree):
            holder.meta[NO_WITNESSES] = True
        for holder in _uncorrelated_scalars(tree):
            holder.meta[SCALAR_IN_PLACE] = True
        for holder in covered_in_subqueries(tree, _in_a_clause_subquery):
            holder.meta[COVERED_WITNESSES] = True
    if context.control:
        # a correlated IN's control lineage is the subquery's rows for the outer row, more than the matching ones
        # sqlglot's join keeps (it groups by the value too): kept in place, where it is refused by name (the review
        # of a change found control lineage equal to the witnesses)
        for holder in _holders(tree):
            kind = subquery_kind(holder)[0]
            query = holder.this.this if isinstance(holder.this, exp.Subquery) else holder.this
            if kind in ("in", "any") and is_correlated(query):
                holder.meta[_CONTROL_IN] = True
    refuse_unknown(tree, context.dialect, WRITTEN_AS)  # (kept in place or not: a correlated one is refused)
    kept = _keep_in_place(tree)
    stand_in(tree, context.dialect)  # (after: a subquery kept in place is the user's as written)
    # the query's own subqueries are tagged, not remembered by identity: sqlglot copies a subquery it moves into
    # a join, and the derived tables inside it with it (which a test of identity took for decorrelation's own:
    # `(SELECT count(*) FROM (SELECT ...) AS d)` lost d's lineage); meta travels with a copy
    for sub in tree.find_all(exp.Subquery):
        sub.meta[_WRITTEN] = True
    for quantified in tree.find_all(exp.Any, exp.All):
        quantified.meta[_QUANTIFIED_AT] = position(quantified)
    for written in tree.find_all(exp.Coalesce):
        written.meta[_WRITTEN] = True
    # a scalar's value tested (`(SELECT max(v) ...) IS NULL`) becomes `_u.c IS NULL`, the form of sqlglot's EXISTS
    # test: its SELECT is marked, so that the test reads as a value's (its rows witnesses), as the user wrote it
    for holder in _holders(tree):
        if isinstance(holder, exp.Subquery) and not isinstance(holder.parent, (exp.In, exp.Any, exp.All)):
            holder.this.meta[SCALAR_VALUE] = True
    try:
        tree = unnest_subqueries(tree)
    except SqlglotError as e:
        raise UnsupportedQuery(f"cannot decorrelate the query: {str(e).splitlines()[0]}") from None
    restore(tree)
    _reserve_lambda_variables(tree)
    # sqlglot reads a decorrelated COUNT as COALESCE(_u.c, 0) (0 over no rows): the subquery's value, not a
    # function of it -- its witnesses are decided where that COALESCE is used (witness_uses.value_use)
    for coalesce in tree.find_all(exp.Coalesce):
        if not coalesce.meta.pop(_WRITTEN, False):
            coalesce.meta[ZERO_FILL] = True
    _refuse_quantified_aggregates(tree)
    # sqlglot's rewrite aliases columns with the user's names unquoted (`ARRAY_AGG(x) AS a b`): quote the names
    # that need it, as qualification quoted the user's own
    quote_identifiers(tree, dialect=context.dialect, identify=False)
    for sub in tree.find_all(exp.Subquery):
        if not sub.meta.pop(_WRITTEN, False) and isinstance(sub.parent, (exp.Join, exp.From)):
            sub.meta[DECORRELATED] = True
    for placeholder in list(tree.find_all(exp.Anonymous)):
        if placeholder.name == _KEPT:
            placeholder.replace(kept[int(placeholder.expressions[0].name)])
    for wrapper in [n for n in tree.find_all(exp.Is) if n.meta.get(PIECE)]:
        wrapper.replace(wrapper.this)
    if lookups:  # (after the kept subqueries are back: a lookup kept in place is the user's again)
        raise_errors(tree, context.fns.raise_error, WRITTEN_AS,
                     context.fns.kept_in_place() if context.pinned_lookups else None)
    return tree


#: what a variable of sqlglot's lambdas (``ARRAY_ANY(_u.c, _x -> _x > t.b)``) is renamed to: a name in dltrace's
#: reserved namespace, which no user's table or column takes
LAMBDA_VARIABLE_PREFIX = "_dl_lambda"


def _reserve_lambda_variables(tree: exp.Expression) -> None:
    """Rename the variables of the lambdas sqlglot's decorrelation wrote into dltrace's namespace. sqlglot names
    them ``_x``, which a user may name a table or a column: the lambda then took the user's ``"_x"."b"`` for a field
    of its element (found by a probe). The user's identifiers are quoted by qualification by now and sqlglot's are
    not, which tells them apart."""
    for lam in tree.find_all(exp.Lambda):
        variables = {v.name for v in lam.expressions if isinstance(v, exp.Identifier) and not v.quoted}
        for ident in list(lam.find_all(exp.Identifier)):
            if ident.name in variables and not ident.quoted:
                ident.set("this", f"{LAMBDA_VARIABLE_PREFIX}{ident.name}")


def _name_subquery_items(tree: exp.Expression) -> None:
    """Alias each SELECT item without an alias that holds a subquery (``SELECT k, (SELECT ...) FROM t``), by the
    name it has (a bare subquery: its own alias, qualification's ``_col_<i>``) or as qualification names the
    others: decorrelation makes it an expression of joined columns, a ``MAX()`` or a CASE, and an item without
    a name dropped out of the query's list of columns (the engine's names then outnumbered it, and ``SELECT k,
    count(*), (SELECT max(u.c) FROM u WHERE u.a = t.k) FROM t GROUP BY k`` was refused as expanding an item).
    A result shows the engine's own name."""
    for select in tree.find_all(exp.Select):
        for i, item in enumerate(select.expressions):
            if not isinstance(item, exp.Alias) and item.find(exp.Query) is not None:
                name = item.output_name or f"_col_{i}"  # (qualification's name of a bare subquery is kept)
                bare = item.copy()
                if isinstance(bare, exp.Subquery):
                    bare.set("alias", None)  # (sqlglot writes a subquery's own alias, not an Alias around it)
                item.replace(exp.Alias(this=bare, alias=exp.to_identifier(name, quoted=True)))


def has_decorrelated(tree: exp.Expression) -> bool:
    """Does ``tree`` hold a subquery that decorrelation made a FROM/JOIN item? (The passes that act on those
    return a tree without one as it is, uncopied.)"""
    return any(sub.meta.get(DECORRELATED) for sub in tree.find_all(exp.Subquery))


def _has_clause_subquery(tree: exp.Expression) -> bool:
    """Is some query of ``tree`` written anywhere but as the query itself, a CTE, a set operation's side or a
    derived table of FROM/JOIN? (Conservative: anything else counts.)"""
    for select in tree.find_all(exp.Select):
        node = select
        while isinstance(node.parent, (exp.Subquery, exp.SetOperation)) and not (
            isinstance(node.parent, exp.Subquery) and isinstance(node.parent.parent, (exp.From, exp.Join))
        ):
            node = node.parent
        parent = node.parent
        if parent is None or isinstance(parent, exp.CTE):
            continue
        if isinstance(node, exp.Subquery) and isinstance(parent, (exp.From, exp.Join)):
            continue
        if isinstance(parent, exp.Subquery) and isinstance(parent.parent, (exp.From, exp.Join)):
            continue
        return True
    return False


_CONTROL_IN = "dl_control_in"  # meta of a correlated IN / = ANY under control semantics: kept in place (refused)


def _keep_in_place(tree: exp.Expression) -> list[exp.Expression]:
    """Swap every subquery sqlglot cannot decorrelate exactly for a placeholder; return them by number."""
    kept: list[exp.Expression] = []
    for holder in list(_holders(tree)):
        if holder.root() is not tree or (_safe_to_decorrelate(holder) and not holder.meta.get(LATE_WITNESS)):
            continue  # (inside a subquery kept already: stays in place with it)
        kept.append(holder)
        holder.replace(exp.Anonymous(this=_KEPT, expressions=[exp.Literal.number(len(kept) - 1)]))
    return kept


def _moves_a_kept_subquery(query: exp.Select) -> bool:
    """Does a test of ``query``'s WHERE that reads the outer query hold a subquery kept in place? sqlglot takes
    such a test for a correlation and moves its inner side into the list it aggregates per key, the kept
    subquery with it: ``t.s < ANY (SELECT ...)`` became ``ARRAY_AGG(ANY (SELECT ...))``, SQL no engine parses
    (found by the generator: an ANTI JOIN's ON); a kept scalar subquery moved so lost its lineage. Only the
    subqueries written in ``query`` itself count: one inside a subquery that is decorrelated first (sqlglot
    goes innermost first) goes with it into a join, and the test reads that join's column."""
    outer = {id(c) for c in outer_columns(query)}
    for test in conjuncts(query.args.get("where")) if outer else []:
        if any(id(c) in outer for c in test.find_all(exp.Column)) \
                and any(not _safe_to_decorrelate(nested) for nested in _holders(test)
                        if nested.find_ancestor(exp.Select) is query):
            return True
    return False


def _holders(tree: exp.Expression):
    """Subqueries written in a clause (not FROM items, not CTEs), outermost first."""
    for node in tree.walk():
        if isinstance(node, exp.Exists):
            yield node
        elif isinstance(node, exp.All) and isinstance(node.this, exp.Query):
            yield node
        elif isinstance(node, exp.Subquery) and in_a_clause(node):
            if isinstance(node.this, exp.Query) and not isinstance(node.parent, exp.All):
                yield node


def _negated_exists(tree: exp.Expression) -> list[exp.Exists]:
    """The correlated EXISTS written negated (an odd number of NOTs, IS NULL, = FALSE) in the WHERE of a SELECT
    that is no clause's subquery itself: one inside a subquery that is decorrelated would stay inside it, and
    one in a test that reads the query around that subquery would keep it from being decorrelated
    (:func:`_moves_a_kept_subquery`), a query refused that is not refused now."""
    found = []
    for holder in tree.find_all(exp.Exists):
        select = holder.find_ancestor(exp.Select)
        if select is not None and enclosing_clause(holder, select) == "where" and is_correlated(holder.this) \
                and negated(holder, select) and not _in_a_clause_subquery(select):
            found.append(holder)
    return found


def _uncorrelated_scalars(tree: exp.Expression) -> list[exp.Subquery]:
    """The uncorrelated scalar subqueries compared (``x op (S)``) in the WHERE, HAVING or SELECT list of a SELECT
    that is no clause's subquery itself, with no subquery of their own in a clause, calling nothing another
    statement may evaluate otherwise -- where they have the same lineage in place as decorrelated:
    - not inside a clause's subquery (as for :func:`_negated_exists`: kept there, one could keep the subquery
      around it from being decorrelated), nor holding one (a correlated one inside stays correlated when its
      holder is kept);
    - a comparison, where both forms give the same witnesses (only where it is TRUE, below a top-level
      conjunct); its value tested otherwise (``(S) IS NULL``) is a value of the kept form, a test of the
      decorrelated one;
    - no random draw or clock in it or a CTE it reads: decorrelated, its value and its lineage are one
      evaluation, the cross join's; a subquery in a clause has its lineage computed apart."""
    found = []
    for holder in _holders(tree):
        if not (isinstance(holder, exp.Subquery) and subquery_kind(holder)[0] == "scalar"):
            continue
        select = holder.find_ancestor(exp.Select)
        use = holder
        while isinstance(use.parent, exp.Paren):
            use = use.parent
        if isinstance(use.parent, exp.Binary) and use.parent.key in COMPARISONS and select is not None \
                and enclosing_clause(holder, select) in ("where", "having", "expressions") \
                and not is_correlated(holder.this) and not _in_a_clause_subquery(holder) \
                and next(_holders(holder.this), None) is None and differs_in_another_statement(holder.this) is None:
            found.append(holder)
    return found


def _in_a_clause_subquery(node: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, (exp.Exists, exp.All)) or isinstance(parent, exp.Subquery) and in_a_clause(parent):
            return True
        parent = parent.parent
    return False


def _safe_to_decorrelate(holder: exp.Expression) -> bool:
    if holder.meta.get(NO_WITNESSES) or holder.meta.get(SCALAR_IN_PLACE) or holder.meta.get(COVERED_WITNESSES) \
            or holder.meta.get(_CONTROL_IN):
        return False  # (read also for a subquery around it: sqlglot would move this one with its correlation)
    if holder.this.meta.get(COARSE):
        return False  # its groups may join an outer row several times (passes/coarse_keys.py)
    query = holder.this
    kind, predicate, comparison = subquery_kind(holder)
    correlated = is_correlated(query)
    if correlated and reaches_past_itself(query):
        return False  # a nested subquery reads the outer query: decorrelating this one would cut it off
    if returns_rows_per_row(query):
        return False  # sqlglot reads its FROM's rows (an unnest of an empty list gives none) and groups by the call
    if correlated and isinstance(query, exp.Select) and outer_only_tests(query):
        return False  # a test of the outer row alone, not taken out (decorrelatable.hoist_outer_tests): sqlglot reads
        # it as a correlation (`t.k IS _x`, a GROUP BY of a literal)
    if correlated and isinstance(query, exp.Select) and _moves_a_kept_subquery(query):
        return False
    if kind == "exists":
        return correlated
    if kind in ("in", "any"):
        # sqlglot groups the subquery by its value: not a window function's value, nor rows a QUALIFY keeps (both
        # computed after the grouping, over one row per value)
        windowed = isinstance(query, exp.Select) and (
            any(e.find(exp.Window) for e in query.expressions) or query.args.get("qualify") is not None)
        return comparison == "=" and positive_filter(predicate) and not windowed
    if kind == "all":
        return False
    if _in_a_global_aggregate_row(holder):
        return False  # sqlglot reads its cross-joined value through MAX(): NULL when no input row reaches it
    if not correlated and _windows_taken_for_aggregates(holder):
        return False
    return one_value(query, correlated)


def _windows_taken_for_aggregates(holder: exp.Expression) -> bool:
    """Is ``holder`` in the SELECT list of a SELECT that does not aggregate but calls an aggregate in a window
    (``rank() OVER (...)``, ``sum(v) OVER ()``)? sqlglot takes that SELECT for an aggregation and reads an
    uncorrelated scalar subquery cross joined into it through MAX(), which the engine refuses (a column outside
    GROUP BY; found by the long profile: `aggregate_expression` + `window`)."""
    select = holder.find_ancestor(exp.Select)
    return select is not None and enclosing_clause(holder, select) == "expressions" and not is_aggregate(select) \
        and any(find_in_scope(p, exp.AggFunc) for p in select.expressions)


def _in_a_global_aggregate_row(holder: exp.Expression) -> bool:
    """Is ``holder`` in the SELECT list or HAVING of an aggregation without GROUP BY (one row, even over no
    input rows)?"""
    select = holder.find_ancestor(exp.Select)
    return select is not None and global_aggregate_row(select, enclosing_clause(holder, select))


def _remember_predicate_subqueries(tree: exp.Expression) -> None:
    """Keep a copy of each uncorrelated subquery of a SELECT's WHERE, HAVING or aggregate FILTER on the SELECT,
    marked with the clause whose rows its control lineage goes to (``meta[PREDICATE_CLAUSE]``): a HAVING's to
    the output row itself (a global aggregate over zero rows has one: it lost the lineage, as its input rows
    have none), a WHERE's and a FILTER's to each input row (sqlglot decorrelates a FILTER's IN as a WHERE's,
    whose copy control lineage did not keep: it gave the witnesses alone), and so is a HAVING's inside an
    aggregate's argument (``HAVING bool_and(x IN (...))``): evaluated per input row, it gives a global
    aggregate over zero rows nothing (the copy is detached: where it stood is known only here)."""
    for scope in traverse_scope(tree):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        copies = []
        for sub_scope in scope.subquery_scopes:
            node = sub_scope.expression
            clause = enclosing_clause(node, select)
            if sub_scope.is_correlated_subquery or (clause not in ("where", "having")
                                                    and not _in_an_aggregate_filter(node, select)):
                continue
            holder = node.parent if isinstance(node.parent, exp.Subquery) else node
            per_group = clause == "having" and not in_aggregate_argument(holder, select)
            copy = node.copy()
            copy.meta[PREDICATE_CLAUSE] = "having" if per_group else "where"
            copies.append(copy)
        if copies:
            select.meta[PREDICATE_SUBQUERIES] = KeptCopies(copies)


class KeptCopies(tuple):
    """The copies of a SELECT's predicate subqueries (``meta[PREDICATE_SUBQUERIES]``), shared by every copy of the
    tree rather than copied with it: each copy holds, on its own SELECTs, the copies of the subqueries inside it, so
    copying them with the tree grew with the nesting (a WHERE IN within an IN ... 13 deep took 18 s and 600 MB to
    rewrite: a review). Never changed in place: a reader copies one before changing it."""

    def __deepcopy__(self, memo: dict) -> KeptCopies:
        return self


def _in_an_aggregate_filter(node: exp.Expression, select: exp.Select) -> bool:
    """Is ``node`` inside the FILTER (WHERE ...) of an aggregate of ``select`` (not of a nested query)?"""
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, exp.Where) and isinstance(parent.parent, exp.Filter):
            return True
        parent = parent.parent
    return False
