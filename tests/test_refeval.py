"""Checks of the reference interpreter itself (tests/refeval.py) against DuckDB on hand-built ASTs: shapes where
the interpreter once disagreed with the engine (an oracle bug, not a dltrace one, but it stops the long runs)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from oracles import Duck
from refeval import Evaluator
from refquery import Col, Join, Lit, Select, Table, render

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
