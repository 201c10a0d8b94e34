"""Window functions whose value depends on how the engine orders rows that tie: backward tracing refuses them where
rows do tie.

Backward tracing evaluates the query more than once: once for its output rows, then in reverse queries that find
each row's inputs by its values. ``row_number()`` over rows that tie in its ORDER BY (or with none), ``lag``,
``lead``, ``first_value`` ..., a ROWS frame, or an aggregate whose value follows the order it reads its rows in
(``list``, ``string_agg``, ``first`` ...) give values that depend on the engine's choice among tied rows, which
each evaluation makes anew (DuckDB's parallel plans do: a new user's ``ROW_NUMBER() ... = 1`` dedupe over 300k
rows found no input for most rows, silently). Where no two rows of a partition tie in the window's ORDER BY, every
evaluation gives each row the same value, and tracing is exact: so each such window is probed, once per trace, for
a tie among its input rows (the rows its SELECT reads, after WHERE, GROUP BY and HAVING), and refused where one is
found. A window that ranks (``rank``, ``dense_rank``, ...) or aggregates over whole runs of peers (the default
RANGE frame) gives tied rows equal values: never refused. Forward lineage (``run``) reads all of them: it computes
lineage in the same evaluation as the values.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.correlation import is_correlated
from dltrace.rewriter.passes.key_types import typed_twins

# ranks: tied rows get one value, whatever order the engine reads them in
_PEER_FUNCTIONS = (exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist)
_RANK_NAMES = {"rank", "dense_rank", "percent_rank", "cume_dist"}
# a row's number, or another row's value: which row, among tied ones, is the engine's choice
_ROW_FUNCTIONS = (exp.RowNumber, exp.Ntile, exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue)
# aggregates whose value follows the order they read their rows in (or, for mode, which of equally frequent values
# comes first; an approximate quantile's sketch, the order it was fed)
_ORDERED_AGGREGATES = (exp.ArrayAgg, exp.GroupConcat, exp.First, exp.Last, exp.AnyValue, exp.ArgMax, exp.ArgMin,
                       exp.Mode, exp.ApproxQuantile)
_ORDERED_NAMES = {"list", "array_agg", "string_agg", "listagg", "group_concat", "collect_list", "first", "last",
                  "any_value", "arbitrary", "arg_max", "arg_min", "max_by", "min_by", "argmax", "argmin",
                  "histogram", "json_group_array", "json_agg", "mode", "approx_quantile", "reservoir_quantile",
                  "approx_top_k", "approx_percentile", "percentile_approx"}
# a floating-point sum depends on the order of its terms in its last bits, which a comparison of values sees
_FLOATS = {exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE}


def tie_keys(window: exp.Window, floats: bool = False) -> list[list[exp.Expression]]:
    """The lists of keys (expressions of ``window``'s input rows) within whose equal values the engine's order of
    rows decides ``window``'s value: two rows equal in one list make it depend on that order. Empty: a value tied
    rows share (a rank; an aggregate over whole runs of peers). ``floats``: its argument is floating point."""
    function = _called(window)
    partition = list(window.args.get("partition_by") or [])
    order = window.args.get("order")
    peers = partition + [o.this for o in (order.expressions if order is not None else [])]
    spec = window.args.get("spec")
    rows_frame = spec is not None and str(spec.args.get("kind") or "").upper() == "ROWS"
    name = function.name.lower() if isinstance(function, exp.Anonymous) else ""
    if isinstance(function, _PEER_FUNCTIONS) or name in _RANK_NAMES:
        return []
    if isinstance(function, _ROW_FUNCTIONS) or isinstance(function, exp.Anonymous) and name not in _ORDERED_NAMES:
        return [peers]  # (a function sqlglot does not know may number or offset rows, as ntile does)
    own = function.find(exp.Order)  # string_agg(x ORDER BY y): it reads the frame's rows in its own order
    if isinstance(function, _ORDERED_AGGREGATES) or name in _ORDERED_NAMES or floats:
        read_in = [peers] if own is None else [partition + [o.this for o in own.expressions]]
        return read_in + ([peers] if rows_frame and own is not None else [])
    return [peers] if rows_frame else []


def check_window_ties(tree: exp.Expression, run: Callable[[exp.Expression], int], schema: dict | None = None,
                      dialect: str = "duckdb") -> None:
    """Raise :class:`UnsupportedQuery` for a tie-sensitive window of ``tree`` (its normalised form) whose input
    rows tie in its ORDER BY within a partition; ``run`` counts the rows of a probe query."""
    windows = [w for w in tree.find_all(exp.Window) if w.arg_key != "windows"]  # (a named window's definition)
    if not windows:
        return
    twins: dict | None = None  # (sqlglot's types, taken once and only for an aggregate's argument)
    for call in windows:
        select = call.find_ancestor(exp.Select)
        if select is None:
            continue
        window = _resolved(call, select)
        function = _called(call)
        floats = False
        if isinstance(function, exp.AggFunc) and isinstance(function.this, exp.Expression) and schema is not None:
            if twins is None:
                twins = typed_twins(tree, schema, dialect) or {}
            typed = twins.get(id(function.this))  # (what it sums)
            floats = typed is not None and typed.type is not None and typed.type.this in _FLOATS
        for keys in tie_keys(window, floats):
            what = f"backward tracing of {window.this.sql(dialect)} OVER ({_spec_sql(window, dialect)})"
            if is_correlated(select):
                raise UnsupportedQuery(f"{what} in a correlated subquery is not supported (its value depends on the "
                                       f"order the engine reads tied rows in, which tracing cannot check there), at "
                                       f"{position(call)}: forward lineage (run) reads it")
            if run(_tie_probe(select, keys)):
                raise UnsupportedQuery(f"{what} over rows that tie in its ORDER BY is not supported: two rows of "
                                       f"one partition compare equal, and the engine orders them anew in each "
                                       f"evaluation (tracing evaluates the query again), at {position(call)}; order "
                                       f"by columns that tell the rows apart, or use forward lineage (run), which "
                                       f"reads it")


def _called(window: exp.Window) -> exp.Expression:
    """The function ``window`` calls, through IGNORE / RESPECT NULLS and FILTER."""
    function = window.this
    while isinstance(function, (exp.IgnoreNulls, exp.RespectNulls, exp.Filter)):
        function = function.this
    return function


def _resolved(call: exp.Window, select: exp.Select) -> exp.Window:
    """``call`` with the partition, order and frame of the named window it reads (``OVER w``, ``OVER (w ORDER BY
    d)``: its own clauses first)."""
    name = call.args.get("alias")
    named = {d.name.lower(): d for d in select.args.get("windows") or []}
    if name is None or name.name.lower() not in named:
        return call
    window, definition = call.copy(), named[name.name.lower()]
    for key in ("partition_by", "order", "spec"):
        if not window.args.get(key) and definition.args.get(key):
            window.set(key, definition.args[key].copy() if key != "partition_by"
                       else [p.copy() for p in definition.args[key]])
    return window


def _spec_sql(window: exp.Window, dialect: str) -> str:
    parts = []
    if window.args.get("partition_by"):
        parts.append("PARTITION BY " + ", ".join(p.sql(dialect) for p in window.args["partition_by"]))
    if window.args.get("order"):
        parts.append(window.args["order"].sql(dialect).strip())
    if window.args.get("spec"):  # (the frame: ROWS ... is what makes the tie matter; a review found it left out)
        parts.append(window.args["spec"].sql(dialect).strip())
    return " ".join(parts)


def _tie_probe(select: exp.Select, keys: list[exp.Expression]) -> exp.Select:
    """``SELECT 1`` where two input rows of ``select`` have the same values of ``keys`` (NULLs equal, as peers are):
    ``select`` itself, its items replaced by those values, without what comes after its windows (QUALIFY,
    DISTINCT, ORDER BY, LIMIT), and the CTEs of the queries around it."""
    keys = [k.copy() for k in keys]
    probe = select.copy()
    for k in ("qualify", "distinct", "order", "limit", "offset", "fetch", "with_"):
        probe.set(k, None)
    names = [f"_dl_t{j}" for j in range(len(keys))]
    probe.set("expressions", [exp.alias_(k, n, quoted=True) for k, n in zip(keys, names)] or
              [exp.alias_(exp.Literal.number(1), "_dl_t", quoted=True)])
    counted = exp.select(exp.Literal.number(1)).from_(
        exp.Subquery(this=probe, alias=exp.TableAlias(this=exp.to_identifier("_dl_tie", quoted=True))))
    grouped = [exp.column(n, "_dl_tie", quoted=True) for n in names]
    if grouped:
        counted = counted.group_by(*grouped)
    counted = counted.having(exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1))).limit(1)
    ctes = [cte.copy() for w in _enclosing_withs(select) for cte in w.expressions]
    if ctes:
        counted.set("with_", exp.With(expressions=ctes))
    return counted


def _enclosing_withs(node: exp.Expression) -> list[exp.With]:
    """The WITH clauses whose CTEs ``node`` may read: of itself and of every query around it, outermost first."""
    out = []
    while node is not None:
        if isinstance(node, exp.Query) and node.args.get("with_") is not None:
            out.append(node.args["with_"])
        node = node.parent
    return list(reversed(out))
