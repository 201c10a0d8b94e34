"""The SQL that builds lineage sets, per dialect and strategy, as sqlglot expressions.

"set": native arrays of BIGINT, sorted and distinct. "bitmap": portable roaring bitmaps built and merged
by the dl_bitmap_* functions of :mod:`dltrace.udafs`. Every method returns an expression; NULL parts mean
"contributes nothing" (the null-padded side of an outer join) and are ignored by every union.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

STRATEGIES = ("set", "bitmap")
BITS64 = 2**32  # tables with at least this many rows need 64-bit bitmaps
EMPTY_BITMAP32 = "3A30000000000000"  # portable serialisation of the empty 32-bit roaring bitmap
EMPTY_BITMAP64 = "0000000000000000"  # ... and of the empty 64-bit one


def _f(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


# DuckDB's list_distinct hashes every element (12 s for Q1's 6M rids at SF 1); aggregating the rids in
# order and dropping each one equal to its predecessor is an order of magnitude faster (0.9 s), and for
# 1.5M small groups still the fastest. The lambda may only repeat the ordered *aggregate*, which DuckDB
# computes once per group; a repeated scalar would be re-evaluated for every element.
_DEDUP_SORTED = sqlglot.parse_one(
    "list_filter(_dl_l, lambda _dl_e, _dl_i: _dl_e IS NOT NULL AND (_dl_i = 1 OR _dl_e <> _dl_l[_dl_i - 1]))",
    read="duckdb",
)
_ORDERED_LIST = sqlglot.parse_one("list(_dl_v ORDER BY _dl_v)", read="duckdb")


def _fill(template: exp.Expression, name: str, value: exp.Expression) -> exp.Expression:
    """``template`` with every column ``name`` replaced by a copy of ``value``."""
    return template.copy().transform(
        lambda n: value.copy() if isinstance(n, exp.Column) and not n.table and n.name == name else n
    )


def lam(body: exp.Expression, var: str = "_dl_x") -> exp.Lambda:
    return exp.Lambda(this=body, expressions=[exp.to_identifier(var)])


class LineageFunctions:
    """Builders for one (dialect, strategy). ``wide`` says a table needs 64-bit bitmaps."""

    def __init__(self, dialect: str, strategy: str) -> None:
        if strategy not in STRATEGIES:
            from dltrace.errors import DltraceError

            raise DltraceError(f"unknown lineage strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
        self.dialect = dialect
        self.strategy = strategy
        self.spark = dialect in ("spark", "spark2", "databricks")

    @property
    def scalar_subquery_arguments(self) -> bool:
        """Can a lineage union take a scalar subquery as an argument? Not a Python UDF on Spark 4.3: the
        subquery is then evaluated inside the task, where SparkPlan.session() is null (a NullPointerException)."""
        return not (self.spark and self.strategy == "bitmap")

    # -- engine primitives -------------------------------------------------------------------
    def agg_list(self, x: exp.Expression) -> exp.Expression:
        """Aggregate values into an array (NULL rows: kept on DuckDB, dropped on Spark; unions drop them)."""
        return _f("collect_list", x) if self.spark else _f("list", x)

    def array(self, *xs: exp.Expression) -> exp.Expression:
        return _f("array", *xs) if self.spark else _f("list_value", *xs)

    def any_value(self, x: exp.Expression) -> exp.Expression:
        return _f("any_value", x, exp.true()) if self.spark else _f("any_value", x)

    def empty_ids(self) -> exp.Expression:
        if self.spark:
            return exp.cast(_f("array"), exp.DataType.build("ARRAY<BIGINT>", dialect="spark"))
        return exp.cast(exp.Array(expressions=[]), exp.DataType.build("BIGINT[]", dialect="duckdb"))

    def _sorted_distinct(self, arr: exp.Expression) -> exp.Expression:
        if self.spark:
            # sort_array, not array_sort: Spark implements array_sort as a higher-order function (with a
            # comparator lambda), and refuses the hoisted scalar subqueries inside those
            return _f("sort_array", _f("array_distinct", arr))
        # (not the sorted dedup of dlunion_rids: inside its lambda DuckDB would re-evaluate a scalar input
        # such as list_sort(arr) for every element; only an aggregate there is computed once)
        return _f("list_sort", _f("list_distinct", arr))

    def _concat(self, parts: list[exp.Expression], nullable: list[bool]) -> exp.Expression:
        if len(parts) == 1:
            return parts[0]
        if self.spark:  # Spark's concat and flatten return NULL when any input is NULL
            fixed = [exp.func("coalesce", p, self.empty_ids()) if n else p for p, n in zip(parts, nullable)]
            return _f("concat", *fixed)
        return _f("flatten", self.array(*parts))  # DuckDB's flatten skips NULL lists

    def _bitmap(self, name: str, wide: bool) -> str:
        return f"dl_bitmap_{name}64" if wide else f"dl_bitmap_{name}"

    # -- lineage sets --------------------------------------------------------------------------
    def set_of_rids(self, rids: list[exp.Expression], wide: bool = False) -> exp.Expression:
        """The lineage set of one row that carries the scalar rids ``rids`` (NULLs ignored)."""
        arr = self.array(*rids)
        if self.strategy == "bitmap":
            return _f(self._bitmap("build", wide), arr)
        if self.spark:
            arr = _f("array_compact", arr)
            return arr if len(rids) == 1 else self._sorted_distinct(arr)
        if len(rids) == 1:
            return _f("list_filter", arr, lam(exp.Not(this=exp.Is(this=exp.column("_dl_x"), expression=exp.Null()))))
        return self._sorted_distinct(arr)

    def union(self, sets: list[exp.Expression], nullable: list[bool], wide: bool = False) -> exp.Expression:
        """Row-level union of several lineage sets of one table."""
        if len(sets) == 1:
            return sets[0]
        if self.strategy == "bitmap":
            return _f(self._bitmap("merge", wide), self.array(*sets))
        return self._sorted_distinct(self._concat(sets, nullable))

    def dlunion_rids(self, rid: exp.Expression, wide: bool = False) -> exp.Expression:
        """DLUNION (an aggregate) of scalar rids: the set of the group's rids."""
        if self.strategy == "bitmap":
            return _f(self._bitmap("build", wide), self.agg_list(rid))
        if self.spark:
            return self._sorted_distinct(self.agg_list(rid))
        return _fill(_DEDUP_SORTED, "_dl_l", _fill(_ORDERED_LIST, "_dl_v", rid))

    def dlunion_rid_lists(self, rids: list[exp.Expression], wide: bool = False) -> exp.Expression:
        """DLUNION of several scalar rid columns of one table (a self-join below an aggregation)."""
        lists = [self.agg_list(r) for r in rids]
        if self.strategy == "bitmap":
            return _f(self._bitmap("build", wide), self._concat(lists, [False] * len(lists)))
        return self._sorted_distinct(self._concat(lists, [False] * len(lists)))

    def dlunion_sets(self, s: exp.Expression, wide: bool = False) -> exp.Expression:
        """DLUNION (an aggregate) of lineage sets: bitmaps are merged, arrays flattened."""
        if self.strategy == "bitmap":
            return _f(self._bitmap("merge", wide), self.agg_list(s))
        return self._sorted_distinct(_f("flatten", self.agg_list(s)))

    def finish(self, s: exp.Expression, wide: bool = False) -> exp.Expression:
        """A final lineage column: never NULL (an empty set instead)."""
        if self.strategy == "bitmap":
            # the empty bitmap as a constant: Spark would call a UDF for every row, even in an untaken branch
            empty = exp.Literal.string(EMPTY_BITMAP64 if wide else EMPTY_BITMAP32)
            return exp.func("coalesce", s, _f("unhex" if self.spark else "from_hex", empty))
        return exp.func("coalesce", s, self.empty_ids())

    def null_set(self) -> exp.Expression:
        kind = "BINARY" if self.spark else "BLOB"
        if self.strategy == "set":
            kind = "ARRAY<BIGINT>" if self.spark else "BIGINT[]"
        return exp.cast(exp.Null(), exp.DataType.build(kind, dialect=self.dialect))

    def null_rid(self) -> exp.Expression:
        return exp.cast(exp.Null(), exp.DataType.build("BIGINT"))

    # -- witnesses of a non-equality correlation (see rules/subqueries.py) --------------------
    def struct(self, fields: dict[str, exp.Expression]) -> exp.Expression:
        if self.spark:
            args = []
            for k, v in fields.items():
                args += [exp.Literal.string(k), v]
            return _f("named_struct", *args)
        return _f("struct_pack", *[exp.PropertyEQ(this=exp.to_identifier(k), expression=v) for k, v in fields.items()])

    def filter(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        return _f("filter" if self.spark else "list_filter", arr, lam(body, var))

    def any_element(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        """TRUE when some element of ``arr`` makes ``body`` TRUE, else FALSE (EXISTS's two values)."""
        if self.spark:
            # Spark 4.3 fails with INTERNAL_ERROR_ATTRIBUTE_NOT_FOUND when a filter()/exists() lambda in a
            # join's predicate captures a column of the other side; a fold over the array does not.
            step = exp.or_(exp.column("_dl_acc"), exp.func("coalesce", body, exp.false()))
            fold = exp.Lambda(this=step, expressions=[exp.to_identifier("_dl_acc"), exp.to_identifier(var)])
            return _f("aggregate", arr, exp.false(), fold)
        return exp.GT(this=_f("len", self.filter(arr, body, var)), expression=exp.Literal.number(0))

    def transform(self, arr: exp.Expression, body: exp.Expression, var: str) -> exp.Expression:
        return _f("transform" if self.spark else "list_transform", arr, lam(body, var))

    def ids_to_set(self, ids: exp.Expression, wide: bool = False) -> exp.Expression:
        """An array of rids (maybe with duplicates) as a lineage set."""
        if self.strategy == "bitmap":
            return _f(self._bitmap("build", wide), ids)
        return self._sorted_distinct(ids)
