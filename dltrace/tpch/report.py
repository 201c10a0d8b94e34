"""The runner's report: ``report.md`` (tables, plots and a summary generated from the numbers) and the final
terminal table. Reads only the JSON files in the output folder, so ``dltrace tpch --report-only`` rebuilds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from dltrace.tpch.plots import bytes_plot, ratio_plot
from dltrace.tpch.report_data import (BACKWARD, ENGINE_NAMES, STORAGE_TEXT, Data, bytes_text, cell_text, geomean,
                                      load_json, load_note, markdown_table, query_list, ratio_text, secs_text,
                                      storages)
from dltrace.tpch.report_summary import summary


# -- report.md ---------------------------------------------------------------------------------------

def _threads_text(m: dict) -> str:
    if "duckdb" not in (m.get("engines") or ["duckdb"]):
        return ""
    details = m.get("engine_details") or {}
    seen = sorted({v["threads"] for v in details.values() if isinstance(v, dict) and v.get("threads")})
    if m.get("threads"):
        return f"DuckDB threads: {m['threads']} (--threads)."
    if seen:
        return f"DuckDB threads: {', '.join(map(str, seen))} (DuckDB's default)."
    return "DuckDB threads: DuckDB's default." if "threads" in m else ""


def _details_text(m: dict) -> str:
    """What the workers reported about their sessions: memory held, Spark's cache (and what spilled)."""
    parts = []
    for label, v in (m.get("engine_details") or {}).items():
        if not isinstance(v, dict):
            continue
        bits = []
        if v.get("memory_bytes") and v.get("storage") == "memory":
            bits.append(f"DuckDB holds {bytes_text(v['memory_bytes'])}")
        if v.get("cached_memory_bytes") or v.get("cached_disk_bytes"):
            bits.append(f"cached {bytes_text(v.get('cached_memory_bytes'))} in memory, "
                        f"{bytes_text(v.get('cached_disk_bytes'))} spilled to disk "
                        f"({v.get('cached_partitions')}/{v.get('partitions')} partitions)")
        if v.get("master"):
            bits.append(f"master {v['master']}, default parallelism {v.get('default_parallelism')}")
        if bits:
            parts.append(f"{label}: " + "; ".join(bits))
    return ("After loading: " + "; ".join(parts) + ".") if parts else ""


def write_report(out: Path) -> Path:
    out = Path(out)
    records, chars = load_json(out, "results.json", []), load_json(out, "characteristics.json", [])
    meta, on = load_json(out, "run.json", {}), load_json(out, "lineage_on.json", [])
    d = Data(records, chars, meta, on)
    others = [Data(records, chars, meta, on, storage=x) for x in storages(records, meta) if x != d.storage]
    m = d.meta
    for old in [*(out / f"ratio_{e}.png" for e in ENGINE_NAMES), out / "bytes_per_id.png"]:
        old.unlink(missing_ok=True)  # (a plot an earlier run wrote into --out stayed beside a report without it)
    L = [f"# dltrace TPC-H report: SF {d.sf:g}, {d.storage} storage", ""]
    mach = m.get("machine", {})
    v = mach.get("versions", {})
    L.append(f"`{m.get('command', 'dltrace tpch')}`" + (" — **interrupted**: partial results" if m.get("interrupted") else ""))
    L.append("")
    mem = mach.get("memory_bytes")
    L.append(f"Machine: {mach.get('cpu', '?')}, {mach.get('cores', '?')} cores, {bytes_text(mem)} RAM, {mach.get('os', '?')}. "
             + ", ".join(f"{k} {x}" for k, x in v.items()) + ".")
    cpu = m.get("cpu_seconds") or {}
    cpu_text = (f" (CPU time {sum(cpu.values()):.0f} s: " + ", ".join(f"{k} {x:.0f} s" for k, x in cpu.items()) + ")"
                if cpu else "")
    L.append(f"Started {m.get('started', '?')}; wall time {m.get('wall_seconds') or 0:.0f} s{cpu_text}; "
             f"{m.get('warmup', 1)} warm-up + {m.get('repeat', '?')} timed runs per cell (median); timeout "
             f"{m.get('timeout', '?')} s per run; memory guard {bytes_text(m.get('memory_limit_bytes'))}."
             + load_note(m, mach))
    L.append("")
    L.append(f"Storage: **{STORAGE_TEXT.get(d.storage, d.storage)}**"
             + (f"; also run on {', '.join(o.storage for o in others)} storage (section \"Storage\" at the end)"
                if others else "") + ". " + " ".join(t for t in (_threads_text(m), _details_text(m)) if t))
    L += ["", "## What this shows", ""]
    if m.get("warmup", 1) == 0:  # (bitmap's 12x over 1.3x with one, presented as the overhead: a new user's)
        L += ["**No warm-up run**: each cell's first timed run pays one-off costs (the rewrite, kept per session "
              "after it; the engine's first call of a function), so the ratios below are above the overhead of a "
              "query run again.\n"]
    shown = [p + "\n" for p in summary(d) if p.strip()]
    if not shown and "original" not in d.strategies:
        shown = ["No original query was run (`--strategies` without `original`): the times below are seconds, "
                 "with no ratio to compare.\n"]
    L += shown or ["No completed runs.\n"]

    L += ["## Overhead: time relative to the original query", "",
          "Original: median seconds. Other strategies: median time / the median of the original query timed "
          "beside them (each run paired with a run of the original, in turn before and after it, in the same "
          "worker; the paper's Figures 4 and 5)."
          + (" ✗: lineage differs from the set strategy's (see Agreement)." if "set" in d.strategies else
             " Lineage is not compared: the set strategy, the reference, was not run."), ""]
    for e in d.engines:
        L += [f"### {ENGINE_NAMES.get(e, e)}, {d.storage} storage", ""]
        rows = [[f"Q{q}"] + [cell_text(d.get(e, q, s)) for s in d.strategies] for q in d.queries]
        rows.append(["geo. mean"] + [secs_text(geomean(r["seconds"] for q in d.queries if (r := d.get(e, q, s))
                                                      and r["seconds"])) if s == "original" else
                                     ratio_text(geomean(d.ratios(e, s).values())) for s in d.strategies])
        L += markdown_table(["query"] + d.strategies, rows) + [""]
        png = ratio_plot(d.records, e, out / f"ratio_{e}.png", d.sf)
        if png:
            L += [f"![{e} time ratio]({png.name})", ""]

    readable = [s for s in d.strategies if s != "original" and any(d.ratios(e, s, "readable_ratio") for e in d.engines)]
    if readable:
        L += ["## Time until every row's lineage is readable", "",
              "The run plus reading every lineage column once (median over the timed runs, / original): a bitmap "
              "column the engine returned as id lists is built when first read, so the overhead above is the "
              "capture and this is capture plus build; backward tracing returns its lineage ready.", ""]
        for e in d.engines:
            rows = [[f"Q{q}"] + [ratio_text(r["readable_ratio"]) if (r := d.get(e, q, s)) and r.get("readable_ratio") else "–"
                                 for s in readable] for q in d.queries]
            rows.append(["geo. mean"] + [ratio_text(geomean(d.ratios(e, s, "readable_ratio").values())) for s in readable])
            L += [f"### {ENGINE_NAMES.get(e, e)}, {d.storage} storage", ""]
            L += markdown_table(["query"] + readable, rows) + [""]

    if d.char:
        L += ["## Lineage characteristics (the paper's Table 7)", "",
              "From the set strategy's lineage of all output rows. Cardinality: output rows; average lineage "
              "size: ids per output row over all base tables; replication factor: in how many output rows a "
              "base tuple of the lineage appears on average; clustering factor: % of the ids of a row's sorted "
              "per-table lineage with a neighbour at distance < 3.", ""]
        rows = [[f"Q{q}", c["cardinality"], f"{c['avg_lineage_size']:,.1f}",
                 "–" if c["replication_factor"] is None else f"{c['replication_factor']:,.2f}",
                 "–" if c["clustering_factor"] is None else f"{c['clustering_factor']:.2f}",
                 f"{c['total_lineage_size']:,}", ", ".join(c.get("tables", {}))] for q, c in sorted(d.char.items())]
        L += markdown_table(["query", "cardinality", "avg. lineage size", "replication factor", "clustering factor (%)",
                     "total ids", "tables"], rows) + [""]

    rows = []
    for q in d.queries:
        ref = next((r for e in d.engines if (r := d.get(e, q, "set")) and r["status"] == "ok"), None)
        if ref is None:
            continue
        row = [f"Q{q}", ref["output_rows"], f"{ref['lineage_ids']:,}", bytes_text(ref["bytes_raw"]), bytes_text(ref["bytes_stored"])]
        for e in d.engines:
            b = d.get(e, q, "bitmap")
            ok = b and b["status"] == "ok" and b["bytes_stored"] is not None
            if ok:
                per_id = f" ({b['bytes_stored'] / b['lineage_ids']:.2f})" if b["lineage_ids"] else ""
                row.append(bytes_text(b["bytes_stored"]) + per_id)
            else:
                row.append(b["status"] if b else "–")
        rows.append(row)
    if rows:  # (the set strategy's runs are its reference: without them the section had a heading alone)
        L += ["## Space (the paper's Table 9)", "",
              "Lineage of all output rows: ids, bytes at 4 bytes per id (the paper), the set strategy's 8-byte "
              "BIGINT arrays, and the serialised roaring bitmaps (bytes per id in brackets).", ""]
        L += markdown_table(["query", "rows", "ids", "4 B/id", "set"] + [f"bitmap {e}" for e in d.engines], rows) + [""]
        png = bytes_plot(d.records, out / "bytes_per_id.png", d.sf)
        if png:
            L += [f"![bytes per lineage id]({png.name})", ""]

    L += memory_section(d)
    L += agreement_section(d)
    if len(d.engines) == 2:
        L += engines_section(d)
    L += lineage_on_section(d)
    for o in others:
        L += storage_section(d, o)
    L += ["## How this was measured", "",
          f"- Each cell: {_warmups_text(m.get('warmup', 1))}, then the timed runs; the median is reported. A run is "
          "the whole call: "
          "parse and rewrite, run on the engine, result (and lineage columns) back as Arrow. Decoding and "
          "comparing lineage happen after the timed runs and are not timed.",
          "- `reverse-one` traces output row 0 (`session.trace(sql, rows=[0])`); its rows, ids and bytes are that "
          "row's. `reverse-all` traces every output row in one batch.",
          "- Peak memory: the sum over the engine's worker process and its children (Spark's JVM) of each "
          "process's peak resident memory during the cell's runs (VmHWM, reset at the start of the cell, read when the "
          "runs end; plus /proc polling every 0.2 s), including the session itself.",
          "- Storage: `memory` loads the tables once when the worker starts (DuckDB: the rows with their `dl_rid` "
          "copied into a table of a private in-memory database, compressed by a checkpoint, the user's table a view "
          "of its own columns; Spark: the parquet rows with "
          "their ids, `cache()`d and counted); `parquet` registers views over the files, read at each query. "
          "Row ids, rows and lineage are the same in both; loading is not timed. With both storages, each has its own "
          "worker (up side by side) and a query runs on one storage right after the other, so a shared machine's "
          "changing load hits both alike.",
          "- Isolation: one worker process per engine (and storage); a run that exceeds the timeout or the memory guard is killed "
          "with its process tree, recorded, and the next cell starts on a fresh worker.",
          "- `bytes_stored`: set: 8 bytes per stored id (BIGINT arrays, Arrow offsets not counted); bitmap: the "
          "serialised portable roaring bytes. `bytes_raw`: 4 bytes per id (the paper's Table 9).",
          "- Timings on a shared 2-core machine are noisy: compare ratios measured in the same run.", ""]
    path = out / "report.md"
    path.write_text("\n".join(L))
    return path


def memory_section(d: Data) -> list[str]:
    if not any(r["peak_rss_bytes"] for r in d.records):
        return []
    L = ["## Peak memory", "",
         "Peak resident memory (MiB) of the engine's worker process and its children during a cell's runs (warm-up "
         "and timed; decoding lineage for the checks afterwards not included), the session itself included. On Spark this is mostly the JVM, whose heap grows between collections and is "
         "not returned, so it rises over the run whatever the strategy.", ""]
    for e in d.engines:
        rows = [[f"Q{q}"] + ["–" if not (r := d.get(e, q, s)) or not r["peak_rss_bytes"] else
                             f"{r['peak_rss_bytes'] / 2**20:,.0f}" for s in d.strategies] for q in d.queries]
        top = max((r for r in d.records if r["engine"] == e and r["peak_rss_bytes"]),
                  key=lambda r: r["peak_rss_bytes"], default=None)
        L += [f"### {ENGINE_NAMES.get(e, e)}", ""] + markdown_table(["query"] + d.strategies, rows) + [""]
        if top:
            L += [f"Highest: {bytes_text(top['peak_rss_bytes'])} (Q{top['query']} {top['strategy']}).", ""]
    return L


def agreement_section(d: Data) -> list[str]:
    strategies = [s for s in ("bitmap",) + BACKWARD if s in d.strategies]
    if not strategies or "set" not in d.strategies:
        return []
    L = ["## Agreement with the set strategy", "",
         "✓: this strategy's lineage equals the set strategy's row by row (as a multiset of (row values, lineage), "
         "so ORDER BY ties may come back in any order; reverse-one: its traced row is one of set's rows). "
         "bitmap must always agree. Backward tracing (Cui-Widom) equals forward lineage for queries without "
         "duplicate output rows and without negation (the paper's Theorem 6); with bag duplicates it returns the "
         "derivation pool shared by the duplicates, and under NOT EXISTS / NOT IN / EXCEPT it includes rows "
         "forward (witness) lineage leaves out, so there forward ⊆ backward is the expected relation.", ""]
    header = ["query"] + [f"{s} ({e})" for e in d.engines for s in strategies]
    rows, notes = [], []
    for q in d.queries:
        row = [f"Q{q}"]
        for e in d.engines:
            for s in strategies:
                r = d.get(e, q, s)
                row.append("–" if r is None or r["agrees"] is None else "✓" if r["agrees"] else "✗")
                if r is not None and r["agrees"] is False:
                    notes.append(f"- {ENGINE_NAMES.get(e, e)} Q{q} {s}: {r['message']}")
        rows.append(row)
    L += markdown_table(header, rows) + [""] + notes + ([""] if notes else [])
    return L


def engines_section(d: Data) -> list[str]:
    L = ["## DuckDB vs Spark", "",
         "Median seconds per engine, Spark / DuckDB, and each engine's overhead ratio for the forward and backward "
         "strategies; \"lineage\": the set strategy's lineage (row values and ids) is identical on both engines.", ""]
    dig = {}
    for c in d.chars:
        dig.setdefault(c["query"], {})[c["engine"]] = c.get("lineage_digest")
    others = [s for s in d.strategies if s != "original"]
    rows = []
    for q in d.queries:
        a, b = d.get("duckdb", q, "original"), d.get("spark", q, "original")
        sa, sb = (a or {}).get("seconds"), (b or {}).get("seconds")
        row = [f"Q{q}", secs_text(sa), secs_text(sb), ratio_text(sb / sa) if sa and sb else "–"]
        for s in others:
            row.append(" / ".join(cell_text(d.get(e, q, s)) or "–" for e in ("duckdb", "spark")))
        v = dig.get(q, {})
        row.append(("✓" if len(set(v.values())) == 1 else "✗") if len(v) == 2 else "–")
        rows.append(row)
    L += markdown_table(["query", "DuckDB", "Spark", "Spark/DuckDB"] + [f"{s} (DuckDB / Spark)" for s in others]
                + ["lineage"], rows) + [""]
    return L


def lineage_on_section(d: Data) -> list[str]:
    info = d.meta.get("lineage_on") or {}
    if not info.get("supported") or not d.lineage_on:
        return []
    L = ["## LINEAGE ON (the paper's Figure 6 and Table 8)", "",
         "`LINEAGE ON (year(l_shipdate), week(l_shipdate), l_shipmode)` added to the queries of the paper's "
         "section 5.5; ratio over the same engine's original query; ids are distinct value tuples.", ""]
    rows = []
    for r in d.lineage_on:
        avg = r["lineage_ids"] / r["output_rows"] if r["output_rows"] and r["lineage_ids"] is not None else None
        rows.append([ENGINE_NAMES.get(r["engine"], r["engine"]), f"Q{r['query']}", r["strategy"],
                     r["status"] if r["status"] != "ok" else ratio_text(r["ratio"]) if r["ratio"] else secs_text(r["seconds"]),
                     r["output_rows"] if r["output_rows"] is not None else "–",
                     f"{avg:.1f}" if avg is not None else "–", bytes_text(r["bytes_stored"])])
    return L + markdown_table(["engine", "query", "strategy", "time", "cardinality", "avg. lineage size", "bytes"], rows) + [""]


def storage_section(d: Data, o: Data) -> list[str]:
    """The same runs on another storage ``o``: its overhead table per engine, and the original query's time
    and each strategy's ratio side by side with the main storage ``d``."""
    L = [f"## Storage: {o.storage} beside {d.storage}", "",
         f"The same queries with the tables on {STORAGE_TEXT.get(o.storage, o.storage)}. Ratios are to the "
         f"original query on the same storage.", ""]
    for e in [e for e in d.engines if e in o.engines] or o.engines:
        name = ENGINE_NAMES.get(e, e)
        L += [f"### {name}, {o.storage} storage", ""]
        rows = [[f"Q{q}"] + [cell_text(o.get(e, q, s)) for s in o.strategies] for q in o.queries]
        rows.append(["geo. mean"] + [secs_text(geomean(r["seconds"] for q in o.queries if (r := o.get(e, q, s))
                                                      and r["seconds"])) if s == "original" else
                                     ratio_text(geomean(o.ratios(e, s).values())) for s in o.strategies])
        L += markdown_table(["query"] + o.strategies, rows) + [""]
        if e not in d.engines:
            continue
        qs = [q for q in d.queries if q in o.queries]
        base = [q for q in qs if (a := d.get(e, q, "original")) and a["seconds"]
                and (b := o.get(e, q, "original")) and b["seconds"]]
        if base:
            g = geomean(o.get(e, q, "original")["seconds"] / d.get(e, q, "original")["seconds"] for q in base)
            L.append(f"{name}: the original queries take {ratio_text(g)} as long on {o.storage} as on {d.storage} storage "
                     f"(geometric mean over {len(base)} queries).")
        gms = []
        for s in [s for s in d.strategies if s != "original" and s in o.strategies]:
            a, b = geomean(d.ratios(e, s).values()), geomean(o.ratios(e, s).values())
            if a and b:
                gms.append(f"{s} {ratio_text(a)} on {d.storage}, {ratio_text(b)} on {o.storage}")
        if gms:
            L.append("Geometric mean ratio to the original query: " + "; ".join(gms) + ".")
        dig = {}
        for x in (d, o):
            for c in x.chars:
                if c["engine"] == e:
                    dig.setdefault(c["query"], []).append(c.get("lineage_digest"))
        both = [q for q, v in dig.items() if len(v) == 2]
        if both:
            same = [q for q in both if dig[q][0] == dig[q][1]]
            L.append(f"Set lineage (rows and ids) is identical on both storages for {len(same)} of {len(both)} "
                     "queries" + (f" (differs on {query_list(set(both) - set(same))})" if len(same) < len(both) else "")
                     + ".")
        L.append("")
    return L


# -- terminal ----------------------------------------------------------------------------------------

def print_summary(records: list[dict[str, Any]], console: Console, meta: dict | None = None) -> None:
    for storage in storages(records, meta or {}):
        _print_storage(Data(records, [], meta or {}, [], storage=storage), console)


def _print_storage(d: Data, console: Console) -> None:
    records = d.records
    styles = {"timeout": "yellow", "oom": "red", "error": "red", "unsupported": "dim"}
    for e in d.engines:
        compared = "original" in d.strategies  # (without it every cell is seconds: the title said × original)
        unit = ("original in seconds, the others × original" if compared
                else "seconds (no original run to compare with)")
        t = Table(title=f"{ENGINE_NAMES.get(e, e)}, {d.storage} storage: {unit}", caption=
                  "✗: lineage differs from set's" if any(r["agrees"] is False for r in records if r["engine"] == e)
                  else None)
        t.add_column("query")
        for s in d.strategies:
            t.add_column(s, justify="right")
        for q in d.queries:
            cells = []
            for s in d.strategies:
                r = d.get(e, q, s)
                c = cell_text(r)
                cells.append(f"[{styles[r['status']]}]{c}[/]" if r and r["status"] in styles else c)
            t.add_row(f"Q{q}", *cells)
        t.add_row("geo. mean", *[secs_text(geomean(r["seconds"] for q in d.queries if (r := d.get(e, q, s)) and r["seconds"]))
                                 if s == "original" or not compared else ratio_text(geomean(d.ratios(e, s).values()))
                                 for s in d.strategies],
                  style="bold")
        console.print(t)


def _warmups_text(n: int) -> str:
    return "no warm-up run" if n == 0 else "one warm-up run" if n == 1 else f"{n} warm-up runs"
