"""Spark SQL's lineage SQL: array functions, ``collect_list``, ARRAY<BIGINT> sets -- for both strategies.

Pure sqlglot (no pyspark import): the rewriter builds Spark SQL with no Spark running. The Spark-family
dialects (spark2, databricks) get the same lineage SQL.

Bitmap lineage on Spark needs no Python on the executors: the engine builds the "bitmap" strategy's lineage
as the "set" strategy's native arrays (``collect_list``, ``array_distinct``, ``sort_array``, ``flatten``, all
JVM code), and the driver encodes each returned set as a portable roaring bitmap
(:func:`dltrace.udafs.encode_bitmaps`, called by ``run_forward``), so results, saves and lookups get the same
bitmaps as on DuckDB. The alternative, Python arrow UDFs (:mod:`dltrace.engines.spark_udfs`) that build and
merge bitmaps on the executors, needs dltrace and pyroaring in every executor's Python and measured slower
(TPC-H SF 1, local[2], ``benchmarks/spark_bitmap_routes.py``: geometric mean over Q1, Q3, Q9, Q13, Q18 of time
over the original query 1.19x native, 1.27x UDFs; native faster on 4 of the 5, the UDFs 8% faster on Q18;
README "Spark"). Spark's own ``bitmap_construct_agg`` / ``bitmap_or_agg`` do not fit a
lineage set: each builds one fixed 4 KiB bitmap of one 32,768-id bucket, so a set spanning several buckets
needs a second GROUP BY level (keys and bucket) inside the user's aggregation, and a sparse set of a few ids
costs 4 KiB per bucket it touches.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dltrace.engines.lineage_sql import NAMED_STRUCT, NULL_ON_BOTH, ZERO_ON_BOTH, LineageFunctions, call, lam


def _alias_sql(generator: Any, alias: exp.Alias) -> str:
    """``x AS name``, or ``t.name`` alone where it names a column after itself in the SELECT list of a query
    whose HAVING calls grouping() / grouping_id() (the same output name)."""
    select = alias.parent
    if isinstance(alias.this, exp.Column) and alias.this.name == alias.alias and isinstance(select, exp.Select) \
            and alias.arg_key == "expressions" and select.args.get("having") is not None \
            and select.args["having"].find(exp.Grouping, exp.GroupingId) is not None:
        return generator.sql(alias.this)
    return generator.alias_sql(alias)


def _time_literal_sql(generator: Any, cast: exp.Cast) -> str | None:
    """``TIME '<text>'`` for a string cast to TIME (how sqlglot reads Spark's TIME literal); None otherwise."""
    to = cast.args.get("to")
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.TIME and isinstance(cast.this, exp.Literal) \
            and cast.this.is_string:
        return f"TIME {generator.sql(cast.this)}"
    return None


def _time_type_sql(generator: Any, datatype: exp.DataType) -> str | None:
    """``TIME`` / ``TIME(p)`` for the TIME type; None for any other type."""
    if datatype.this != exp.DataType.Type.TIME:
        return None
    precision = datatype.expressions
    return f"TIME({generator.expressions(datatype, flat=True)})" if precision else "TIME"


def _named_struct_sql(generator, struct: exp.Struct) -> str:
    """``struct`` as ``NAMED_STRUCT('k', v, ...)`` where it was written so and every field is named, else sqlglot's
    own text (``STRUCT(v AS k, ...)``)."""
    if not struct.meta.get(NAMED_STRUCT) or not struct.expressions or not all(
            isinstance(i, exp.PropertyEQ) and isinstance(i.this, exp.Identifier) for i in struct.expressions):
        return generator.struct_sql(struct)
    return generator.func("NAMED_STRUCT", *[part for i in struct.expressions
                                             for part in (exp.Literal.string(i.this.name), i.expression)])


class SparkFunctions(LineageFunctions):
    """Lineage SQL in Spark's dialect."""

    dialects = ("spark", "spark2", "databricks")
    # Spark 4's aggregates that sqlglot 30.30 parses as anonymous functions
    aggregate_functions = frozenset({
        "product", "every", "some", "any", "histogram_numeric", "try_avg", "try_sum", "std", "count_min_sketch",
        "hll_sketch_agg", "hll_union_agg",
    })
    generator_transforms = {
        # a function sqlglot 30.30 does not transpile: DuckDB's week() is the ISO week, Spark's weekofyear()
        exp.Week: lambda self, e: self.func("WEEKOFYEAR", e.this),
        # sqlglot 30.30 writes Spark's exact percentile_cont(q) WITHIN GROUP (ORDER BY x) as PERCENTILE_APPROX
        # (another value, another type); Spark 3.3+ runs it as written
        exp.WithinGroup: lambda self, e: self.withingroup_sql(e),
        exp.PercentileCont: lambda self, e: self.func("PERCENTILE_CONT", e.this),
        exp.PercentileDisc: lambda self, e: self.func("PERCENTILE_DISC", e.this),
        # Spark 4 cannot resolve grouping(t.k) in a HAVING once the SELECT aliases t.k (as qualification writes
        # every item: `t.k AS k`), though the name is the same: such an alias is left out there
        exp.Alias: lambda self, e: _alias_sql(self, e),
        # sqlglot 30.30 writes Spark's TIME as TIMESTAMP (Spark 3 had no TIME): `TIME '06:30:45'` became today's
        # date at 06:30:45, another value of another type (found by a probe); Spark 4 reads the literal as a TIME
        # and refuses CAST(... AS TIME) itself, which is left for it to say
        exp.Cast: lambda self, e: _time_literal_sql(self, e) or self.cast_sql(e),
        exp.DataType: lambda self, e: _time_type_sql(self, e) or self.datatype_sql(e),
        # sqlglot 30.30 writes parse_json(x) as x alone: a string where Spark 4 gives a VARIANT (variant_get failed
        # on its type)
        exp.ParseJSON: lambda self, e: self.func("PARSE_JSON", e.this),
        # and to_json(parse_json(x)) as x itself, or a regexp over from_json for a literal: Spark 4 runs it as written
        exp.JSONFormat: lambda self, e: self.func("TO_JSON", e.this, e.args.get("options")),
        # sqlglot 30.30 writes named_struct('K', k) as STRUCT(k AS K), which Spark 4 unpacks into a row value on the
        # left of IN (subquery) and then compares with the subquery's one struct column (a probe: "data type
        # mismatch"): a named_struct the query (or dltrace) writes is written back as one; a struct(...) as STRUCT,
        # which Spark unpacks there as the user meant
        exp.Struct: lambda self, e: _named_struct_sql(self, e),
    }
    # Spark 4 reads 'a''b' as the string a'b (sqlglot 30.30's Spark dialect: two literals, concatenated)
    string_escapes = ("\\", "'")
    string_agg_separator = ""  # Spark 4: listagg(g) / string_agg(g) join without one (sqlglot wrote ',')
    names_columns_as_written = True
    # Spark 4: SELECT * FROM range(3) has one column "id"
    row_generators = {"range": ("id",)}
    spark_generators = True
    identifier_clause = True  # Spark 4: SELECT * FROM IDENTIFIER('t') reads t
    # collect_list / collect_set are [] over no rows on Spark, and count_if 0
    empty_by_class = {**dict.fromkeys(NULL_ON_BOTH, "null"), **dict.fromkeys(ZERO_ON_BOTH, "zero"),
                      exp.ArrayAgg: "empty_array", exp.ArrayUniqueAgg: "empty_array", exp.CountIf: "zero"}
    empty_by_name = dict.fromkeys(("every", "some", "std", "histogram_numeric", "try_avg", "try_sum"), "null")
    lineage_aggregates = frozenset({"collect_list"})
    set_type = "ARRAY<BIGINT>"
    bitmap_type = "BINARY"
    from_hex = "unhex"
    error_function = "raise_error"
    compares_maps = False  # Spark's <=> (and =) take no MAP
    # Spark 4: SELECT 1 AS c, sum(v) FROM t WHERE false GROUP BY ALL gives no row (DuckDB one)
    group_by_all_groups_constants = True
    orders_by_grouping_of_aliased_columns = False  # (its own query fails so once its item of x has an alias)
    reads_in_of_a_parenthesised_query_as_a_list = True

    @property
    def subqueries_in_lambdas(self) -> bool:
        return False  # UNSUPPORTED_SUBQUERY_EXPRESSION_CATEGORY.HIGHER_ORDER_FUNCTION

    @property
    def builds_bitmaps(self) -> bool:
        """Never: bitmap lineage is built as native arrays (the module docstring says why)."""
        return False

    def agg_list(self, x: exp.Expression) -> exp.Expression:
        """``collect_list`` drops NULL rows."""
        return call("collect_list", x)

    def array(self, *xs: exp.Expression) -> exp.Expression:
        return call("array", *xs)

    def any_value(self, x: exp.Expression) -> exp.Expression:
        return call("any_value", x, exp.true())

    def empty_ids(self) -> exp.Expression:
        return exp.cast(call("array"), exp.DataType.build("ARRAY<BIGINT>", dialect="spark"))

    def sorted_distinct(self, arr: exp.Expression) -> exp.Expression:
        # sort_array, not array_sort: Spark implements array_sort as a higher-order function (with a
        # comparator lambda), and refuses the hoisted scalar subqueries inside those
        return call("sort_array", call("array_distinct", arr))

    def concat_arrays(self, parts: list[exp.Expression], nullable: list[bool]) -> exp.Expression:
        # Spark's concat and flatten return NULL when any input is NULL
        fixed = [exp.func("coalesce", p, self.empty_ids()) if n else p for p, n in zip(parts, nullable)]
        return call("concat", *fixed)

    def rid_array_set(self, arr: exp.Expression, single: bool) -> exp.Expression:
        arr = call("array_compact", arr)
        return arr if single else self.sorted_distinct(arr)

    def group_rid_set(self, rid: exp.Expression) -> exp.Expression:
        return self.sorted_distinct(self.agg_list(rid))

    def struct(self, fields: dict[str, exp.Expression]) -> exp.Expression:
        args: list[exp.Expression] = []
        for k, v in fields.items():
            args += [exp.Literal.string(k), v]
        return call("named_struct", *args)

    def filter(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        return call("filter", arr, lam(body, var))

    def any_element(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        # Spark 4.3 fails with INTERNAL_ERROR_ATTRIBUTE_NOT_FOUND when a filter()/exists() lambda in a
        # join's predicate captures a column of the other side; a fold over the array does not.
        step = exp.or_(exp.column("_dl_acc"), exp.func("coalesce", body, exp.false()))
        fold = exp.Lambda(this=step, expressions=[exp.to_identifier("_dl_acc"), exp.to_identifier(var)])
        return call("aggregate", arr, exp.false(), fold)

    def transform(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        return call("transform", arr, lam(body, var))
