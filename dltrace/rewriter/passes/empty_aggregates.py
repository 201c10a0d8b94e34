"""What an aggregate gives over no rows, on each engine, and the correlated scalar subqueries of those aggregates
handed to sqlglot's decorrelation.

sqlglot decorrelates ``(SELECT agg(x) FROM u WHERE u.k = t.k)`` into ``LEFT JOIN (SELECT agg(x) AS c, u.k FROM u
GROUP BY u.k) AS _u ON _u.k = t.k``, read as ``_u.c``. For an outer row no row of ``u`` matches (no group, a NULL
key, an empty ``u``) the join gives NULL, which is the subquery's value only when ``agg`` over no rows is NULL;
sqlglot 30.30 therefore takes COUNT, SUM, AVG, MIN and MAX alone (bare), and reads COUNT through
``COALESCE(_u.c, 0)``. Every other aggregate was refused ("could not be decorrelated"), though its value over no
rows is as well known: NULL for most (``string_agg``, ``list`` on DuckDB, ``bool_or``, ``arg_max``, ``median``,
``stddev`` ...), 0 for the counts (``approx_count_distinct``, ``regr_count``, ``count_if`` on Spark), an empty
array for Spark's ``collect_list`` / ``collect_set``.

:func:`stand_in` writes each such aggregate call, while sqlglot runs, inside a ``MAX()`` (its value over no rows
NULL) or a ``COUNT()`` (not NULL: sqlglot reads it through ``COALESCE(_u.c, 0)``), the forms sqlglot takes;
:func:`restore` then puts the user's call back and, for a value other than 0, writes that value into the
COALESCE. Valid because only the projection's class decides what sqlglot writes (it moves the call into the
grouped subquery unread), and:

- per group (at least one row of the subquery for that outer row) the call is computed over the same rows as the
  user's subquery: the group's rows are those its WHERE keeps for the key, a FILTER, DISTINCT or an ORDER BY
  inside the call reading them as the engine reads them in place;
- where no group joins, the LEFT JOIN gives NULL, and the COALESCE the value over no rows: the subquery's own.
  A COALESCE is written only for an aggregate that is never NULL over rows (a count, Spark's arrays: checked on
  both engines over rows of NULLs), so it changes no joined value; a FILTER that keeps none of a group's rows
  gives the value over no rows too.

The values over no rows are the engines' own, each checked on DuckDB 2.0.1 and Spark 4
(``tests/test_empty_aggregates.py``: over no rows, and over rows of NULLs for a value filled through COALESCE);
they differ between the two (``count_if``: NULL on DuckDB, 0 on Spark; ``list`` / ``array_agg``: NULL on DuckDB,
``[]`` on Spark), and the engine's own dialect decides (the SQL it runs). An aggregate not listed -- a sketch
whose value over no rows is a binary state (Spark's ``count_min_sketch``, ``hll_sketch_agg``), one sqlglot does
not write back as the engine reads it (DuckDB's ``approx_top_k``) -- is refused by name (:func:`refuse_unknown`).
(A function dltrace does not know as an aggregate, a user's macro or UDAF, is no aggregate to the rewriter: the
subquery reads as a lookup of a value, whose ``MAX()`` the engine refuses as a nested aggregate.) Lineage is
unchanged by the stand-in: the grouped subquery's rows are the subquery's rows for the outer row, its witnesses
as for a COUNT.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.engines import aggregates_over_no_rows
from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.correlation import in_a_clause, is_correlated, subquery_kind
from dltrace.rewriter.shape import ungrouped

#: meta key of the MAX() / COUNT() written around an aggregate call while sqlglot decorrelates: its value over no
#: rows ("null": the LEFT JOIN's own; "zero": sqlglot's COALESCE; "empty_array": written into that COALESCE)
STAND_IN = "dl_stand_in"

_NULL, _ZERO, _EMPTY_ARRAY = "null", "zero", "empty_array"  # (the values the engines state, lineage_sql.py)

# the aggregates sqlglot decorrelates as they are (30.30's _is_supported_scalar_aggregate)
SQLGLOT_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)

# what may stand around an aggregate call and still make it one call: its FILTER, IGNORE / RESPECT NULLS, Spark's
# WITHIN GROUP (ORDER BY ...)
_WRAPPERS = (exp.Filter, exp.IgnoreNulls, exp.RespectNulls, exp.WithinGroup)


def aggregate_call(node: exp.Expression) -> exp.AggFunc | None:
    """The aggregate ``node`` calls when it is one aggregate call (through its wrappers and parentheses), else
    None."""
    node = node.unnest()
    while isinstance(node, _WRAPPERS):
        node = node.this
    return node if isinstance(node, exp.AggFunc) else None


def aggregate_calls(value: exp.Expression) -> list[exp.Expression]:
    """The aggregate calls of ``value``, each with its wrappers (``count(*) FILTER (WHERE p)`` whole), outermost
    first."""
    calls = []
    for call in value.find_all(exp.AggFunc):
        while isinstance(call.parent, _WRAPPERS) and call.arg_key == "this":
            call = call.parent
        calls.append(call)
    return calls


def over_no_rows(call: exp.AggFunc, dialect: str) -> str | None:
    """The value of ``call`` over no rows on the engine whose dialect is ``dialect``: "null", "zero",
    "empty_array", or None when dltrace does not know it (the engine states its values:
    ``LineageFunctions.empty_by_class`` / ``empty_by_name``)."""
    by_class, by_name = aggregates_over_no_rows(dialect)
    if type(call) is exp.AnonymousAggFunc:
        return by_name.get(call.name.lower())
    return by_class.get(type(call))


def known_call(node: exp.Expression, dialect: str) -> bool:
    """Is ``node`` one aggregate call whose value over no rows dltrace knows on this engine, with no query or
    window inside (decorrelated as its own subquery: one piece of a split)?"""
    call = aggregate_call(node)
    return call is not None and over_no_rows(call, dialect) is not None \
        and node.find(exp.Query, exp.Window) is None and all(a is call for a in node.find_all(exp.AggFunc))


def stands_in(value: exp.Expression, dialect: str) -> bool:
    """Is ``value`` (a correlated scalar subquery's projection) one known aggregate call that sqlglot does not take
    as it is (written through :func:`stand_in`)?"""
    return not isinstance(value.unnest(), SQLGLOT_AGGREGATES) and known_call(value, dialect)


def _scalar_aggregates(tree: exp.Expression):
    """(subquery, its projection's value) of each correlated scalar subquery in a clause that aggregates its rows
    into one value (no GROUP BY, HAVING, QUALIFY, DISTINCT or windows: one row per outer row)."""
    for sub in list(tree.find_all(exp.Subquery)):
        query = sub.this
        if not in_a_clause(sub) or subquery_kind(sub)[0] != "scalar" or not isinstance(query, exp.Select):
            continue
        if isinstance(sub.parent, (exp.In, exp.Any, exp.All)) or len(query.expressions) != 1:
            continue
        if not ungrouped(query) or any(query.args.get(k) for k in ("distinct", "windows")):
            continue
        if is_correlated(query):
            yield sub, query.expressions[0]


def refuse_unknown(tree: exp.Expression, dialect: str, written_as: str) -> None:
    """Refuse, naming it, a correlated scalar subquery whose one aggregate call has no value over no rows dltrace
    knows on this engine: no decorrelation of it would be exact. (Called on what is left for sqlglot: a subquery
    sqlglot would not take either way was refused before, without the name.)"""
    for sub, item in _scalar_aggregates(tree):
        value = item.unalias()
        if value.find(exp.Query, exp.Window) is not None:
            continue  # (not an aggregate of the subquery's own rows alone: refused, if at all, as before)
        for call in aggregate_calls(value):
            base = aggregate_call(call)
            if over_no_rows(base, dialect) is not None:
                continue
            written = sub.meta.get(written_as, sub)
            raise UnsupportedQuery(
                f"a correlated subquery that could not be decorrelated (SCALAR over {_name(base)}, whose value "
                f"over no rows dltrace does not know on {dialect}), at {position(written)}")


def stand_in(tree: exp.Expression, dialect: str) -> None:
    """Write, in place, each correlated scalar subquery's one known aggregate call (:func:`stands_in`) inside the
    MAX() or COUNT() sqlglot decorrelates, marked ``meta[STAND_IN]`` (the module docstring says why that is
    valid)."""
    for _, item in _scalar_aggregates(tree):
        value = item.unalias()
        if not stands_in(value, dialect):
            continue
        empty = over_no_rows(aggregate_call(value), dialect)
        wrapper = (exp.Max if empty == _NULL else exp.Count)(this=value.copy())
        wrapper.meta[STAND_IN] = empty
        value.replace(wrapper)


def restore(tree: exp.Expression) -> None:
    """After sqlglot ran: put each stand-in's call back, and write the value over no rows of one that is not 0 (an
    empty array) into the COALESCE sqlglot reads its joined column through."""
    for wrapper in [n for n in tree.find_all(exp.Max, exp.Count) if STAND_IN in n.meta]:
        fills = _fills_of(wrapper)
        if wrapper.meta[STAND_IN] == _EMPTY_ARRAY and fills is not None:
            if not fills:  # (sqlglot reads a COUNT through its COALESCE; without one the value would be NULL)
                raise UnsupportedQuery(f"a correlated subquery over {_name(aggregate_call(wrapper.this))} read "
                                       f"otherwise than dltrace fills its value over no rows, at "
                                       f"{position(wrapper.this)}")
            for fill in fills:
                fill.set("expressions", [exp.Array(expressions=[])])
        wrapper.replace(wrapper.this)


def _name(call: exp.AggFunc) -> str:
    """The aggregate's name as a refusal writes it (``APPROX_TOP_K``, ``COUNT_MIN_SKETCH``)."""
    return (call.name if type(call) is exp.AnonymousAggFunc else call.sql_name()).upper()


def _fills_of(wrapper: exp.Expression) -> list[exp.Coalesce] | None:
    """The ``COALESCE(_u.c, 0)`` nodes reading the column ``c`` that ``wrapper`` is the projection of, in the
    SELECT whose join item ``_u`` is the grouped subquery holding it; None when it was not decorrelated."""
    item = wrapper.parent
    select = item.parent if isinstance(item, exp.Alias) else None
    holder = select.parent if isinstance(select, exp.Select) else None
    if not isinstance(holder, exp.Subquery) or not isinstance(holder.parent, exp.Join):
        return None
    outer, alias, name = holder.parent.parent, holder.alias_or_name, item.alias_or_name
    return [c for c in outer.find_all(exp.Coalesce)
            if isinstance(c.this, exp.Column) and c.this.table == alias and c.this.name == name
            and len(c.expressions) == 1 and isinstance(c.expressions[0], exp.Literal)]
