"""Random queries over TYPED columns: the comparisons whose meaning depends on the columns' types.

The generators of ``querygen.py`` / ``querygen_rich.py`` draw INTEGER and VARCHAR columns only, and three bugs
(fixed) lived where they could not reach: DuckDB's IN / ANY / ALL over DECIMALs whose digits together pass 38
compares in a type that drops scale where ``=`` does not (``passes/quantified_types.py``); a correlated equality
coarser than grouping -- a NOCASE collation ('a' = 'A'), a VARCHAR against an INTEGER ('01' = ' 1' = 1) --
(``passes/coarse_keys.py``); struct fields read through a table's alias (``"w"."r"."id"``) and
``string_agg(x)`` without a separator. This module draws small tables with such columns (DECIMAL(p,s) of mixed
precisions and scales, NOCASE and plain strings differing only in case, numeric strings, a struct, NULLs,
duplicates) and queries from a small template grammar over them (IN / NOT IN / = ANY / <> ALL / > ALL / EXISTS,
correlated or not, over subqueries that may aggregate and group; joins on mixed-type keys; GROUP BY / DISTINCT on
collated columns; scalar subqueries; under NOT / OR / IS NULL), and checks per query:

  (a) dltrace's rows (set and bitmap lineage) are DuckDB's own rows for the SQL as written, on a second
      connection holding the same tables (multisets; decimals compared exactly, and column types equal);
  (b) set and bitmap lineage agree row by row;
  (c) the completeness oracle (``verify``) holds for every row -- with the subqueries' table ``u`` left whole
      where a negation, IS NULL or a boolean in the SELECT list makes witness lineage non-monotone;
  (d) backward tracing (``trace``) gives the same rows, and the lineage of each row holds the forward lineage of
      every row with the same values (README: equal rows share one pool); equal to that pool when the query has
      no negation, no collation in play and no duplicate rows.

A refusal (``UnsupportedQuery``) is an accepted outcome, counted: the test fails if every example was refused,
or if too few were checked, so it cannot pass vacuously. An error of DuckDB itself on the SQL as written must be
an error through dltrace too.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dltrace
from dltrace.errors import QueryError, UnsupportedQuery

# -- the data -------------------------------------------------------------------------------------------------
# (38,0) with (18,4), (38,10) or (5,2) passes 38 digits together: DuckDB's IN compares in DECIMAL(38,0) there
DECIMALS = ["DECIMAL(38,0)", "DECIMAL(18,4)", "DECIMAL(38,10)", "DECIMAL(5,2)", "DECIMAL(10,1)"]
DEC_VALUES = [Decimal(x) for x in ("0", "1", "1.5", "2", "2.25", "-1", "0.5", "0.51", "1.0001", "7", "99.99",
                                   "-2.5")]
INTS = [0, 1, 2, -1]
CASED = ["a", "A", "b", "B", "ab"]
NUMERIC_STRINGS = ["1", "01", " 1", "2", "0", "-1", "1.5", "1.0"]


def _maybe_null(values, null_weight=1):
    return st.one_of(st.sampled_from(values), st.none()) if null_weight else st.sampled_from(values)


@dataclass
class Tables:
    t_c_nocase: bool
    u_c_nocase: bool
    t_d: str
    u_d: str
    u_e: str
    t_rows: list
    u_rows: list

    def ddl(self) -> str:
        def lit(v):
            if v is None:
                return "NULL"
            if isinstance(v, str):
                return "'" + v.replace("'", "''") + "'"
            if isinstance(v, dict):
                return "{'id': %s, 'tag': %s}" % (lit(v["id"]), lit(v["tag"]))
            return str(v)

        nocase = lambda flag: " COLLATE NOCASE" if flag else ""  # noqa: E731
        out = [
            f'CREATE OR REPLACE TABLE "t"("id" INTEGER, "k" INTEGER, "c" VARCHAR{nocase(self.t_c_nocase)}, '
            f'"v" VARCHAR, "d" {self.t_d})',
            f'CREATE OR REPLACE TABLE "u"("k" INTEGER, "c" VARCHAR{nocase(self.u_c_nocase)}, "v" VARCHAR, '
            f'"d" {self.u_d}, "e" {self.u_e}, "r" STRUCT("id" INTEGER, "tag" VARCHAR))',
        ]
        for name, rows in (("t", self.t_rows), ("u", self.u_rows)):
            if rows:
                out.append(f'INSERT INTO "{name}" VALUES ' + ", ".join(
                    "(" + ", ".join(lit(v) for v in row) + ")" for row in rows))
        return ";\n".join(out)


def _fits(value: Decimal, typ: str) -> bool:
    p, s = (int(x) for x in typ[typ.index("(") + 1:-1].split(","))
    return value is None or abs(value) < Decimal(10) ** (p - s)


@st.composite
def tables(draw) -> Tables:
    t_d, u_d, u_e = (draw(st.sampled_from(DECIMALS)) for _ in range(3))
    dec = lambda typ: _maybe_null([v for v in DEC_VALUES if _fits(v, typ)])  # noqa: E731
    t_row = st.tuples(_maybe_null(INTS), _maybe_null(CASED), _maybe_null(NUMERIC_STRINGS), dec(t_d))
    struct = st.one_of(st.none(), st.fixed_dictionaries({"id": _maybe_null(INTS), "tag": _maybe_null(CASED)}))
    u_row = st.tuples(_maybe_null(INTS), _maybe_null(CASED), _maybe_null(NUMERIC_STRINGS), dec(u_d), dec(u_e),
                      struct)
    t_rows = draw(st.lists(t_row, min_size=0, max_size=6))
    # duplicates on purpose: a row drawn again
    if t_rows and draw(st.booleans()):
        t_rows.append(draw(st.sampled_from(t_rows)))
    u_rows = draw(st.lists(u_row, min_size=0, max_size=6))
    if u_rows and draw(st.booleans()):
        u_rows.append(draw(st.sampled_from(u_rows)))
    return Tables(draw(st.booleans()), draw(st.booleans()), t_d, u_d, u_e,
                  [(i, *r) for i, r in enumerate(t_rows)], u_rows)


# -- the queries ----------------------------------------------------------------------------------------------
@dataclass
class Query:
    sql: str
    nonmonotone: bool = False   # a negation, IS NULL, a boolean of a subquery in the SELECT list
    self_join: bool = False     # u read by the outer join and by a subquery
    collated: bool = False      # a COLLATE in the query text
    features: list = field(default_factory=list)


# The sides of a comparison with a subquery over u (aliased "w"), by kind: (outer expressions, subquery items)
SIDES = {
    "dec": (['"t"."d"', '"t"."k"', 'coalesce("t"."d", 0)', 'CAST("t"."d" AS DECIMAL(38,10))', '"t"."d" + 0'],
            ['"w"."d"', '"w"."e"', 'max("w"."d")', 'min("w"."e")', 'sum("w"."d")', 'CAST("w"."e" AS DECIMAL(18,4))',
             'coalesce("w"."d", 0)', 'abs("w"."e")', 'round("w"."d", 1)', '"w"."d" + "w"."e"', '-"w"."d"',
             'CASE WHEN "w"."k" > 0 THEN "w"."d" ELSE "w"."e" END', 'greatest("w"."d", "w"."e")', 'floor("w"."e")',
             '"w"."k"', 'avg("w"."d")', 'CAST("w"."v" AS DECIMAL(18,4))', '1.5']),
    "str": (['"t"."c"', '"t"."c" COLLATE NOCASE', 'lower("t"."c")'],
            ['"w"."c"', 'max("w"."c")', 'min("w"."c")', '"w"."r"."tag"', 'upper("w"."c")', '"w"."c" COLLATE NOCASE']),
    "mix": (['"t"."v"', '"t"."k"', '"t"."d"'], ['"w"."v"', '"w"."k"', 'count(*)', '"w"."r"."id"', 'max("w"."v")']),
    "int": (['"t"."k"', '"t"."id"'], ['"w"."k"', 'count(*)', 'sum("w"."k")', '"w"."r"."id"', 'max("w"."k")',
                                    'CAST("w"."v" AS INTEGER)']),
}
# correlations: a column of w equal to one of t (mixed types, collations, a struct field)
CORRELATIONS = ['"w"."k" = "t"."k"', '"w"."c" = "t"."c"', '"w"."v" = "t"."k"', '"w"."d" = "t"."d"',
                '"w"."r"."id" = "t"."k"', '"w"."c" = "t"."c" COLLATE NOCASE', '"w"."e" = "t"."d"',
                '"w"."v" = "t"."v"', '"w"."k" = "t"."v"', '"w"."v" = "t"."d"', 'lower("w"."c") = "t"."c"',
                '"w"."k" = "t"."d"', '"w"."d" = "t"."k"', '"w"."c" = "t"."c" || \'\'']
INNER_FILTERS = ['"w"."k" > 0', '"w"."c" = \'a\'', '"w"."d" IS NOT NULL', '"w"."v" = \'1\'', '"w"."e" < 2']
OPS = ["=", "<>", "<", ">", "<=", ">="]
AGGREGATES = ("max(", "min(", "sum(", "count(")


def _is_aggregate(item: str) -> bool:
    return item.startswith(AGGREGATES)


@st.composite
def subquery(draw, item: str, correlated: bool, kind: str | None = None) -> str:
    where = []
    if correlated:
        where.append(draw(st.sampled_from(CORRELATIONS)))
    if draw(st.booleans()):
        where.append(draw(st.sampled_from(INNER_FILTERS)))
    body = ' FROM "u" AS "w"'
    if where:
        body += " WHERE " + " AND ".join(where)
    if _is_aggregate(item) and draw(st.booleans()):
        body += " GROUP BY " + draw(st.sampled_from(['"w"."k"', '"w"."c"', '"w"."d"', '"w"."v"']))
    sql = f"SELECT {item}{body}"
    wrap = draw(st.sampled_from(["none", "none", "none", "derived", "union", "cte"])) if kind else "none"
    if wrap == "derived" and not correlated:  # the item's type read through a derived table
        sql = f'SELECT "x" FROM (SELECT {item} AS "x"{body}) AS "s"'
    elif wrap == "cte" and not correlated:
        sql = f'WITH "s" AS (SELECT {item} AS "x"{body}) SELECT "x" FROM "s"'
    elif wrap == "union":  # the union's type: DECIMAL(18,4) with DECIMAL(38,0) is DECIMAL(38,0)
        other = draw(st.sampled_from([i for i in SIDES[kind][1] if not _is_aggregate(i)]))
        sql += f' UNION{draw(st.sampled_from(["", " ALL"]))} SELECT {other} FROM "u" AS "w"'
        if correlated:
            sql += " WHERE " + draw(st.sampled_from(CORRELATIONS))
    return sql


@st.composite
def atom(draw, q: Query) -> str:
    form = draw(st.sampled_from(["in", "not_in", "any", "all", "exists", "not_exists", "scalar", "plain"]))
    if form == "plain":
        return draw(st.sampled_from(['"t"."k" > 0', '"t"."c" = \'A\'', '"t"."d" IS NULL', '"t"."v" = \'01\'',
                                     '"t"."d" >= 1.5', '"t"."c" IS NOT NULL']))
    if form in ("exists", "not_exists"):
        if form == "not_exists":
            q.nonmonotone = True
        inner = draw(subquery("1", correlated=draw(st.integers(0, 4)) > 0))
        q.features.append(form)
        return ("NOT " if form == "not_exists" else "") + f"EXISTS ({inner})"
    kind = draw(st.sampled_from(sorted(SIDES)))
    outer, items = SIDES[kind]
    lhs = draw(st.sampled_from(outer))
    item = draw(st.sampled_from(items))
    correlated = draw(st.booleans())
    q.features.append(f"{form}/{kind}{'/corr' if correlated else ''}")
    if form == "scalar":  # one row: an aggregate without GROUP BY
        item = item if _is_aggregate(item) else f"max({item})"
        inner = f'SELECT {item} FROM "u" AS "w"'
        if correlated:
            inner += " WHERE " + draw(st.sampled_from(CORRELATIONS))
        return f"{lhs} {draw(st.sampled_from(OPS))} ({inner})"
    inner = draw(subquery(item, correlated, kind))
    if form == "in":
        return f"{lhs} IN ({inner})"
    if form == "not_in":
        q.nonmonotone = True
        return f"{lhs} NOT IN ({inner})"
    op = draw(st.sampled_from(OPS))
    if form == "all":
        q.nonmonotone = q.nonmonotone or op in ("<>", ">", "<", ">=", "<=")
        return f"{lhs} {op} ALL ({inner})"
    return f"{lhs} {op} ANY ({inner})"


@st.composite
def predicate(draw, q: Query, depth: int = 0) -> str:
    shape = draw(st.sampled_from(["atom", "atom", "not", "or", "and", "isnull"]) if depth < 2 else st.just("atom"))
    if shape == "atom":
        return draw(atom(q))
    if shape == "not":
        q.nonmonotone = True
        return f"NOT ({draw(predicate(q, depth + 1))})"
    if shape == "isnull":
        q.nonmonotone = True
        return f"({draw(predicate(q, depth + 1))}) IS {draw(st.sampled_from(['NULL', 'NOT NULL']))}"
    a, b = draw(predicate(q, depth + 1)), draw(predicate(q, depth + 1))
    return f"({a}) {shape.upper()} ({b})"


JOIN_KEYS = ['"t"."v" = "u"."k"', '"t"."d" = "u"."e"', '"t"."c" = "u"."c"', '"t"."k" = "u"."d"',
             '"t"."v" = "u"."v"', '"t"."k" = "u"."r"."id"', '"t"."d" = "u"."d"']
GROUP_KEYS = ['"t"."c"', '"t"."v"', '"t"."d"', '"t"."c" COLLATE NOCASE']
GROUP_AGGREGATES = ['count(*) AS "n"', 'sum("t"."d") AS "sd"', 'max("t"."c") AS "mc"', 'string_agg("t"."v") AS "sa"',
                    'string_agg("t"."v" ORDER BY "t"."v") AS "so"',
                    'min("t"."d") AS "md"', 'count(DISTINCT "t"."c") AS "nc"']
SCALAR_ITEMS = ['count(*)', 'max("w"."d")', 'sum("w"."e")', 'min("w"."c")', 'string_agg("w"."c")', 'string_agg("w"."v" ORDER BY "w"."v")',
                'max("w"."r"."id")', 'sum("w"."d" * 1)']


@st.composite
def queries(draw) -> Query:
    q = Query("")
    shape = draw(st.sampled_from(["filter", "group", "distinct", "join", "scalar", "select_in"]))
    where = f" WHERE {draw(predicate(q))}" if shape != "select_in" and draw(st.integers(0, 5)) > 0 else ""
    if shape == "filter":
        cols = draw(st.lists(st.sampled_from(['"t"."k"', '"t"."c"', '"t"."v"', '"t"."d"']), min_size=1, max_size=3,
                             unique=True))
        sql = f'SELECT "t"."id", {", ".join(cols)} FROM "t"{where}'
    elif shape == "group":
        key = draw(st.sampled_from(GROUP_KEYS))
        aggs = draw(st.lists(st.sampled_from(GROUP_AGGREGATES), min_size=1, max_size=3, unique=True))
        alias = "" if "COLLATE" not in key else ' AS "g"'
        sql = f'SELECT {key}{alias}, {", ".join(aggs)} FROM "t"{where} GROUP BY {key}'
    elif shape == "distinct":
        col = draw(st.sampled_from(['"t"."c"', '"t"."v"', '"t"."d"', '"t"."c" COLLATE NOCASE']))
        alias = "" if "COLLATE" not in col else ' AS "g"'
        sql = f'SELECT DISTINCT {col}{alias} FROM "t"{where}'
    elif shape == "join":
        key = draw(st.sampled_from(JOIN_KEYS))
        cols = draw(st.lists(st.sampled_from(['"u"."k" AS "uk"', '"u"."c" AS "uc"', '"u"."e" AS "ue"',
                                              '"u"."r"."tag" AS "utag"', '"t"."d"']),
                             min_size=1, max_size=2, unique=True))
        if where:
            q.self_join = True
        if draw(st.booleans()):
            sql = f'SELECT "t"."id", {", ".join(cols)} FROM "t" JOIN "u" ON {key}{where}'
        else:  # grouped over the join
            g = draw(st.sampled_from(['"u"."c"', '"t"."c"', '"u"."e"']))
            sql = f'SELECT {g}, count(*) AS "n", sum("u"."e") AS "se" FROM "t" JOIN "u" ON {key}{where} GROUP BY {g}'
    elif shape == "scalar":
        item = draw(st.sampled_from(SCALAR_ITEMS))
        corr = draw(st.sampled_from(CORRELATIONS))
        name = "sa" if item.startswith("string_agg") and "ORDER BY" not in item else "q"
        sql = f'SELECT "t"."id", (SELECT {item} FROM "u" AS "w" WHERE {corr}) AS "{name}" FROM "t"{where}'
    else:  # a boolean of an uncorrelated IN / ANY / ALL in the SELECT list
        q.nonmonotone = True
        kind = draw(st.sampled_from(sorted(SIDES)))
        outer, items = SIDES[kind]
        inner = draw(subquery(draw(st.sampled_from(items)), correlated=False, kind=kind))
        op = draw(st.sampled_from(["IN", "NOT IN", "= ANY", "<> ALL", "> ALL", "<= ANY"]))
        sql = f'SELECT "t"."id", {draw(st.sampled_from(outer))} {op} ({inner}) AS "h" FROM "t"'
        q.features.append(f"select {op}/{kind}")
    q.sql = sql
    q.collated = "COLLATE" in sql
    q.features.insert(0, shape)
    return q


# -- running and checking -------------------------------------------------------------------------------------
STATS: Counter = Counter()
REFUSALS: Counter = Counter()


class Env:
    def __init__(self):
        self.con = duckdb.connect()
        self.con.execute("SET threads=1")
        self.session = dltrace.connect("duckdb", connection=self.con)
        self.ref = duckdb.connect()
        self.ref.execute("SET threads=1")

    def load(self, data: Tables) -> None:
        ddl = data.ddl()
        self.ref.execute(ddl)
        self.con.execute(ddl)
        for name in ("t", "u"):
            self.session.adopt(name, replace=True)


_env: Env | None = None


def env() -> Env:
    global _env
    if _env is None:
        _env = Env()
    return _env


def _norm(name: str, value):
    if name.startswith("sa") and isinstance(value, str):  # string_agg's order is the engine's: compare as a bag
        return ",".join(sorted(value.split(",")))
    return value


def _rows(table) -> list[tuple]:
    names = table.column_names
    return [tuple(_norm(n, v) for n, v in zip(names, row.values())) for row in table.to_pylist()]


def _lin(d: dict) -> tuple:
    return tuple(sorted((t.lower(), tuple(sorted(ids))) for t, ids in d.items() if len(ids)))


def check(data: Tables, q: Query) -> str:
    e = env()
    e.load(data)
    sql = q.sql
    ctx = f"\n-- tables\n{data.ddl()};\n-- query ({', '.join(q.features)})\n{sql}"
    try:
        want_table = e.ref.sql(sql).to_arrow_table()
    except duckdb.Error as err:  # the engine's own error: dltrace must raise too
        try:
            e.session.run(sql)
        except UnsupportedQuery as refusal:
            REFUSALS[str(refusal).split(":")[0][:90]] += 1
            return "refused"
        except (QueryError, dltrace.DltraceError):
            REFUSALS["engine: " + str(err).splitlines()[0][:80]] += 1
            return "engine_error"
        raise AssertionError(f"DuckDB raised {str(err).splitlines()[0]} but dltrace answered{ctx}")
    want = Counter(_rows(want_table))
    results = {}
    for strategy in ("set", "bitmap"):
        try:
            r = e.session.run(sql, lineage=strategy)
        except UnsupportedQuery as err:
            REFUSALS[str(err).split(":")[0][:90]] += 1
            return "refused"
        # (a) the engine's rows, exactly, and the engine's column types
        got = Counter(_rows(r.table))
        assert got == want, (f"[rows/{strategy}] expected {sorted(want.items(), key=repr)}\n"
                             f"got {sorted(got.items(), key=repr)}{ctx}")
        assert [str(f.type) for f in r.table.schema] == [str(f.type) for f in want_table.schema], (
            f"[types/{strategy}] {r.table.schema} vs {want_table.schema}{ctx}")
        results[strategy] = r
    s, b = results["set"], results["bitmap"]
    # (b) set == bitmap, row by row (as a multiset of (row, lineage): the row order is the engine's)
    with_lin = lambda r: Counter((row, _lin(r.lineage(i))) for i, row in enumerate(_rows(r.table)))  # noqa: E731
    assert with_lin(s) == with_lin(b), f"[set==bitmap]{ctx}"
    # (c) completeness (not of a string_agg without ORDER BY: its order over the restricted rows is the engine's)
    # (u only where the query reads it: verify refuses a name the query does not read)
    unrestricted = ("u",) if (q.nonmonotone or q.self_join) and '"u"' in sql else ()
    for i in range(s.num_rows if '"sa"' not in sql else 0):
        assert s.verify(i, unrestricted=unrestricted), (
            f"[verify] row {i} {_rows(s.table)[i]} is not reproduced by its lineage {s.lineage(i)} "
            f"(unrestricted {unrestricted}){ctx}")
    # (d) backward tracing
    try:
        back = e.session.trace(sql)
    except UnsupportedQuery as err:
        REFUSALS["trace: " + str(err).split(":")[0][:80]] += 1
        return "checked_forward"
    back_rows = _rows(back.table)
    assert Counter(back_rows) == want, f"[backward/rows] {sorted(Counter(back_rows).items(), key=repr)}{ctx}"
    pools: dict = {}
    for i, row in enumerate(_rows(s.table)):
        pools.setdefault(row, set()).update((t, x) for t, ids in _lin(s.lineage(i)) for x in ids)
    for i, row in enumerate(back_rows):
        got = {(t, x) for t, ids in _lin(back.lineage(i)) for x in ids}
        assert pools[row] <= got, (f"[forward<=backward] row {row}: backward {sorted(got)} misses "
                                   f"{sorted(pools[row] - got)}{ctx}")
        exact = not (q.nonmonotone or q.collated or data.t_c_nocase or data.u_c_nocase or q.self_join)
        if exact and all(n == 1 for n in want.values()):
            assert pools[row] == got, (f"[forward==backward] row {row}: forward {sorted(pools[row])}, backward "
                                       f"{sorted(got)}{ctx}")
    return "checked"


EXAMPLES = int(os.environ.get("DLTRACE_TYPED_EXAMPLES", "300"))


def _run(max_examples: int) -> Counter:
    STATS.clear()
    REFUSALS.clear()

    @settings(max_examples=max_examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=tables(), q=queries())
    def prop(data, q):
        STATS[check(data, q)] += 1

    prop()
    return STATS


def _summary(stats: Counter) -> str:
    return f"{dict(stats)}; refusals: {REFUSALS.most_common(8)}"


def _assert_not_vacuous(stats: Counter, at_least: int) -> None:
    total = sum(stats.values())
    checked = stats["checked"] + stats["checked_forward"]
    print(_summary(stats))
    assert checked, f"every example was refused: {_summary(stats)}"
    assert checked >= min(at_least, total // 3), f"too few examples checked: {_summary(stats)}"


# The cases the fixes were for, drawn by hand: the random run reaches them only now and then (the first in about a
# thousand examples against the code before the fixes), these in every run.
KNOWN = [
    pytest.param(Tables(False, False, "DECIMAL(38,0)", "DECIMAL(38,0)", "DECIMAL(38,0)", [(0, 0, "a", "1", None)],
                        [(0, "a", "1", None, None, None), (None, "A", "1", Decimal(0), Decimal(0), None)]),
                 Query('SELECT "t"."id", (SELECT count(*) FROM "u" AS "w" WHERE "w"."c" = "t"."c" COLLATE NOCASE) '
                       'AS "q" FROM "t"', collated=True), id="correlated count through a collation"),
    pytest.param(Tables(False, False, "DECIMAL(18,4)", "DECIMAL(38,0)", "DECIMAL(38,0)", [(1, 1, "a", "1", Decimal("1.5"))],
                        [(1, "a", "1", Decimal(2), Decimal(2), None)]),
                 Query('SELECT "t"."id" FROM "t" WHERE "t"."d" IN (SELECT "w"."e" FROM "u" AS "w")'),
                 id="IN over DECIMALs whose digits pass 38"),
    pytest.param(Tables(False, False, "DECIMAL(5,2)", "DECIMAL(5,2)", "DECIMAL(5,2)", [(1, 1, "a", "1", None)],
                        [(1, "a", "1", None, None, None), (2, "a", "01", None, None, None)]),
                 Query('SELECT "t"."id", (SELECT count(*) FROM "u" AS "w" WHERE "w"."v" = "t"."k") AS "q" FROM "t"'),
                 id="correlated count through a VARCHAR against an INTEGER"),
]


@pytest.mark.parametrize("data,q", KNOWN)
def test_known_cases(data, q):
    assert check(data, q) in ("checked", "checked_forward", "refused")


def test_typed_queries():
    stats = _run(EXAMPLES)
    _assert_not_vacuous(stats, at_least=EXAMPLES // 3)


@pytest.mark.slow
def test_typed_queries_long():
    stats = _run(10 * EXAMPLES)
    _assert_not_vacuous(stats, at_least=EXAMPLES)
