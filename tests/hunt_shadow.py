"""A metamorphic oracle for shadowed names: ``python tests/hunt_shadow.py N SEED OUT.jsonl``.

Generates queries with the ``shadowed_alias`` feature boosted, renames every alias a nested SELECT takes from an
enclosing one to a fresh name (``rn``: an alpha-renaming, the same query), and runs dltrace (set lineage) on both:
they must agree (both refused, or the same rows with the same lineage). When they do not, the reference oracle
judges both. Tallies (outcome of the original, of the renamed); writes the disagreements as JSON lines to OUT.
Found: an EXISTS correlated by inequalities only under an aggregate (TPC-H Q21's late witnesses) was refused when its
table took an outer alias, and ran when renamed (mended: the rewrite renames such tables itself).
"""
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from refquery import Col, Join, Paren, Select, SetOp, Table, With, render  # noqa: E402

counter = [0]

def from_aliases(f):
    if f is None: return []
    if isinstance(f, Join): return from_aliases(f.left) + from_aliases(f.right)
    return [f.alias]

def rn(node, mapping, bound):
    if isinstance(node, Col):
        if node.qual is not None and node.qual.lower() in mapping:
            return dataclasses.replace(node, qual=mapping[node.qual.lower()])
        return node
    if isinstance(node, Select):
        local = from_aliases(node.from_)
        m2 = dict(mapping); new = {}
        for a in local:
            if a.lower() in bound:
                counter[0] += 1
                new[a.lower()] = f"{a}_ren{counter[0]}"
                m2[a.lower()] = new[a.lower()]
            else:
                m2.pop(a.lower(), None)
        b2 = bound | {a.lower() for a in local}
        def rf(f):
            if isinstance(f, Join):
                return dataclasses.replace(f, left=rf(f.left), right=rf(f.right),
                                           on=rn(f.on, m2, b2) if f.on is not None else None)
            alias = new.get(f.alias.lower(), f.alias)
            if isinstance(f, Table): return dataclasses.replace(f, alias=alias)
            q = f.query if isinstance(f.query, str) else rn(f.query, mapping, bound)
            return dataclasses.replace(f, query=q, alias=alias)
        # (by field name: a positional Select(...) once put the LIMIT in REPLACE's place in the TLP oracle)
        out = dataclasses.replace(
            node, items=None if node.items is None else [(rn(e, m2, b2), a) for e, a in node.items],
            from_=rf(node.from_) if node.from_ is not None else None, where=rn(node.where, m2, b2),
            group=None if node.group is None else [rn(g, m2, b2) for g in node.group], having=rn(node.having, m2, b2),
            replace=tuple((rn(e, m2, b2), c) for e, c in node.replace), qualify=rn(node.qualify, m2, b2))
        if hasattr(node, "width"): out.width = node.width
        return out
    if isinstance(node, (SetOp, With, Paren)) or (dataclasses.is_dataclass(node) and not isinstance(node, type)):
        if isinstance(node, With):
            return With([(n, rn(q, mapping, bound)) for n, q in node.ctes], rn(node.body, mapping, bound))
        changes = {f.name: rn(getattr(node, f.name), mapping, bound) for f in dataclasses.fields(node)}
        if isinstance(node, (SetOp, Paren)):
            out = dataclasses.replace(node, **changes)
            if hasattr(node, "width"): out.width = node.width
            return out
        return dataclasses.replace(node, **changes)
    if isinstance(node, (list, tuple)):
        return type(node)(rn(x, mapping, bound) for x in node)
    return node

if __name__ == "__main__":
    from collections import Counter
    from hypothesis import HealthCheck, given, settings, seed
    import dltrace, querygen_rich
    from querygen_rich import rich_queries, rich_tables
    from oracles import rows_of
    querygen_rich.BOOST = frozenset({"shadowed_alias"})
    s = dltrace.connect("duckdb")
    tally = Counter(); bad = []
    def outcome(sql):
        try:
            r = s.run(sql, lineage="set")
            rows = rows_of(r.table)
            return "ok", Counter((row, tuple(sorted((t, tuple(sorted(i))) for t, i in r.lineage(k).items() if i))) for k, row in enumerate(rows))
        except (dltrace.UnsupportedQuery, dltrace.ReservedName) as e:
            return "refused", str(e)[:150]
        except Exception as e:
            return "error", f"{type(e).__name__}: {str(e)[:200]}"
    @seed(int(sys.argv[2]))
    @settings(max_examples=int(sys.argv[1]), database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=rich_tables(), g=rich_queries())
    def run(data, g):
        if "shadowed_alias" not in g.features: return
        ren = rn(g.query, {}, frozenset())
        a, b = render(g.query), render(ren)
        if a == b: return
        for n, t in data.items(): s.register(n, t, replace=True)
        oa, ob = outcome(a), outcome(b)
        key = (oa[0], ob[0]) if oa[0] != "ok" or ob[0] != "ok" else ("same" if oa[1] == ob[1] else "DIFF", "")
        tally[key] += 1
        ref = ""
        if key[0] == "DIFF" or (key[0] != key[1] and key != ("same", "")):
            from oracles import Duck, check_reference
            from refquery import Generated
            res = []
            for q in (g.query, ren):
                duck = Duck(); duck.load(data)
                try:
                    check_reference(s, duck, data, Generated(q, g.features), backward=False); res.append("ok")
                except Exception as e:
                    res.append(f"{type(e).__name__}: {str(e)[:300]}")
            ref = res
        if (key[0] != key[1] and key != ("same", "")) or "error" in key:
            bad.append({"orig": a, "renamed": b, "oa": str(oa[1])[:600], "ob": str(ob[1])[:600], "ref": ref,
                        "data": {n: t.to_pydict() for n, t in data.items()}})
    run()
    print(dict(tally))
    with open(sys.argv[3], "w") as f:
        for x in bad: f.write(json.dumps(x) + "\n")
    for x in sorted(bad, key=lambda x: len(x["orig"]))[:4]:
        print("\nORIG:", x["orig"], "\n  ->", x["oa"][:300], "\nREN: ", x["renamed"], "\n  ->", x["ob"][:300], "\nREF:", x["ref"])
