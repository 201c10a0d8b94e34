"""The SQL that builds lineage sets, as sqlglot expressions: the builders every engine shares.

Strategy "set": native arrays of BIGINT, sorted and distinct. Strategy "bitmap": portable roaring bitmaps
built by the engine's dl_bitmap_* functions (the codec is :mod:`dltrace.udafs.bitmap`); on DuckDB only in the
final columns, from plain id lists that carry the lineage inside the query (:attr:`LineageFunctions.lists_inside`).
On an engine whose :attr:`LineageFunctions.builds_bitmaps` is false the SQL is the set strategy's and the
driver encodes the sets as portable roaring bitmaps when the result is read (``run_forward``). Every
builder returns an expression; NULL parts mean "contributes nothing" (the null-padded side of an outer join)
and are ignored by every union.

This module knows no engine: each engine subclasses :class:`LineageFunctions` next to its adapter
(:mod:`dltrace.engines.duckdb_sql`, :mod:`dltrace.engines.spark_sql`) with its own array, aggregate and
lambda functions; :func:`dltrace.engines.lineage_functions` picks the subclass by dialect name, so the
rewriter runs with no engine at all.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from sqlglot import exp

from dltrace.errors import UnknownChoice

STRATEGIES = ("set", "bitmap")
BITS64 = 2**32  # tables with at least this many rows need 64-bit bitmaps
EMPTY_BITMAP32 = "3A30000000000000"  # portable serialisation of the empty 32-bit roaring bitmap
EMPTY_BITMAP64 = "0000000000000000"  # ... and of the empty 64-bit one
_STORED = "dl_bitmap_to_list"  # a stored bitmap's ids, as lineage inside a query whose lineage travels as lists

# sqlglot Expression class -> generator function (self, expression) -> SQL text
GeneratorTransforms = dict[type[exp.Expression], Callable[[Any, Any], str]]


def is_bitmap_build(node: exp.Expression) -> bool:
    """Is ``node`` a call of the bitmap build (32- or 64-bit) on one id list?"""
    return isinstance(node, exp.Anonymous) and node.name.lower() in ("dl_bitmap_build", "dl_bitmap_build64") \
        and len(node.expressions) == 1


def call(name: str, *args: exp.Expression) -> exp.Expression:
    """A call of the SQL function ``name``, generated as written whatever the dialect."""
    return exp.Anonymous(this=name, expressions=list(args))


def lam(body: exp.Expression, var: str = "_dl_x") -> exp.Lambda:
    """The one-parameter lambda ``var -> body``."""
    return exp.Lambda(this=body, expressions=[exp.to_identifier(var)])


class LineageFunctions:
    """Builders of lineage SQL for one engine and strategy; ``wide`` says a table needs 64-bit bitmaps.

    Each engine's subclass sets the class attributes below and implements the engine primitives.
    """

    #: the sqlglot dialects this engine's SQL is written for; the first is the engine's own
    dialects: ClassVar[tuple[str, ...]] = ()
    # the engine's aggregate functions sqlglot does not know (it parses them as plain functions): a query that
    # calls one aggregates, which the rewriter must know to build DLUNION instead of per-row lineage
    aggregate_functions: ClassVar[frozenset[str]] = frozenset()
    #: the aggregates the lineage SQL itself calls by a name sqlglot reads as a plain call (DuckDB's ``list``)
    lineage_aggregates: ClassVar[frozenset[str]] = frozenset()
    #: transforms added to sqlglot's generator of the engine's own dialect, for functions sqlglot does not
    #: transpile there
    generator_transforms: ClassVar[GeneratorTransforms] = {}
    #: how the engine escapes a character inside a string literal, where sqlglot's dialect reads it otherwise
    #: (None: as sqlglot reads it)
    string_escapes: ClassVar[tuple[str, ...] | None] = None
    # does the engine name a bare column of the SELECT list as the query writes it (`SELECT DEPTID` gives
    # DEPTID), or as its table stores it (deptId)?
    names_columns_as_written: ClassVar[bool] = False
    # an aggregate's value over no rows on this engine ("null", "zero" or "empty_array"), by sqlglot class and, for
    # the engine's aggregates sqlglot does not know (``aggregate_functions``), by name: what a decorrelated scalar
    # subquery gives an outer row without rows (rewriter/passes/empty_aggregates.py)
    empty_by_class: ClassVar[dict[type, str]] = {}
    empty_by_name: ClassVar[dict[str, str]] = {}
    set_type: ClassVar[str] = ""  # the type of a "set" lineage value, in the engine's dialect
    bitmap_type: ClassVar[str] = ""  # ... and of a "bitmap" one
    from_hex: ClassVar[str] = ""  # the function turning hex text into a binary value
    #: the "bitmap" strategy builds bitmaps only in a query's final lineage columns: inside the query lineage
    #: travels as plain arrays of ids (unsorted, duplicates allowed), which the engine's native ``list``
    #: aggregate and ``flatten`` build and union far faster than a UDF call per group; the final build sorts
    #: and deduplicates. (Exact: a lineage set is the *set* of ids a row's inputs carry, whatever the
    #: multiplicities and order inside.)
    bitmaps_at_output: ClassVar[bool] = False
    #: the engine joins on a plain ``=`` far faster than on ``IS NOT DISTINCT FROM`` or through an outer join,
    #: so the rules that find a group's rows again read them through inner equality joins
    #: (:mod:`dltrace.rewriter.rules.inner_equi_joins`)
    only_inner_equi_joins_fast: ClassVar[bool] = False
    #: the engine joins on ``=`` of one integer key through an array indexed by the key when the build side's keys
    #: span at most this many values (by its statistics), through a hash table otherwise: a rule that joins groups
    #: to their rows again splits a wider key range into spans of this size (0: no such join;
    #: :func:`dltrace.rewriter.rules.inner_equi_joins.within_spans`)
    perfect_join_span: ClassVar[int] = 0
    #: the engine computes a ``WITH x AS MATERIALIZED (...)`` once for all its reads: a rule that reads the same
    #: derived table several times writes it once (:mod:`dltrace.rewriter.rules.nested_lineage`)
    materialized_ctes: ClassVar[bool] = False
    #: a session may store a one-row query as a temporary table before the query runs and drop it after
    #: (:meth:`Engine.materialize`): an uncorrelated scalar subquery's value and lineage are then one evaluation,
    #: read by the query and by its shared lineage (:func:`dltrace.rewriter.rules.subqueries.hoist`)
    shared_preludes: ClassVar[bool] = False
    #: the engine's list aggregate costs per element, not per byte: a reader that finishes the final lists takes
    #: several tables' row ids packed into one BIGINT list (:mod:`dltrace.rewriter.passes.pack_ids`)
    packs_ids: ClassVar[bool] = False
    #: the engine's ``bitstring_agg(x, min, max)`` (one bit per id of the range, OR-ed across threads): a reader that
    #: finishes the final lists takes a few large groups' ids as bit strings (:mod:`dltrace.rewriter.passes.dense_ids`)
    dense_lists: ClassVar[bool] = False
    #: the engine's function that raises an error with a message when evaluated (a scalar lookup that finds
    #: several rows raises through it: :mod:`dltrace.rewriter.passes.scalar_lookups`); "" for none
    error_function: ClassVar[str] = ""
    #: the engine raises "more than one row" for every row that reaches a correlated scalar lookup's SELECT,
    #: whether or not its value is read (DuckDB: in a SELECT item no query reads, in a CASE branch not taken,
    #: in an EXISTS's SELECT list); false: only where its optimizer keeps the lookup (Spark prunes an item no
    #: query reads) (:func:`dltrace.rewriter.passes.scalar_lookups.guard_lineage`)
    checks_unread_lookups: ClassVar[bool] = False
    #: ``IS NOT DISTINCT FROM`` compares two MAP values: the rules that find a group's rows again by its keys
    #: take MAP keys (Spark groups by maps and compares none: those rules then leave such a group's lineage to
    #: its DLUNION; :func:`dltrace.rewriter.passes.key_types.may_hold_maps`)
    compares_maps: ClassVar[bool] = True
    #: ``GROUP BY ALL`` groups by the SELECT items that read no column too (a constant: no row over no rows);
    #: false: only by those that read a column (one row over no rows, as a global aggregate)
    #: (:mod:`dltrace.rewriter.passes.group_by_all`)
    group_by_all_groups_constants: ClassVar[bool] = False
    #: the engine binds a bare ORDER BY name that several output columns have by a rule dltrace follows: in a
    #: SELECT the last item the query aliased so (the input column when none is), in a set operation the first
    #: column of the name; false: such a query is refused (:mod:`dltrace.rewriter.passes.order_by`)
    binds_repeated_order_by_names: ClassVar[bool] = False
    #: ``x IN ((SELECT c ...))`` is a list of one scalar subquery (it raises on two rows; NOT IN over no row is
    #: NULL), not ``x IN (SELECT c ...)`` (:mod:`dltrace.rewriter.passes.redundant_parentheses`)
    reads_in_of_a_parenthesised_query_as_a_list: ClassVar[bool] = False
    #: ``ORDER BY grouping(x)`` (or ``grouping_id(x, ...)``) runs once the SELECT item of ``x`` has an alias, as
    #: dltrace's names every item; false (Spark: ``GROUPING_COLUMN_MISMATCH``, the alias taken for ``x``): such a
    #: key is written as the position of a SELECT item that is the same call, else refused
    #: (:mod:`dltrace.rewriter.passes.order_by`)
    orders_by_grouping_of_aliased_columns: ClassVar[bool] = True
    #: a bare name inside an ORDER BY expression (``ORDER BY -v``) reads the input column of that name before an
    #: output alias; false: the alias first
    order_by_expressions_read_columns: ClassVar[bool] = False
    #: the separator the engine's ``string_agg`` / ``listagg`` puts between values when the query gives none
    #: (sqlglot leaves it unset and writes ',' in every dialect)
    string_agg_separator: ClassVar[str] = ","
    #: ``x IN (subquery)`` / ``x op ANY|ALL (subquery)`` compares both sides cast to their common supertype, which
    #: for two DECIMALs whose digits together pass 38 keeps the integer digits and drops scale, where ``x = y``
    #: keeps the scale (DuckDB's binder: ``TryGetMaxLogicalType`` against the comparison's own rule): a rewrite
    #: that writes the IN as a comparison casts both sides first (:mod:`dltrace.rewriter.passes.quantified_types`)
    quantified_common_type: ClassVar[bool] = False
    #: a subquery in FROM may read the FROM items before it without LATERAL (DuckDB's implicit lateral joins;
    #: :mod:`dltrace.rewriter.passes.implicit_laterals`)
    implicit_lateral: ClassVar[bool] = False
    #: the table functions that generate rows from their arguments alone, by the name the engine's SQL gives them,
    #: each with the names of the columns it gives when the query names none
    #: (:mod:`dltrace.rewriter.passes.row_generators`)
    row_generators: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: a row generator of one column, aliased without a column list, names its column after the alias
    generator_column_takes_alias: ClassVar[bool] = False
    #: the name of the one column of an ``unnest(list)`` in FROM that names none, and of its alias when it has none
    #: (an alias without columns names the column after itself), or None where the engine has no such call
    #: (:mod:`dltrace.rewriter.passes.unnest_columns`)
    unnest_column: ClassVar[str | None] = None
    #: ``x.f`` inside a subquery, where ``x`` is a column of its sources of a type without fields (an INTEGER) and an
    #: enclosing query's table, reads that table's column ``f`` (Spark raises: it extracts from the column whatever
    #: its type; :func:`dltrace.rewriter.passes.qualify.check_fields_named_like_outer_tables`)
    outer_table_past_a_plain_column: ClassVar[bool] = False
    #: ``GROUP BY (a, 2)`` groups by a and the second item, and a parenthesis by what it holds, ``GROUP BY (1)`` by the
    #: first item (:mod:`dltrace.rewriter.passes.grouping_tuples`; elsewhere only ``GROUP BY ()`` is read so)
    parenthesised_group_keys: ClassVar[bool] = False
    #: the engine runs Spark's generators as Spark does: posexplode, inline, stack, json_tuple and the ``_outer``
    #: forms (a LATERAL VIEW read from Spark SQL elsewhere runs as plain explode only:
    #: :mod:`dltrace.rewriter.passes.lateral_views`)
    spark_generators: ClassVar[bool] = False
    #: the SQL standard's ``FROM s PIVOT (aggs FOR c IN (...) [GROUP BY ...])`` is the PIVOT statement over ``s``,
    #: which compares the column as text and names the columns value[_alias] (DuckDB's binder;
    #: :mod:`dltrace.rewriter.passes.pivots`)
    standard_pivot: ClassVar[bool] = False
    #: ``FROM IDENTIFIER('t')`` reads the table ``t`` (Spark's identifier clause;
    #: :mod:`dltrace.rewriter.passes.identifier_tables`)
    identifier_clause: ClassVar[bool] = False

    def __init__(self, dialect: str, strategy: str, finish_on_read: bool = False) -> None:
        if strategy not in STRATEGIES:
            raise UnknownChoice(f"unknown lineage strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
        self.dialect = dialect
        self.strategy = strategy
        #: a session's result finishes the final columns when first read: under "set", on an engine whose lineage
        #: may travel as lists, the "set" strategy's lineage then travels as id lists as the bitmap strategy's
        #: does, and its final columns are those lists (sorted and deduplicated by the reader, not by the engine)
        self.finish_on_read = finish_on_read

    @property
    def builds_bitmaps(self) -> bool:
        """Does the engine's SQL build the "bitmap" strategy's bitmaps itself? When false (Spark) the SQL is the
        "set" strategy's and the driver encodes the sets it returns (:func:`dltrace.udafs.encode_bitmaps`)."""
        return self.strategy == "bitmap"

    @property
    def lists_inside(self) -> bool:
        """Does lineage travel as plain id arrays inside the query, bitmaps built only at the output (or, for
        "set" finished on read, not at all: the final columns are the lists)?"""
        return self.bitmaps_at_output and (self.builds_bitmaps or self.sets_on_read)

    @property
    def sets_on_read(self) -> bool:
        """Are the "set" strategy's final columns id lists, sorted and deduplicated by the reader?"""
        return self.strategy == "set" and self.bitmaps_at_output and self.finish_on_read

    @property
    def scalar_subquery_arguments(self) -> bool:
        """Can a lineage union take a scalar subquery as an argument?"""
        return True

    @property
    def subqueries_in_lambdas(self) -> bool:
        """Can a higher-order function (filter, transform) read a scalar subquery?"""
        return True

    def raise_error(self, message: str) -> exp.Expression:
        """A call that raises ``message`` as the engine's error when evaluated."""
        return exp.Anonymous(this=self.error_function, expressions=[exp.Literal.string(message)])

    def kept_in_place(self) -> exp.Expression | None:
        """A test TRUE for every row that the engine's optimizer leaves where it is written, where it may move a
        filter to the first join of the relations it reads, before the FROM's other items are joined (DuckDB's
        join order optimizer), so that a guard that raises is evaluated only for the rows the FROM gives
        (:func:`dltrace.rewriter.passes.scalar_lookups.raise_errors`); None where the engine keeps such a filter
        above the FROM's joins (Spark reorders joins only by their conditions without its cost-based optimizer)."""
        return None

    # -- engine primitives (each engine implements these) --------------------------------------
    def agg_list(self, x: exp.Expression) -> exp.Expression:
        """Aggregate values into an array (whether NULL rows are kept is the engine's; unions drop them)."""
        raise NotImplementedError

    def listed(self, node: exp.Expression) -> exp.Expression | None:
        """``x`` when ``node`` is :meth:`agg_list` of ``x`` as this engine writes it (``x`` reading no aggregate,
        function call, subquery or window), else None; None always where the passes need not read a list back."""
        return None

    def is_aggregate_call(self, node: exp.Expression) -> bool:
        """Is ``node`` a call of an aggregate (sqlglot's, or one of :attr:`lineage_aggregates`)?"""
        return isinstance(node, exp.AggFunc) or (isinstance(node, exp.Anonymous)
                                                 and node.name.lower() in self.lineage_aggregates)

    def array(self, *xs: exp.Expression) -> exp.Expression:
        raise NotImplementedError

    def any_value(self, x: exp.Expression) -> exp.Expression:
        raise NotImplementedError

    def empty_ids(self) -> exp.Expression:
        """The empty array of rids."""
        raise NotImplementedError

    def sorted_distinct(self, arr: exp.Expression) -> exp.Expression:
        """The distinct non-NULL elements of ``arr``, sorted: a lineage set of strategy "set"."""
        raise NotImplementedError

    def concat(self, parts: list[exp.Expression], nullable: list[bool]) -> exp.Expression:
        """One array of the elements of all ``parts``; ``nullable[i]``: part i may be NULL (it adds nothing)."""
        if len(parts) == 1:
            return parts[0]
        return self.concat_arrays(parts, nullable)

    def concat_arrays(self, parts: list[exp.Expression], nullable: list[bool]) -> exp.Expression:
        """:meth:`concat` of two or more parts."""
        raise NotImplementedError

    def rid_array_set(self, arr: exp.Expression, single: bool) -> exp.Expression:
        """The "set" lineage of an array of scalar rids, NULLs among them; ``single``: one element."""
        raise NotImplementedError

    def group_rid_set(self, rid: exp.Expression) -> exp.Expression:
        """The "set" lineage of a group (an aggregate): its distinct non-NULL ``rid`` values, sorted."""
        raise NotImplementedError

    def struct(self, fields: dict[str, exp.Expression]) -> exp.Expression:
        raise NotImplementedError

    def filter(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        raise NotImplementedError

    def any_element(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        """TRUE when some element of ``arr`` makes ``body`` TRUE, else FALSE (EXISTS's two values)."""
        raise NotImplementedError

    def transform(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        raise NotImplementedError

    # -- lineage sets --------------------------------------------------------------------------
    def _bitmap(self, name: str, wide: bool) -> str:
        return f"dl_bitmap_{name}64" if wide else f"dl_bitmap_{name}"

    def set_of_rids(self, rids: list[exp.Expression], wide: bool = False) -> exp.Expression:
        """The lineage set of one row that carries the scalar rids ``rids`` (NULLs ignored)."""
        arr = self.array(*rids)
        if self.lists_inside:
            return arr
        if self.builds_bitmaps:
            return call(self._bitmap("build", wide), arr)
        return self.rid_array_set(arr, single=len(rids) == 1)

    def union(self, sets: list[exp.Expression], nullable: list[bool], wide: bool = False) -> exp.Expression:
        """Row-level union of several lineage sets of one table."""
        if len(sets) == 1:
            return sets[0]
        if self.lists_inside:
            return self.concat(sets, nullable)
        if self.builds_bitmaps:
            return call(self._bitmap("merge", wide), self.array(*sets))
        return self.sorted_distinct(self.concat(sets, nullable))

    def dlunion_rids(self, rid: exp.Expression, wide: bool = False) -> exp.Expression:
        """DLUNION (an aggregate) of scalar rids: the set of the group's rids."""
        if self.lists_inside:
            return self.agg_list(rid)
        if self.builds_bitmaps:
            return call(self._bitmap("build", wide), self.agg_list(rid))
        return self.group_rid_set(rid)

    def dlunion_rid_lists(self, rids: list[exp.Expression], wide: bool = False) -> exp.Expression:
        """DLUNION of several scalar rid columns of one table (a self-join below an aggregation)."""
        lists = [self.agg_list(r) for r in rids]
        if self.lists_inside:
            return self.concat(lists, [False] * len(lists))
        if self.builds_bitmaps:
            return call(self._bitmap("build", wide), self.concat(lists, [False] * len(lists)))
        return self.sorted_distinct(self.concat(lists, [False] * len(lists)))

    def dlunion_sets(self, s: exp.Expression, wide: bool = False) -> exp.Expression:
        """DLUNION (an aggregate) of lineage sets: bitmaps are merged, arrays flattened."""
        if self.lists_inside:
            return call("flatten", self.agg_list(s))
        if self.builds_bitmaps:
            return call(self._bitmap("merge", wide), self.agg_list(s))
        return self.sorted_distinct(call("flatten", self.agg_list(s)))

    def finish(self, s: exp.Expression, wide: bool = False) -> exp.Expression:
        """A final lineage column: never NULL (an empty set instead); for sets finished on read, the id list
        itself (NULL: no ids)."""
        if self.sets_on_read:
            return s
        if self.lists_inside:  # the bitmap of the ids (a NULL or empty array: the empty bitmap)
            if isinstance(s, exp.Anonymous) and s.name == _STORED:  # a stored bitmap as it is: not re-encoded
                return self.finish_bitmap(s.expressions[0], wide)
            return call(self._bitmap("build", wide), s)
        if self.builds_bitmaps:
            return self.finish_bitmap(s, wide)
        return exp.func("coalesce", s, self.empty_ids())

    def final_union(self, parts: list[exp.Expression], nullable: list[bool], finished: list[exp.Expression],
                    wide: bool = False) -> exp.Expression:
        """A final lineage column: the union of lineage ``parts`` (as inside the query) and of ``finished``
        values, final already (each maybe NULL: the hoisted lineage of a one-row subquery, built once)."""
        if not self.lists_inside or not finished or self.sets_on_read:
            return self.finish(self.union(parts + finished, nullable + [True] * len(finished), wide), wide)
        built = [self.finish(self.union(parts, nullable, wide), wide)] if parts else []
        merged = built + finished
        if len(merged) == 1:
            return self.finish_bitmap(merged[0], wide)
        return self.finish_bitmap(call(self._bitmap("merge", wide), self.array(*merged)), wide)

    def finished(self, s: exp.Expression, wide: bool = False) -> exp.Expression:
        """Lineage as inside the query, in the form of a final column (maybe NULL): for a value computed once
        and read by every row (hoisted lineage), so that rows do not each build it."""
        if self.lists_inside and not self.sets_on_read:
            return call(self._bitmap("build", wide), s)
        return s

    def finish_bitmap(self, s: exp.Expression, wide: bool) -> exp.Expression:
        """A bitmap as a final lineage column: never NULL."""
        # the empty bitmap as a constant: Spark would call a UDF for every row, even in an untaken branch
        empty = exp.Literal.string(EMPTY_BITMAP64 if wide else EMPTY_BITMAP32)
        return exp.func("coalesce", s, call(self.from_hex, empty))

    def null_set(self) -> exp.Expression:
        kind = self.bitmap_type if self.builds_bitmaps and not self.lists_inside else self.set_type
        return exp.cast(exp.Null(), exp.DataType.build(kind, dialect=self.dialect))

    def null_rid(self) -> exp.Expression:
        return exp.cast(exp.Null(), exp.DataType.build("BIGINT"))

    def ids_to_set(self, ids: exp.Expression, wide: bool = False) -> exp.Expression:
        """An array of rids (maybe with duplicates) as a lineage set."""
        if self.lists_inside:
            return ids
        if self.builds_bitmaps:
            return call(self._bitmap("build", wide), ids)
        return self.sorted_distinct(ids)

    def from_stored(self, column: exp.Expression) -> exp.Expression:
        """A stored lineage column (a composed source's: bitmaps under this strategy, arrays under "set") as
        lineage inside the query."""
        if self.lists_inside and not self.sets_on_read:  # (stored sets are id arrays already)
            return call(_STORED, column)
        return column


# NULL over no rows on both engines (checked on each: tests/test_empty_aggregates.py)
NULL_ON_BOTH = {
    exp.Sum, exp.Avg, exp.Min, exp.Max, exp.GroupConcat, exp.LogicalOr, exp.LogicalAnd, exp.First, exp.Last,
    exp.ArgMax, exp.ArgMin, exp.AnyValue, exp.Median, exp.Mode, exp.Stddev, exp.StddevPop, exp.StddevSamp,
    exp.Variance, exp.VariancePop, exp.Kurtosis, exp.Skewness, exp.Corr, exp.CovarPop, exp.CovarSamp,
    exp.RegrSlope, exp.RegrIntercept, exp.RegrAvgx, exp.RegrAvgy, exp.RegrR2, exp.RegrSxx, exp.RegrSyy,
    exp.RegrSxy, exp.Quantile, exp.ApproxQuantile, exp.PercentileCont, exp.PercentileDisc, exp.BitwiseAndAgg,
    exp.BitwiseOrAgg, exp.BitwiseXorAgg,
}
# 0 over no rows, never NULL over rows, on both engines
ZERO_ON_BOTH = {exp.Count, exp.ApproxDistinct, exp.RegrCount}

# meta key of a struct written as a named_struct(...) call (Spark), by the query (rewriter/grammar.py) or by dltrace:
# sqlglot reads it as it reads struct(v AS k), which Spark unpacks into a row value on the left of IN (subquery)
# where it does not unpack a named_struct; Spark's generator writes it back as the call (engines/spark_sql.py)
NAMED_STRUCT = "dl_named_struct"
