"""DuckDB's lineage SQL: list functions, ``list`` aggregates, BIGINT[] sets and BLOB bitmaps.

Pure sqlglot (no duckdb import): the rewriter builds DuckDB SQL with no DuckDB running.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

from dltrace.engines.lineage_sql import NULL_ON_BOTH, ZERO_ON_BOTH, LineageFunctions, call, lam

# DuckDB's list_distinct hashes every element (12 s for Q1's 6M rids at SF 1); aggregating the rids in
# order and dropping each one equal to its predecessor is an order of magnitude faster (0.9 s), and for
# 1.5M small groups still the fastest. The lambda may only repeat the ordered *aggregate*, which DuckDB
# computes once per group; a repeated scalar would be re-evaluated for every element.
_DEDUP_SORTED = sqlglot.parse_one(
    "list_filter(_dl_l, lambda _dl_e, _dl_i: _dl_e IS NOT NULL AND (_dl_i = 1 OR _dl_e <> _dl_l[_dl_i - 1]))",
    read="duckdb",
)
_ORDERED_LIST = sqlglot.parse_one("list(_dl_v ORDER BY _dl_v)", read="duckdb")


def _struct_pack_sql(generator, struct: exp.Struct) -> str:
    """``struct`` as DuckDB's ``struct_pack`` where a bare column is among its fields, else sqlglot's own text."""
    if not any(isinstance(item, (exp.Column, exp.Identifier)) for item in struct.expressions):  # (a lambda's variable)
        return DuckDB.Generator.TRANSFORMS[exp.Struct](generator, struct)
    fields = [f"{generator.sql(item.this)} := {generator.sql(item.expression)}" if isinstance(item, exp.PropertyEQ)
              else generator.sql(item) for item in struct.expressions]
    return f"STRUCT_PACK({', '.join(fields)})"


def _fill(template: exp.Expression, name: str, value: exp.Expression) -> exp.Expression:
    """``template`` with every column ``name`` replaced by a copy of ``value``."""
    return template.copy().transform(
        lambda n: value.copy() if isinstance(n, exp.Column) and not n.table and n.name == name else n
    )


# DuckDB 2.0's macros over aggregates (duckdb_functions(), function_type = 'macro': geomean is exp(avg(ln(x))),
# json_group_array a string_agg): aggregates of their rows, NULL over none; read as plain functions, a query
# calling one got per-row lineage, which DuckDB refused ("dl_rid must appear in the GROUP BY clause"; a new user)
AGGREGATE_MACROS = ("geomean", "geometric_mean", "weighted_avg", "wavg", "json_group_array", "json_group_object",
                    "json_group_structure", "variant_group_array")


class DuckDBFunctions(LineageFunctions):
    """Lineage SQL in DuckDB's dialect."""

    dialects = ("duckdb",)
    # count_if is a sum on DuckDB (NULL over no rows), and list / array_agg NULL
    empty_by_class = {**dict.fromkeys(NULL_ON_BOTH, "null"), **dict.fromkeys(ZERO_ON_BOTH, "zero"),
                      exp.ArrayAgg: "null", exp.CountIf: "null"}
    empty_by_name = {**dict.fromkeys(("arbitrary", "arg_max_null", "arg_max_nulls_last", "arg_min_null",
                                      "arg_min_nulls_last", "bitstring_agg", "favg", "fsum", "histogram",
                                      "histogram_exact", "kahan_sum", "kurtosis_pop", "lttb", "mad", "mean", "product",
                                      "reservoir_quantile", "sem", "sum_no_overflow", "sumkahan", *AGGREGATE_MACROS),
                                     "null"),
                     "count_star": "zero", "entropy": "zero"}  # (entropy: 0.0 over none, and over NULLs alone)
    # DuckDB 2.0's aggregates (duckdb_functions(), function_type = 'aggregate') that sqlglot 30.30 parses as
    # anonymous functions
    aggregate_functions = frozenset({
        "arbitrary", "arg_max_null", "arg_max_nulls_last", "arg_min_null", "arg_min_nulls_last", "bitstring_agg",
        "count_star", "entropy", "favg", "fsum", "histogram", "histogram_exact", "kahan_sum", "kurtosis_pop",
        "lttb", "mad", "mean", "product", "reservoir_quantile", "sem", "sum_no_overflow", "sumkahan",
        *AGGREGATE_MACROS,
    })
    lineage_aggregates = frozenset({"list"})
    set_type = "BIGINT[]"
    bitmap_type = "BLOB"
    from_hex = "from_hex"
    error_function = "error"
    checks_unread_lookups = True
    bitmaps_at_output = True
    # its perfect hash join (an inner join on one integer key, the build side's range known) probes 1.5M rows
    # in 9 ms; the same rows through a LEFT or an IS NOT DISTINCT FROM join take 230 ms (TPC-H Q13, SF 1)
    only_inner_equi_joins_fast = True
    # DuckDB's perfect hash join takes a build side whose key range is at most about a million values: TPC-H Q13 at
    # SF 10 (1.5M customers) joins its 16M rows to their groups in 850 ms, in 76 ms as two joins of at most a
    # million keys each
    perfect_join_span = 1_000_000
    materialized_ctes = True
    packs_ids = True
    dense_lists = True
    shared_preludes = True
    # DuckDB 2.0.1: SELECT -v AS v, v FROM t ORDER BY v orders by -v, SELECT -v AS v FROM t ORDER BY v + 0 by t.v
    binds_repeated_order_by_names = True
    order_by_expressions_read_columns = True
    # DuckDB 2.0.1: DECIMAL(18,4) 1.5 IN (SELECT DECIMAL(38,0) 2) is TRUE (both cast to DECIMAL(38,0)), 1.5 = 2 is not
    quantified_common_type = True
    # DuckDB 2.0.1: FROM t, (SELECT ... WHERE u.a = t.a) AS x reads t's row, as LATERAL does
    implicit_lateral = True
    # DuckDB 2.0.1: SELECT * FROM range(3) has one column "range"; FROM generate_series(1, 3), "generate_series"
    row_generators = {"range": ("range",), "generate_series": ("generate_series",)}
    generator_column_takes_alias = True  # DuckDB 2.0.1: SELECT * FROM range(3) AS q has one column "q"
    standard_pivot = True  # DuckDB 2.0.1: FROM t PIVOT (sum(v) FOR c IN ('a')) is PIVOT t ON c IN ('a') USING sum(v)
    unnest_column = "unnest"  # DuckDB 2.0.1: FROM unnest([1]) gives unnest.unnest, FROM unnest([1]) AS x gives x.x
    # DuckDB 2.0.1: in EXISTS (SELECT 1 FROM items WHERE items.o = o.id), an INTEGER column items.o is passed over
    outer_table_past_a_plain_column = True
    parenthesised_group_keys = True  # DuckDB 2.0.1: GROUP BY (1) groups by the first item, GROUP BY (a, b) by a and b
    generator_transforms = {
        # sqlglot 30.30 writes struct_pack(t.Name) as {'Name': t.Name}, named as the reference is written, where
        # DuckDB names the field as the column's relation does ("name" for a column stored so): written back as
        # struct_pack, for DuckDB to name (verify() reran a query whose field names changed; the rewriter names
        # such a field itself, passes/struct_fields.py)
        exp.Struct: lambda self, e: _struct_pack_sql(self, e),
    }

    def kept_in_place(self) -> exp.Expression | None:
        # (DuckDB's filter pushdown moves no volatile expression; a TRUE test over the other FROM items' columns
        # was no help: its statistics fold `hash(x) IS NOT NULL` and `x IS NULL OR x IS NOT NULL` to TRUE)
        return exp.GTE(this=exp.Rand(), expression=exp.Literal.number(0))

    def agg_list(self, x: exp.Expression) -> exp.Expression:
        """``list`` keeps NULL rows; the unions drop them."""
        return call("list", x)

    def listed(self, node: exp.Expression) -> exp.Expression | None:
        if isinstance(node, exp.Anonymous) and node.name.lower() == "list" and len(node.expressions) == 1:
            x = node.expressions[0]
            if x.find(exp.AggFunc, exp.Anonymous, exp.Subquery, exp.Window) is None:
                return x
        return None

    def array(self, *xs: exp.Expression) -> exp.Expression:
        return call("list_value", *xs)

    def any_value(self, x: exp.Expression) -> exp.Expression:
        return call("any_value", x)

    def empty_ids(self) -> exp.Expression:
        return exp.cast(exp.Array(expressions=[]), exp.DataType.build("BIGINT[]", dialect="duckdb"))

    def sorted_distinct(self, arr: exp.Expression) -> exp.Expression:
        # (not the sorted dedup of group_rid_set: inside its lambda DuckDB would re-evaluate a scalar input
        # such as list_sort(arr) for every element; only an aggregate there is computed once)
        return call("list_sort", call("list_distinct", arr))

    def concat_arrays(self, parts: list[exp.Expression], nullable: list[bool]) -> exp.Expression:
        return call("flatten", self.array(*parts))  # DuckDB's flatten skips NULL lists

    def rid_array_set(self, arr: exp.Expression, single: bool) -> exp.Expression:
        if single:
            return call("list_filter", arr, lam(exp.Not(this=exp.Is(this=exp.column("_dl_x"), expression=exp.Null()))))
        return self.sorted_distinct(arr)

    def group_rid_set(self, rid: exp.Expression) -> exp.Expression:
        return _fill(_DEDUP_SORTED, "_dl_l", _fill(_ORDERED_LIST, "_dl_v", rid))

    def struct(self, fields: dict[str, exp.Expression]) -> exp.Expression:
        return call("struct_pack", *[exp.PropertyEQ(this=exp.to_identifier(k), expression=v)
                                     for k, v in fields.items()])

    def filter(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        return call("list_filter", arr, lam(body, var))

    def any_element(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        return exp.GT(this=call("len", self.filter(arr, body, var)), expression=exp.Literal.number(0))

    def transform(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        return call("list_transform", arr, lam(body, var))
