"""Run the generator-based oracles over many examples without stopping at the first failure, and tally the
outcomes per oracle and feature: ``python tests/hunt.py [N] [--allow a,b] [--boost a,b] [--seed S]`` (``--allow``:
the optional features drawn at all; ``--boost``: those drawn far more often than their modest default).

Outcomes: ok, refused (dltrace.UnsupportedQuery), invalid (DuckDB rejects the generated SQL: a generator
bug, or DuckDB fails internally on it), engine-bug (DuckDB fails internally on a TLP partition), interpreter
(the reference interpreter disagrees with DuckDB: an evaluator bug), an oracle's name (a dltrace failure), or
error:<type> (dltrace raised something else).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dltrace  # noqa: E402
from oracles import (Ambiguous, Duck, EngineBug, EngineRaises, InterpreterBug, OracleFailure, Refused, check_reference, check_tlp,  # noqa: E402
                     storage_for, tlp_applies)
from querygen_rich import rich_queries, rich_tables  # noqa: E402


def classify(session, data, g, tlp=True):
    duck = Duck()
    duck.load(data)
    try:
        duck.rows(g.sql)
    except EngineRaises:
        pass  # (the data makes the engine raise: check_reference checks that dltrace raises too)
    except Exception as e:  # noqa: BLE001
        return "invalid", str(e).splitlines()[0]
    try:
        notes = check_reference(session, duck, data, g)
        if tlp and tlp_applies(g.query):
            check_tlp(session, duck, g)
        if notes and notes[0].startswith("the engine raised"):
            return "ok/raised-as-the-engine", notes[0][:200]
        if notes:
            return "ok/backward-refused", notes[0][:200]
    except Refused as e:
        return "refused", str(e)[:200]
    except InterpreterBug as e:
        return "interpreter", str(e)
    except Ambiguous as e:
        return "ambiguous", str(e)[:200]
    except EngineBug as e:
        return "engine-bug", str(e)[:400]
    except OracleFailure as e:
        return e.oracle, str(e)
    except Exception as e:  # noqa: BLE001
        return f"error:{type(e).__name__}", "".join(traceback.format_exception_only(type(e), e))[:400]
    return "ok", ""


def minimize(session, target: str, allow, n: int) -> None:
    """Shrink to a minimal (tables, query) whose outcome is KIND (and whose message holds the substring)."""
    from hypothesis import find

    kind, _, sub = target.partition(":")

    def bad(x):
        data, g = x
        for name, t in data.items():
            session.register(name, t, replace=True, storage=storage_for(data))
        got, msg = classify(session, data, g)
        return got == kind and sub in msg

    data, g = find(st.tuples(rich_tables(), rich_queries(allow=allow)), bad,
                   settings=settings(max_examples=n, database=None, deadline=None,
                                     suppress_health_check=list(HealthCheck)))
    print("features:", sorted(g.features))
    print("sql:", g.sql)
    print("semantics:", g.semantics)
    print("data:", {name: t.to_pydict() for name, t in data.items() if f'{name}' in g.sql or name == 'my t'})
    print("outcome:", classify(session, data, g))


FIRED = Counter()


def _count_nested_rewrites():
    """Count how often the nested rewrite (and its inner-equality-join forms) is taken, printed at the end."""
    from dltrace.rewriter.passes import instrument
    from dltrace.rewriter.rules import nested_lineage

    def counting(name, fn):
        def wrapped(*a, **k):
            got = fn(*a, **k)
            FIRED[name + (" taken" if got is not None else " declined")] += 1
            return got
        return wrapped

    instrument.nested_group_lineage = counting("nested_group_lineage", instrument.nested_group_lineage)
    for name in ("preserved_side_apart", "null_safe_branches", "filtered_once", "grouped_before_join"):
        setattr(nested_lineage, name, counting(name, getattr(nested_lineage, name)))
    from dltrace.rewriter.rules import inner_equi_joins
    inner_equi_joins._inner_side_alone = counting("_inner_side_alone", inner_equi_joins._inner_side_alone)
    spans = nested_lineage.within_spans

    def counted_spans(*a, **k):
        got = spans(*a, **k)
        FIRED[f"within_spans: {len(got)} branch{'es' if len(got) > 1 else ''}"] += 1
        return got
    nested_lineage.within_spans = counted_spans
    import dltrace.rewriter as rewriter
    from dltrace.rewriter.passes import dense_ids

    def counted_dense_ids(expression, context, copy=True):
        out = dense_ids.dense_ids(expression, context, copy)
        if dense_ids.DENSE_IDS in out.meta:
            FIRED["dense_ids taken"] += 1
        return out

    rewriter.FORWARD_PASSES = tuple(counted_dense_ids if p is dense_ids.dense_ids else p
                                    for p in rewriter.FORWARD_PASSES)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=200)
    ap.add_argument("--allow", default=None, help="comma-separated optional features to allow (default: all)")
    ap.add_argument("--out", default=None, help="write every non-ok outcome as JSON lines here")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--setting", action="append", default=[],
                    help="a DuckDB SET statement for the traced connection (repeatable), e.g. "
                         "\"SET default_null_order = 'nulls_first'\": the oracles' own DuckDB keeps the defaults, "
                         "so a rewrite that leans on a default the query did not write shows as a failure")
    ap.add_argument("--boost", default=None, help="comma-separated optional features to draw far more often")
    ap.add_argument("--minimize", default=None, help="KIND[:message substring]: find and shrink one example")
    ap.add_argument("--regroup", action="store_true",
                    help="aggregates over grouped derived tables take the nested rewrite (rules/nested_lineage.py"
                         " MIN_GROUPS 0), which the generator's small tables never reach by themselves")
    args = ap.parse_args()
    if args.regroup:
        from dltrace.rewriter.rules import filtered_once, nested_lineage
        nested_lineage.MIN_GROUPS = 0
        filtered_once.EVERY_FILTER = True  # (and any condition of a table's own evaluated once there)
        from dltrace.rewriter.passes import dense_ids
        dense_ids.ALWAYS = True  # (and an aggregate over one table returns bit strings wherever valid)
        from dltrace.engines.duckdb_sql import DuckDBFunctions
        from dltrace.rewriter.rules import inner_equi_joins
        # (and the groups meet their rows again in spans of one value of an integer key)
        DuckDBFunctions.perfect_join_span, inner_equi_joins.MAX_SPANS = 1, 8
        _count_nested_rewrites()
    allow = frozenset(args.allow.split(",")) if args.allow else None
    if args.boost:
        import querygen_rich
        querygen_rich.BOOST = frozenset(args.boost.split(","))
    if args.setting:
        import duckdb
        con = duckdb.connect()
        for statement in args.setting:
            con.execute(statement)
        session = dltrace.connect("duckdb", connection=con)
    else:
        session = dltrace.connect("duckdb")
    outcomes, by_feature, samples = Counter(), defaultdict(Counter), defaultdict(list)
    out = open(args.out, "w") if args.out else None

    @settings(max_examples=args.n, database=None, deadline=None, suppress_health_check=list(HealthCheck),
              derandomize=args.seed is None)
    @given(data=rich_tables(), g=rich_queries(allow=allow))
    def run(data, g):
        storage = storage_for(data)
        for name, t in data.items():
            session.register(name, t, replace=True, storage=storage)
        kind, msg = classify(session, data, g)
        outcomes[kind] += 1
        for f in g.features:
            by_feature[f][kind] += 1
        if kind != "ok":
            samples[kind].append((len(g.sql), g.sql, msg))
            if out:
                out.write(json.dumps({"kind": kind, "features": sorted(g.features), "sql": g.sql, "semantics": g.semantics,
                                      "msg": msg,
                                      "data": {n: t.to_pydict() for n, t in data.items()}}) + "\n")

    if args.minimize:
        return minimize(session, args.minimize, allow, args.n)
    if args.seed is not None:  # (a given seed draws the same examples again)
        from hypothesis import seed
        run = seed(args.seed)(run)
    run()
    print(dict(outcomes))
    if FIRED:
        print("rewrites:", dict(FIRED))
    for kind, got in samples.items():
        if kind == "ok":
            continue
        got.sort()
        print(f"\n== {kind}: {len(got)}; shortest:")
        for _, sql, msg in got[:2]:
            print("  ", sql, "\n     ", msg[:600].replace("\n", "\n      "))
    print("\nper feature (non-ok share):")
    for f, c in sorted(by_feature.items()):
        bad = sum(v for k, v in c.items() if not k.startswith(("ok", "refused")))
        print(f"  {f:28s} n={sum(c.values()):4d} refused={c['refused']:3d} bad={bad:3d} {dict(c)}")


if __name__ == "__main__":
    main()
