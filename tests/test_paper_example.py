"""The paper's worked example (section 2, Tables 1-6, and the subquery example of section 3.4)."""

from __future__ import annotations

import paper_example as P


def test_q1_reproduces_table_6(paper):
    r = paper.run(P.Q1)
    got = sorted((tuple(r.row(i).values()), tuple(sorted(r.lineage(i).items()))) for i in range(r.num_rows))
    # Table 6: {d.01, i.01, s.01}, {d.01, i.02, s.02}, {d.02, i.01, s.04}, {d.02, i.02, s.05} (rid = id - 1)
    want = sorted([
        (("Target", "binder"), (("item", [0]), ("sales", [0]), ("store", [0]))),
        (("Target", "pencil"), (("item", [1]), ("sales", [1]), ("store", [0]))),
        (("Target", "binder"), (("item", [0]), ("sales", [3]), ("store", [1]))),
        (("Target", "pencil"), (("item", [1]), ("sales", [4]), ("store", [1]))),
    ])
    assert got == want
    # the two duplicate <Target, binder> rows each have their own lineage (Lemma 1)
    binders = [r.lineage(i) for i in range(r.num_rows) if r.row(i)["i_name"] == "binder"]
    assert len(binders) == 2 and binders[0] != binders[1]
    assert all(r.verify(i) for i in range(r.num_rows))


def test_q4_nested_aggregation(paper):
    r = paper.run(P.Q4)
    got = {r.row(i)["s_name"]: r.lineage(i) for i in range(r.num_rows)}
    # Target: stationery (binder, pencil) sold 6800 > 5000; Macy's: clothing sold 5400 > 5000
    assert got == {
        "Target": {"item": [0, 1], "store": [0, 1], "sales": [0, 1, 3, 4]},
        "Macy's": {"item": [2, 3], "store": [2, 3], "sales": [6, 7, 8, 9]},
    }
    assert all(r.verify(i) for i in range(r.num_rows))


def test_q8_subquery_witness_and_control(paper):
    w = paper.run(P.Q8)
    c = paper.run(P.Q8, semantics="control")
    assert w.table.to_pylist() == [{"i_name": "pencil"}]
    assert w.lineage(0) == {"item": [1], "sales": [1]}
    # control lineage (Q_9): the whole lineage of the subquery, here the same single sales row
    assert c.lineage(0) == {"item": [1], "sales": [1]}
    # with a wider subquery the two differ: control takes every row the subquery returns
    q = P.Q8.replace("s.num > 1500", "s.num > 500")
    w2, c2 = paper.run(q), paper.run(q, semantics="control")
    assert {w2.row(i)["i_name"]: w2.lineage(i)["sales"] for i in range(w2.num_rows)} == {
        "binder": [0], "pencil": [1], "pants": [2]}
    assert all(c2.lineage(i)["sales"] == [0, 1, 2] for i in range(c2.num_rows))
