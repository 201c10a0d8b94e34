"""Random tables and random SQL queries for differential testing of lineage (hypothesis strategies).

Three tables r(k, v, s), p(k, w), q(k, x): 0-30 rows each, small value domains so joins match and groups
repeat, NULLs in keys and values, duplicate rows. Queries combine joins (inner, left), filters, GROUP BY /
HAVING, global aggregates, DISTINCT, UNION / INTERSECT / EXCEPT, IN / EXISTS / NOT EXISTS / scalar subqueries
(correlated and not; also in an IN list: ``a.k IN (3, NULL, (SELECT max(p.w) FROM p))``), FROM subqueries and
ORDER BY / LIMIT. Every query records the features the oracles need to know about (negation, self-joins,
aggregation, LIMIT).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from hypothesis import strategies as st

TABLES = {"r": ("k", "v", "s"), "p": ("k", "w"), "q": ("k", "x")}
KEY = st.one_of(st.none(), st.integers(0, 4))
NUM = st.one_of(st.none(), st.integers(-3, 9))
TXT = st.one_of(st.none(), st.sampled_from(["a", "b", "c'd", ""]))


@st.composite
def tables(draw) -> dict[str, pa.Table]:
    out = {}
    for name, cols in TABLES.items():
        n = draw(st.integers(0, 30))
        rows = draw(st.lists(st.tuples(*[TXT if c == "s" else KEY if c == "k" else NUM for c in cols]),
                             min_size=n, max_size=n))
        if rows and draw(st.booleans()):  # duplicate rows
            rows += draw(st.lists(st.sampled_from(rows), max_size=5))
        types = {"s": pa.string()}
        out[name] = pa.table({c: pa.array([r[i] for r in rows], type=types.get(c, pa.int64()))
                              for i, c in enumerate(cols)})
    return out


@dataclass
class Query:
    sql: str
    columns: list[str]  # output column names
    reads: list[str] = field(default_factory=list)  # base table occurrences
    negation: bool = False
    aggregate: bool = False
    distinct: bool = False  # DISTINCT / UNION / INTERSECT / EXCEPT: rows merge duplicates
    limit: bool = False
    subquery: bool = False  # a predicate subquery (witness lineage need not be minimal)
    outer: bool = False  # an outer join (its NULL-padded row can equal the matched one: not minimal)

    @property
    def self_join(self) -> bool:
        return len(self.reads) != len(set(self.reads))

    def merged(self, other: "Query", sql: str, columns: list[str], **flags) -> "Query":
        q = Query(sql, columns, self.reads + other.reads,
                  self.negation or other.negation, self.aggregate or other.aggregate,
                  self.distinct or other.distinct, self.limit or other.limit, self.subquery or other.subquery,
                  self.outer or other.outer)
        for k, v in flags.items():
            setattr(q, k, getattr(q, k) or v)
        return q


def _value_col(table: str) -> str:
    return TABLES[table][1]


@st.composite
def predicate(draw, alias: str, table: str, depth: int) -> tuple[str, dict]:
    """A WHERE predicate over ``alias`` (a ``table``), maybe with a subquery."""
    col = draw(st.sampled_from(TABLES[table][:2]))
    simple = draw(st.sampled_from([
        f"{alias}.{col} > {draw(st.integers(-2, 6))}",
        f"{alias}.{col} IS NOT NULL",
        f"{alias}.{col} IS NULL OR {alias}.{col} < {draw(st.integers(0, 6))}",
        f"{alias}.{col} BETWEEN 1 AND {draw(st.integers(1, 8))}",
    ]))
    if depth <= 0 or not draw(st.booleans()):
        return simple, {}
    other = draw(st.sampled_from([t for t in TABLES if t != table]))
    ov = _value_col(other)
    kind = draw(st.sampled_from(["in", "exists", "exists_ne", "not_exists", "not_in", "scalar", "scalar_corr",
                                 "in_list"]))
    flags = {"subquery": True, "reads": [other]}
    inner_filter = f"{other}.{ov} > {draw(st.integers(-2, 5))}"
    if kind == "in":
        sql = f"{alias}.k IN (SELECT {other}.k FROM {other} WHERE {inner_filter})"
    elif kind == "exists":
        sql = f"EXISTS (SELECT 1 FROM {other} WHERE {other}.k = {alias}.k AND {inner_filter})"
    elif kind == "exists_ne":
        sql = f"EXISTS (SELECT 1 FROM {other} WHERE {other}.k = {alias}.k AND {other}.{ov} > {alias}.{col})"
    elif kind == "not_exists":
        sql = f"NOT EXISTS (SELECT 1 FROM {other} WHERE {other}.k = {alias}.k AND {inner_filter})"
        flags["negation"] = True
    elif kind == "not_in":
        sql = f"{alias}.k NOT IN (SELECT {other}.k FROM {other} WHERE {other}.k IS NOT NULL AND {inner_filter})"
        flags["negation"] = True
    elif kind == "scalar":
        sql = f"{alias}.{col} >= (SELECT min({other}.{ov}) FROM {other})"
    elif kind == "scalar_corr":
        sql = f"{alias}.{col} <= (SELECT max({other}.{ov}) FROM {other} WHERE {other}.k = {alias}.k)"
    else:  # an IN list holding a scalar subquery (correlated or not), maybe as its left side, maybe NOT IN
        corr = draw(st.sampled_from(["", f" WHERE {other}.k = {alias}.k"]))
        sub = f"(SELECT {draw(st.sampled_from(['max', 'min']))}({other}.{ov}) FROM {other}{corr})"
        values = [sub, str(draw(st.integers(-2, 6))), draw(st.sampled_from(["NULL", f"{alias}.k", "1"]))]
        values = draw(st.permutations(values))
        negated = draw(st.booleans())
        if draw(st.integers(0, 3)) == 0:  # the subquery on the left
            rest = [v for v in values if v != sub]
            sql = f"{sub} {'NOT ' if negated else ''}IN ({alias}.{col}, {', '.join(rest)})"
        else:
            sql = f"{alias}.{col} {'NOT ' if negated else ''}IN ({', '.join(values)})"
        flags["negation"] = negated
    combine = draw(st.sampled_from(["alone", "and"]))
    return (sql if combine == "alone" else f"({sql}) AND ({simple})"), flags


@st.composite
def from_clause(draw, depth: int) -> tuple[str, list[tuple[str, str]], Query]:
    """FROM with 1-2 tables (or a FROM subquery); returns the text, (alias, table) pairs and read tables."""
    first = draw(st.sampled_from(list(TABLES)))
    items = [("a", first)]
    text = f"{first} AS a"
    q = Query("", [], [first])
    if depth > 0 and draw(st.integers(0, 4)) == 0:
        inner = draw(spj(depth - 1, alias_table=first))
        text = f"({inner.sql}) AS a"
        q = inner
    if draw(st.booleans()):
        second = draw(st.sampled_from(list(TABLES)))
        join = draw(st.sampled_from(["JOIN", "LEFT JOIN"]))
        text += f" {join} {second} AS b ON a.k = b.k"
        items.append(("b", second))
        q.reads = q.reads + [second]
        q.outer = q.outer or join == "LEFT JOIN"
    return text, items, q


@st.composite
def spj(draw, depth: int, alias_table: str | None = None) -> Query:
    """SELECT k, value FROM one table with a filter: a FROM-subquery shape with columns (k, v, s...)."""
    table = alias_table or draw(st.sampled_from(list(TABLES)))
    cols = TABLES[table]
    pred, flags = draw(predicate("x", table, depth))
    q = Query(f"SELECT {', '.join(f'x.{c}' for c in cols)} FROM {table} AS x WHERE {pred}", list(cols), [table])
    return _flag(q, flags)


def _flag(q: Query, flags: dict) -> Query:
    q.reads = q.reads + flags.get("reads", [])
    q.negation = q.negation or flags.get("negation", False)
    q.subquery = q.subquery or flags.get("subquery", False)
    return q


@st.composite
def select_query(draw, depth: int = 1) -> Query:
    text, items, base = draw(from_clause(depth))
    alias, table = items[0]
    pred, flags = draw(predicate(alias, table, depth)) if draw(st.booleans()) else ("", {})
    where = f" WHERE {pred}" if pred else ""
    second = items[1] if len(items) > 1 else None
    value = f"{alias}.{_value_col(table)}"
    shape = draw(st.sampled_from(["plain", "group", "global", "distinct"]))
    q = Query("", [], list(base.reads), base.negation, base.aggregate, base.distinct, base.limit, base.subquery,
              base.outer)
    if shape == "plain":
        cols = [f"{alias}.k AS k", f"{value} AS v"] + ([f"{second[0]}.{_value_col(second[1])} AS w"] if second else [])
        q.sql = f"SELECT {', '.join(cols)} FROM {text}{where}"
        q.columns = [c.split(" AS ")[1] for c in cols]
    elif shape == "group":
        agg = draw(st.sampled_from([f"sum({value})", "count(*)", f"max({value})", f"count(DISTINCT {value})"]))
        having = draw(st.sampled_from(["", " HAVING count(*) > 1", f" HAVING sum({value}) IS NOT NULL"]))
        q.sql = f"SELECT {alias}.k AS k, {agg} AS n FROM {text}{where} GROUP BY {alias}.k{having}"
        q.columns, q.aggregate = ["k", "n"], True
    elif shape == "global":
        q.sql = f"SELECT count(*) AS n, sum({value}) AS total FROM {text}{where}"
        q.columns, q.aggregate = ["n", "total"], True
    else:
        q.sql = f"SELECT DISTINCT {alias}.k AS k, {value} AS v FROM {text}{where}"
        q.columns, q.distinct = ["k", "v"], True
    q = _flag(q, flags)
    if draw(st.integers(0, 3)) == 0:
        order = ", ".join(f"{c} NULLS LAST" for c in q.columns)
        q.sql += f" ORDER BY {order} LIMIT {draw(st.integers(0, 5))}"
        q.limit = True
    return q


@st.composite
def queries(draw) -> Query:
    """A random query: a SELECT, or a set operation over two single-column SELECTs."""
    if draw(st.integers(0, 3)) > 0:
        return draw(select_query())
    left, right = draw(select_query(depth=0)), draw(select_query(depth=0))
    left.limit = right.limit = False  # the sides' ORDER BY / LIMIT are stripped below
    op = draw(st.sampled_from(["UNION", "UNION ALL", "INTERSECT", "EXCEPT"]))
    lsql = f"SELECT {left.columns[0]} AS k FROM ({_strip_limit(left.sql)}) AS l"
    rsql = f"SELECT {right.columns[0]} AS k FROM ({_strip_limit(right.sql)}) AS r"
    return left.merged(right, f"{lsql} {op} {rsql}", ["k"], distinct=op != "UNION ALL", negation=op == "EXCEPT")


def _strip_limit(sql: str) -> str:
    at = sql.find(" ORDER BY ")
    return sql if at < 0 else sql[:at]
