"""Checks of the reference interpreter itself (tests/refeval.py) against DuckDB on hand-built ASTs: shapes where
the interpreter once disagreed with the engine (an oracle bug, not a dltrace one, but it stops the long runs)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from oracles import Duck
from refeval import Evaluator
from refquery import Col, Join, Lit, Select, SetOp, Table, render

DATA = {
    "a": pa.table({"k": [1, None, 2], "x": [10, 11, 12], "y": [100, None, 5]}),
    "b": pa.table({"k": [2, 1], "z": [20, 21], "y": [200, 100]}),
    "d": pa.table({"k": [3, 1], "w": [30, 31], "y": [300, 100]}),
    "e": pa.table({"m": [4], "n": [40]}),
    "f": pa.table({"y": [5, 100], "q": [6, 7], "k": [2, 1]}),
}


def t(name):
    return Table(name, f"t_{name}")


def on_true(kind, left, right):
    return Join(kind, left, right, on=Lit(True))


def using(kind, left, right, *cols):
    return Join(kind, left, right, using=cols)


def natural(kind, left, right):
    return Join(kind, left, right, natural=True)


def star(from_, exclude=()):
    q = Select(None, from_, exclude=exclude)
    q.width = None  # SELECT * without LIMIT: the renderer needs no width
    return q


# DuckDB puts a merged USING (or NATURAL) column of `*` where the left side's column of that name is, for every
# join kind; the interpreter put it first (found by the long profile: `... RIGHT JOIN r AS t7 USING (k)`).
STAR_SHAPES = [
    using(kind, on_true("INNER", t("e"), t("a")), t("d"), "k") for kind in ("INNER", "LEFT", "RIGHT", "FULL")
] + [
    using("RIGHT", on_true("INNER", t("a"), t("e")), t("d"), "k"),
    using("FULL", Join("CROSS", t("e"), t("a")), t("d"), "k", "y"),
    using("FULL", t("f"), t("a"), "k", "y"),
    using("RIGHT", t("a"), t("f"), "y", "k"),
    natural("RIGHT", Join("CROSS", t("e"), t("a")), t("d")),
    natural("FULL", t("f"), t("a")),
    using("FULL", using("FULL", t("a"), t("b"), "k"), t("d"), "k"),
    using("RIGHT", using("RIGHT", t("a"), t("b"), "k"), t("d"), "k"),
    on_true("INNER", using("RIGHT", t("a"), t("d"), "k"), t("e")),
    using("FULL", on_true("INNER", t("e"), using("FULL", t("a"), t("b"), "k")), t("d"), "k"),
]


@pytest.mark.parametrize("from_", STAR_SHAPES, ids=lambda f: render(star(f)))
@pytest.mark.parametrize("exclude", [(), ("x",), ("k",)])
def test_star_over_using_joins_is_the_engines(from_, exclude):
    q = star(from_, exclude)
    duck = Duck()
    duck.load(DATA)
    engine = duck.con.sql(render(q))
    rel = Evaluator(DATA).run(q)
    assert rel.names == engine.columns
    assert Counter(rel.rows) == Counter(engine.fetchall())


def test_a_qualified_column_of_a_using_join_is_the_sides_own():
    """``t_a.k`` is a's k (NULL on a padded row), the unqualified ``k`` the merged one."""
    q = Select([(Col("t_a", "k"), "ak"), (Col(None, "k"), "k")], using("RIGHT", t("a"), t("d"), "k"))
    duck = Duck()
    duck.load(DATA)
    assert Counter(Evaluator(DATA).run(q).rows) == Counter(duck.con.sql(render(q)).fetchall())


def test_duckdb_loses_a_correlated_grand_total_of_nothing():
    """The long profile's `(t2._dl < ANY (SELECT ... WHERE t15.v < t2."a b" GROUP BY GROUPING SETS ((t15.k), ())
    EXCEPT ...)) = false` over a NULL-padded t2 row, reduced: for an outer row whose subquery input is empty the ()
    set still gives one row (k NULL), so `d < ANY ({NULL})` is NULL and the row is filtered out; DuckDB loses that
    row under the EXCEPT (ANY over nothing: FALSE, `= false` keeps the row). The interpreter follows the standard;
    the oracle calls the disagreement the engine's bug and the differential tests drop the example.
    DuckDB 2.0.1 (pinned) fixed it: it now gives the standard's answer, the interpreter's."""
    from refquery import Bin, EqFalse, Quant, SetOp

    o = {"o": pa.table({"d": [1, None, 4]}), "r": pa.table({"k": [1, None, 2, 2], "v": [5, None, 3, 3]})}
    grouped = Select([(Col("t", "k"), "k")], Table("r", "t"), where=Bin("<", Col("t", "v"), Col("t_o", "d")),
                     group=[Col("t", "k")], grouping="SETS")
    seven = Select([(Col("t2", "k"), "k")], Table("r", "t2"), where=Bin("=", Col("t2", "k"), Lit(7)))
    q = Select([(Col("t_o", "d"), "d")], Table("o", "t_o"),
               where=EqFalse(Quant(Col("t_o", "d"), "<", "ANY", SetOp("EXCEPT", False, grouped, seven))))
    duck = Duck()
    duck.load(o)
    ev = Evaluator(o)
    assert ev.run(q).rows == []  # 1 < ANY ({NULL}) and NULL < ANY ({NULL}) are NULL: no row; 4 < ANY ({2, NULL}) too
    assert ev.subquery_grand_total_of_nothing
    assert duck.rows(render(q)) == []  # DuckDB 2.0.0 answered [(1,), (None,)]
    # the same subquery with the outer value written in: DuckDB keeps the () row, as the standard says
    assert duck.rows("SELECT count(*) FROM (SELECT t.k FROM r AS t WHERE t.v < 1 "
                     "GROUP BY GROUPING SETS ((t.k), ()) EXCEPT SELECT 7)") == [(1,)]


def test_duckdb_null_in_an_empty_correlated_subquery():
    """The long profile (after 7,700 examples on this stop's code) stopped on `(t2.k IN (SELECT CASE WHEN ... <
    (SELECT DISTINCT ... ORDER BY 1 LIMIT 1 OFFSET 1) ... WHERE t4."a b" = t2.k ...)) IS FALSE`, reduced: for an
    outer row whose k is NULL the subquery is empty, so `NULL IN (empty)` is FALSE (the standard; DuckDB itself
    says so with an aggregate as the scalar subquery, or with the outer value written in); with a scalar subquery
    that is not an aggregate in its SELECT list DuckDB 2.0.0 answered NULL. The interpreter follows the standard; the
    oracle calls such a disagreement the engine's bug and the differential tests drop the example. DuckDB 2.0.1
    (pinned) fixed it."""
    from refquery import Bin, InSub, Is, Scalar

    data = {"p": pa.table({"k": pa.array([None, 2], pa.int64())}),
            "m": pa.table({"k": pa.array([1, 2, None], pa.int64())})}
    first = Select([(Col("m2", "k"), "k")], Table("m", "m2"), limit=1)
    sub = Select([(Scalar(first), "s")], Table("m", "m"), where=Bin("=", Col("m", "k"), Col("p", "k")))
    q = Select([(Col("p", "k"), "k")], Table("p", "p"), where=Is(InSub(Col("p", "k"), sub), "FALSE", False))
    duck = Duck()
    duck.load(data)
    ev = Evaluator(data)
    assert sorted(ev.run(q).rows, key=repr) == [(2,), (None,)]  # 2 IN (1) and NULL IN () are FALSE
    assert ev.null_in_empty_with_scalar
    assert sorted(duck.rows(render(q)), key=repr) == [(2,), (None,)]  # DuckDB 2.0.0 answered [(2,)]
    # with an aggregate as the scalar subquery DuckDB answers FALSE, as the standard says
    from refquery import Agg
    plain = Select([(Scalar(Select([(Agg("max", Col("m2", "k"), False), "k")], Table("m", "m2"), group=[])), "s")],
                   Table("m", "m"), where=Bin("=", Col("m", "k"), Col("p", "k")))
    ok = Select([(Col("p", "k"), "k")], Table("p", "p"), where=Is(InSub(Col("p", "k"), plain), "FALSE", False))
    assert duck.rows(render(ok)) == [(None,)]  # 2 IN (2) is TRUE; NULL IN () is FALSE
    assert Evaluator(data).run(ok).rows == [(None,)]


# QUALIFY, unnest in a SELECT list and a nested SELECT that takes the outer table's alias (the generator's
# qualify_in_subquery, unnest_in_subquery and shadowed_alias): rows as DuckDB's, lineage by hand
def _a_in(sub, negated=False):
    from refquery import InSub
    return Select([(Col("t_a", "x"), "x")], t("a"), InSub(Col("t_a", "k"), sub, negated))


def _run(q):
    duck = Duck()
    duck.load(DATA)
    ev = Evaluator(DATA)
    rel = ev.run(q)
    assert Counter(rel.rows) == Counter(duck.con.sql(render(q)).fetchall()), render(q)
    return ev, sorted(zip(rel.rows, [sorted(x) for x in rel.lins]))


def test_qualify_keeps_the_rows_its_window_passes():
    from refquery import Bin, Win
    # b's rows ranked by z within y: both first (one row per y)
    sub = Select([(Col("t_b", "k"), "k")], t("b"),
                 qualify=Bin("=", Win("rank", None, (Col("t_b", "y"),), (Col("t_b", "z"),)), Lit(1)))
    ev, got = _run(_a_in(sub))
    assert got == [((10,), [("a", 0), ("b", 1)]), ((12,), [("a", 2), ("b", 0)])] and not ev.inexact
    # max(k) over all of d: only d's row 0 (k 3), which no row of a has
    sub = Select([(Col("t_d", "k"), "k")], t("d"),
                 qualify=Bin("=", Col("t_d", "k"), Win("max", Col("t_d", "k"), ())))
    assert _run(_a_in(sub))[1] == []
    assert _run(_a_in(sub, negated=True))[1] == [((10,), [("a", 0)]), ((12,), [("a", 2)])]


def test_row_number_over_equal_rows_pools_their_lineage():
    from refquery import Bin, Win
    data = dict(DATA, g=pa.table({"k": [1, 1, 2]}))
    sub = Select([(Col("t_g", "k"), "k")], Table("g", "t_g"),
                 qualify=Bin("=", Win("row_number", None, (), (Col("t_g", "k"),)), Lit(1)))
    q = _a_in(sub)
    duck = Duck()
    duck.load(data)
    ev = Evaluator(data)
    rel = ev.run(q)
    assert Counter(rel.rows) == Counter(duck.con.sql(render(q)).fetchall()) == Counter([(10,)])
    assert ev.inexact and rel.lins == [frozenset({("a", 0), ("g", 0), ("g", 1)})]


def test_unnest_gives_a_row_per_element():
    from refquery import Bin, Unnest
    # b's row 0 gives 2 and 20, row 1 (z 21 > 20) an empty list: no row
    lst = Unnest((Col("t_b", "k"), Col("t_b", "z")), Bin("<", Col("t_b", "z"), Lit(21)))
    for null in (False, True):
        sub = Select([(Unnest(lst.elems, lst.cond, null), "u")], t("b"))
        assert _run(_a_in(sub))[1] == [((12,), [("a", 2), ("b", 0)])]
    assert _run(_a_in(Select([(Unnest((Lit(1), Lit(None))), "u")], None)))[1] == [((10,), [("a", 0)])]
    assert _run(_a_in(Select([(Unnest((Lit(3), Lit(None))), "u")], None), negated=True))[1] == []


def test_a_nested_select_may_take_the_outer_alias():
    from refquery import Bin
    # a CROSS b; the subquery's d AS t_a: a row of (a, b) passes when some d row has b's y and a's k
    # inside, t_a is d: `t_a.k` is d's k, `y` d's y; the outer row is read through t_b
    sub = Select([(Col("t_a", "k"), "k")], Table("d", "t_a"), Bin("=", Col(None, "y"), Col("t_b", "y")))
    from refquery import InSub
    q = Select([(Col("t_b", "z"), "z")], Join("CROSS", t("a"), t("b")), InSub(Col("t_a", "k"), sub))
    assert _run(q)[1] == [((21,), [("a", 0), ("b", 1), ("d", 1)])]


def _nulls_last(q):
    """``_run`` for rows that may hold NULLs: (rows, lineage) sorted with NULL last."""
    duck = Duck()
    duck.load(DATA)
    rel = Evaluator(DATA).run(q)
    assert Counter(rel.rows) == Counter(duck.con.sql(render(q)).fetchall()), render(q)
    return sorted(zip(rel.rows, [sorted(x) for x in rel.lins]), key=lambda p: [(v is None, v) for v in p[0]])


def test_a_predicate_inside_an_aggregates_argument_is_witnessed_per_input_row():
    """``sum(CASE WHEN x IN (S) ...)``, ``bool_or(...)``, ``sum(x + (scalar))``: the argument is evaluated per input
    row, its witnesses unioned over the group (nothing over zero rows); a NOT around the aggregate negates."""
    from refquery import Agg, Bin, Case, Exists, InSub, Not, Scalar
    in_b = Select([(Col("t_b", "k"), "k")], t("b"))
    k = Col("t_a", "k")
    counted = Agg("sum", Case(InSub(k, in_b), Lit(1), Lit(0)))
    q = Select([(k, "k"), (counted, "n")], t("a"), group=[k])
    assert _nulls_last(q) == [((1, 1), [("a", 0), ("b", 1)]),
                              ((2, 1), [("a", 2), ("b", 0)]), ((None, 0), [("a", 1)])]
    nothing = Bin(">", Col("t_a", "x"), Lit(100))
    assert _nulls_last(Select([(counted, "n")], t("a"), nothing, group=[])) == [((None,), [])]
    # NOT bool_and(k NOT IN b): two negations, a positive IN; bool_or(NOT k IN b): a negated IN, no witness
    having = Not(Agg("bool_and", InSub(k, in_b, negated=True)))
    assert _nulls_last(Select([(k, "k")], t("a"), group=[k], having=having)) == [
        ((1,), [("a", 0), ("b", 1)]), ((2,), [("a", 2), ("b", 0)])]
    negated = Agg("bool_or", Not(InSub(k, in_b)))
    assert _nulls_last(Select([(k, "k"), (negated, "f")], t("a"), group=[k])) == [
        ((1, False), [("a", 0)]), ((2, False), [("a", 2)]), ((None, None), [("a", 1)])]
    # a scalar subquery as a value: all its rows for each input row, none over zero rows
    plus = Agg("sum", Bin("+", Col("t_a", "x"), Scalar(Select([(Agg("max", Col("t_b", "z")), "m")], t("b"),
                                                              group=[]))))
    assert _nulls_last(Select([(plus, "n")], t("a"), group=[])) == [((96,), [("a", 0), ("a", 1), ("a", 2), ("b", 0),
                                                                        ("b", 1)])]
    assert _nulls_last(Select([(plus, "n")], t("a"), nothing, group=[])) == [((None,), [])]
    # an uncorrelated EXISTS over zero rows: nothing either
    exists = Agg("bool_or", Exists(Select([(Lit(1), "x")], t("b"))))
    assert _nulls_last(Select([(exists, "b")], t("a"), nothing, group=[])) == [((None,), [])]


def test_the_other_aggregates_are_duckdbs():
    """count_if (NULL over no value, as DuckDB's sum-like one), a FILTER, median, arg_max(x, x) and an ordered
    string_agg: the interpreter's values are DuckDB's, per group, over no rows, and in a correlated scalar
    subquery (an outer row without rows: the value over none)."""
    from refquery import Agg, Bin, Scalar
    data = {**DATA, "s": pa.table({"k": [1, 1, 2, None], "v": [3, None, 8, 1], "s": ["b", "a", None, "c"]})}
    k, v, s = Col("t_s", "k"), Col("t_s", "v"), Col("t_s", "s")
    big = Bin(">", v, Lit(2))
    aggs = [Agg("count_if", big), Agg("count", None, False, big), Agg("count", v, True, big),
            Agg("sum", v, False, big), Agg("median", v), Agg("arg_max", v), Agg("string_agg", s),
            Agg("string_agg", s, True, Bin("<>", s, Lit("a")))]
    items = [(a, f"c{i}") for i, a in enumerate(aggs)]
    duck = Duck()
    duck.load(data)
    for q in (Select([(k, "k")] + items, t("s"), group=[k]),
              Select(items, t("s"), Bin(">", v, Lit(100)), group=[]),
              Select([(Col("t_a", "k"), "k")] + [(Scalar(Select([(a, "m")], t("s"), Bin("=", k, Col("t_a", "k")),
                                                                group=[])), f"c{i}") for i, a in enumerate(aggs)],
                     t("a"))):
        assert Counter(Evaluator(data).run(q).rows) == Counter(duck.con.sql(render(q)).fetchall()), render(q)


def test_an_in_list_is_the_or_of_its_equalities():
    """``x IN (1, (S), NULL)`` (the generator's in_list_scalar): rows as DuckDB's; a scalar subquery in the list, or
    as ``x``, gives its rows as witnesses when its own equality is TRUE, whatever the list's other values give
    (docs/design.md: a scalar subquery compared directly); NOT IN, IS NOT TRUE: negated, no witnesses."""
    from refquery import Agg, Bin, InList, Is, Scalar
    top = Scalar(Select([(Agg("max", Col("t_b", "k")), "m")], t("b"), group=[]))  # 2, over both rows of b
    k = Col("t_a", "k")

    def a_where(test):
        return Select([(Col("t_a", "x"), "x")], t("a"), test)

    # k 1 by the literal (1 = 2 is FALSE: no witness), k 2 by the subquery, k NULL by nothing
    assert _run(a_where(InList(k, (Lit(1), top))))[1] == [((10,), [("a", 0)]), ((12,), [("a", 2), ("b", 0),
                                                                                            ("b", 1)])]
    # both TRUE for k 2: the subquery's rows all the same
    assert _run(a_where(InList(k, (top, Lit(2)))))[1] == [((12,), [("a", 2), ("b", 0), ("b", 1)])]
    # NOT IN: FALSE or NULL once a value matches or is NULL; a kept row has no witness
    assert _run(a_where(InList(k, (Lit(5), top), negated=True)))[1] == [((10,), [("a", 0)])]
    assert _run(a_where(InList(k, (Lit(5), Lit(None), top), negated=True)))[1] == []
    assert _run(a_where(Is(InList(k, (Lit(None), top)), "TRUE", True)))[1] == [((10,), [("a", 0)]),
                                                                               ((11,), [("a", 1)])]
    # a correlated subquery as x: b's z for a's k, against a's y and 20
    z = Scalar(Select([(Agg("max", Col("t_b", "z")), "m")], t("b"), Bin("=", Col("t_b", "k"), k), group=[]))
    assert _run(a_where(InList(z, (Col("t_a", "y"), Lit(20)))))[1] == [((12,), [("a", 2), ("b", 0)])]
    assert _run(Select([(Col("t_a", "x"), "x"), (InList(z, (Lit(21), Lit(None))), "f")], t("a")))[1] == [
        ((10, True), [("a", 0), ("b", 1)]), ((11, None), [("a", 1)]), ((12, None), [("a", 2)])]


def test_a_row_in_compares_element_by_element():
    """``(k, y) IN (S)`` (the generator's row_in): rows as DuckDB's; the rows of S comparing TRUE are the witnesses;
    a NULL element compares NULL (no row), as does a NULL in S; duplicates in S are all witnesses."""
    from refquery import Bin, RowIn
    f = Select([(Col("t_f", "k"), "k"), (Col("t_f", "y"), "y")], t("f"))  # (2, 5), (1, 100)
    both = SetOp("UNION", True, f, Select([(Col("t_b", "k"), "k"), (Col("t_b", "y"), "y")], t("b")))  # + (1, 100)

    def a_where(test):
        return Select([(Col("t_a", "x"), "x")], t("a"), test)

    row = (Col("t_a", "k"), Col("t_a", "y"))  # (1, 100), (NULL, NULL), (2, 5)
    assert _run(a_where(RowIn(row, f)))[1] == [((10,), [("a", 0), ("f", 1)]), ((12,), [("a", 2), ("f", 0)])]
    assert _run(a_where(RowIn(row, both)))[1] == [((10,), [("a", 0), ("b", 1), ("f", 1)]),
                                                 ((12,), [("a", 2), ("f", 0)])]
    # under OR: a row kept by the other side has no witnesses
    assert _run(a_where(Bin("OR", Bin("=", Col("t_a", "x"), Lit(12)), RowIn((Col("t_a", "k"), Lit(100)), f))))[1] \
        == [((10,), [("a", 0), ("f", 1)]), ((12,), [("a", 2)])]


# docs/design.md "Semantics" (and tests/test_semantics.py's hand-checked tables): control lineage is witness
# lineage plus the whole lineage of every predicate subquery, wherever it stands and whatever it gives, and EXCEPT's
# right side; a WHERE's or FILTER's to each input row (none over zero rows), a HAVING's to the output row
CT = pa.table({"a": pa.array([1, 2, 2, 3], pa.int64()), "b": pa.array([10, 20, 20, None], pa.int64())})
CU = pa.table({"a": pa.array([1, 2, 4, None, 2], pa.int64()), "c": pa.array([100, 200, 400, 500, 15], pa.int64())})


def _control_cases():
    from refquery import Agg, Bin, Exists, InSub, Is, Not, Scalar, SetOp

    ta, tb, ua, uc = Col("t", "a"), Col("t", "b"), Col("u", "a"), Col("u", "c")
    tt, uu = Table("t", "t"), Table("u", "u")
    u_a = Select([(ua, "a")], uu)
    every_u = [("u", i) for i in range(5)]
    return [
        ("except", SetOp("EXCEPT", False, Select([(ta, "a")], tt), u_a),
         [((3,), [("t", 3)])], [((3,), [("t", 3)] + every_u)]),
        ("not_in", Select([(ta, "a")], tt, InSub(ta, Select([(ua, "a")], uu, Is(ua, "NULL", True)), negated=True)),
         [((3,), [("t", 3)])], [((3,), [("t", 3), ("u", 0), ("u", 1), ("u", 2), ("u", 4)])]),
        ("in", Select([(tb, "b")], tt, InSub(ta, Select([(ua, "a")], uu, Bin(">", uc, Lit(150))))),
         [((20,), [("t", 1), ("u", 1)]), ((20,), [("t", 2), ("u", 1)])],
         [((20,), [("t", 1), ("u", 1), ("u", 2), ("u", 3)]), ((20,), [("t", 2), ("u", 1), ("u", 2), ("u", 3)])]),
        # a scalar compared under NOT: the kept row (10 > 15 FALSE) has no witness, but the whole subquery
        ("scalar_negated", Select([(ta, "a")], tt, Not(Bin(">", tb, Scalar(Select([(Agg("min", uc), "m")], uu,
                                                                                   group=[]))))),
         [((1,), [("t", 0)])], [((1,), [("t", 0)] + every_u)]),
        # a HAVING subquery's lineage is the output row's: a global aggregate over no rows has it
        ("having_over_nothing", Select([(Agg("count"), "n")], tt, Bin(">", ta, Lit(10)), group=[],
                                       having=InSub(Lit(1), u_a)),
         [((0,), [("u", 0)])], [((0,), every_u)]),
        # a WHERE subquery's goes to each input row: none over no rows
        ("where_over_nothing", Select([(Agg("count"), "n")], tt, Bin("AND", Bin(">", ta, Lit(10)), InSub(ta, u_a)),
                                      group=[]),
         [((0,), [])], [((0,), [])]),
        # a FILTER's subquery is evaluated per input row, as a WHERE's
        ("filter", Select([(Agg("count", None, False, InSub(ta, Select([(ua, "a")], uu, Bin(">", uc, Lit(150))))),
                            "n")], tt, group=[]),
         [((2,), [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 1)])],
         [((2,), [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 1), ("u", 2), ("u", 3)])]),
        # correlated: its rows for this outer row (an aggregate: one row, also over none), under NOT in the SELECT
        ("correlated_negated", Select([(ta, "a"), (Not(Exists(Select([(Agg("max", uc), "m")], uu, Bin("=", ua, ta),
                                                                      group=[]))), "e")], tt),
         [((1, False), [("t", 0)]), ((2, False), [("t", 1)]), ((2, False), [("t", 2)]), ((3, False), [("t", 3)])],
         [((1, False), [("t", 0), ("u", 0)]), ((2, False), [("t", 1), ("u", 1), ("u", 4)]),
          ((2, False), [("t", 2), ("u", 1), ("u", 4)]), ((3, False), [("t", 3)])]),
    ]


@pytest.mark.parametrize("name,q,witness,control", _control_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_control_lineage_adds_every_predicate_subquery_whole(name, q, witness, control):
    data = {"t": CT, "u": CU}
    duck = Duck()
    duck.load(data)
    for semantics, expected in (("witness", witness), ("control", control)):
        rel = Evaluator(data, semantics).run(q)
        assert Counter(rel.rows) == Counter(duck.con.sql(render(q)).fetchall()), render(q)
        assert sorted(zip(rel.rows, [sorted(x) for x in rel.lins])) == sorted(expected), (semantics, render(q))
