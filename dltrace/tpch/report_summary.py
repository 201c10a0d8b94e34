"""The report's generated summary: one paragraph per engine (geometric means, bitmap against set, backward
against forward, agreement), the space used and the engines side by side, all computed from the records."""

from __future__ import annotations

from dltrace.tpch.report_data import (BACKWARD, ENGINE_NAMES, LARGE_LINEAGE, Data, geomean, query_list,
                                      ratio_text, secs_text)


def summary(d: Data) -> list[str]:
    paras = []
    for e in d.engines:
        name = ENGINE_NAMES.get(e, e)
        parts = []
        gm = {s: (geomean(d.ratios(e, s).values()), len(d.ratios(e, s))) for s in d.strategies if s != "original"}
        costs = [f"{s} {ratio_text(g)} ({n} queries)" for s, (g, n) in gm.items() if g]
        if costs:
            parts.append(f"On {name} (SF {d.sf:g}), the geometric mean of time over the original query is "
                         + ", ".join(costs) + ".")
        rs, rb = d.ratios(e, "set"), d.ratios(e, "bitmap")
        both = sorted(set(rs) & set(rb))
        if both:
            wins = [q for q in both if rb[q] < rs[q]]
            large = [q for q in both if d.char.get(q, {}).get("avg_lineage_size", 0) >= LARGE_LINEAGE]
            small = [q for q in both if q not in large]
            s = f"bitmap is faster than set on {len(wins)} of {len(both)} queries"
            if large:
                g = geomean(rb[q] / rs[q] for q in large)
                s += (f"; on the {len(large)} large-lineage queries (≥ {LARGE_LINEAGE} ids per row: {query_list(large)}) "
                      f"bitmap takes {ratio_text(g)} set's time")
            if small:
                s += f", on the other {len(small)} {ratio_text(geomean(rb[q] / rs[q] for q in small))}"
            parts.append(s[0].upper() + s[1:] + ".")
        fwd = {q: min(v for v in (rs.get(q), rb.get(q)) if v) for q in set(rs) | set(rb)}
        for s in BACKWARD:
            rr = d.ratios(e, s)
            common = sorted(set(rr) & set(fwd))
            if common:
                beats = [q for q in common if rr[q] < fwd[q]]
                g = geomean(rr[q] / fwd[q] for q in common)
                parts.append(f"{s} costs {ratio_text(g)} the faster forward strategy's time (geometric mean over "
                             f"{len(common)} queries)" + (f" and beats it on {query_list(beats)}." if beats else
                                                          " and never beats it."))
        fails = {}
        for r in d.records:
            if r["engine"] == e and r["status"] != "ok":
                fails.setdefault((r["strategy"], r["status"]), []).append(r["query"])
        if fails:
            parts.append("Not completed: " + "; ".join(f"{s} {st} on {query_list(qs)}" for (s, st), qs in
                                                       sorted(fails.items())) + ".")
        base = sorted(r["seconds"] for q in d.queries if (r := d.get(e, q, "original")) and r["seconds"])
        if base and base[len(base) // 2] < 0.1:
            parts.append(f"The original queries take a median {secs_text(base[len(base) // 2])} here, so fixed "
                         "per-query costs (the engine parsing the longer SQL, a shared-lineage query, each extra "
                         "tracing query and, for backward tracing, rewriting in Python at each run) weigh as much as "
                         "execution; a larger --sf shows what the engine pays.")
        agree = []
        for s in ("bitmap",) + BACKWARD:
            rows = [r for q in d.queries if (r := d.get(e, q, s)) and r["agrees"] is not None]
            if rows:
                bad = [r for r in rows if not r["agrees"]]
                t = f"{s} equals set on {len(rows) - len(bad)} of {len(rows)}"
                if bad:
                    sub = [r["query"] for r in bad if "subset on each" in (r["message"] or "")]
                    t += f" (differs on {query_list(r['query'] for r in bad)}"
                    t += f"; set is a subset on {query_list(sub)}" if sub else ""
                    t += ")"
                agree.append(t)
        if agree:
            parts.append("Lineage agreement: " + "; ".join(agree) + ".")
        paras.append(" ".join(parts))
    space = [r for r in d.records if r["strategy"] == "bitmap" and r["status"] == "ok" and r["lineage_ids"]]
    if space:
        per_id = sorted(r["bytes_stored"] / r["lineage_ids"] for r in space)
        big = [r for r in space if d.char.get(r["query"], {}).get("avg_lineage_size", 0) >= LARGE_LINEAGE]
        t = (f"Space: serialised bitmaps take a median {per_id[len(per_id) // 2]:.2f} bytes per lineage id "
             f"(from {per_id[0]:.2f} to {per_id[-1]:.2f}) against the paper's 4")
        if big:
            under = sum(1 for r in big if r["bytes_stored"] < r["lineage_ids"])
            t += f"; under 1 byte per id on {under} of {len(big)} large-lineage runs"
        paras.append(t + ".")
    if len(d.engines) == 2:
        common = [q for q in d.queries if all((r := d.get(e, q, "original")) and r["seconds"] for e in d.engines)]
        if common:
            g = geomean(d.get("spark", q, "original")["seconds"] / d.get("duckdb", q, "original")["seconds"]
                        for q in common)
            t = f"Spark runs the original queries in {ratio_text(g)} DuckDB's time (geometric mean, {len(common)} queries)"
            dig = {}
            for c in d.chars:
                dig.setdefault(c["query"], {})[c["engine"]] = c.get("lineage_digest")
            both = [q for q, v in dig.items() if len(v) == 2]
            if both:
                same = [q for q in both if len(set(dig[q].values())) == 1]
                t += (f"; set lineage is identical on both engines for {len(same)} of {len(both)} queries"
                      + (f" (differs on {query_list(set(both) - set(same))})" if len(same) < len(both) else ""))
            paras.append(t + ".")
    return paras
