"""The runner's PNG plots (matplotlib, Agg backend): time ratio to original per query (the paper's Figures 4 and
5, log axis) and serialised bytes per lineage id (the paper's Table 9, as a plot)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLORS = {"set": "#4C72B0", "bitmap": "#55A868", "reverse-one": "#C44E52", "reverse-all": "#8172B2"}
MARKS = {"timeout": "T", "oom": "M", "error": "E", "unsupported": "U"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def ratio_plot(records: list[dict[str, Any]], engine: str, path: Path, sf: float) -> Path | None:
    """Grouped bars: per query, each strategy's time / original's time, log scale; failed runs as letters."""
    rows = [r for r in records if r["engine"] == engine and r["strategy"] != "original"]
    if not rows or not any(r["ratio"] for r in rows):  # (no original run: a plot of a legend alone)
        return None
    plt = _pyplot()
    strategies = [s for s in COLORS if any(r["strategy"] == s for r in rows)]
    queries = sorted({r["query"] for r in records if r["engine"] == engine})
    by = {(r["query"], r["strategy"]): r for r in rows}
    ok = [r["ratio"] for r in rows if r["ratio"]]
    top = max(ok) * 2.5 if ok else 10.0
    bottom = min(min(ok) / 1.5, 0.5) if ok else 0.5
    fig, ax = plt.subplots(figsize=(min(16.0, max(8.0, 0.6 * len(queries) + 2)), 5.2))
    width = 0.8 / max(1, len(strategies))
    for k, s in enumerate(strategies):
        xs, ys = [], []
        for i, q in enumerate(queries):
            r = by.get((q, s))
            x = i + (k - (len(strategies) - 1) / 2) * width
            if r is None:
                continue
            if r["ratio"]:
                xs.append(x)
                ys.append(r["ratio"])
            elif r["status"] != "ok":
                ax.text(x, bottom * 1.15, MARKS.get(r["status"], "?"), ha="center", va="bottom", fontsize=8,
                        color=COLORS[s], fontweight="bold")
        # bars grow from 1 (the original's time): up when slower, down when faster
        ax.bar(xs, [y - 1.0 for y in ys], width=width * 0.95, color=COLORS[s], label=s, bottom=1.0)
    ax.set_yscale("log")
    ax.set_ylim(bottom, top)
    _ratio_ticks(ax)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(queries)))
    ax.set_xticklabels([f"Q{q}" for q in queries])
    ax.set_xlim(-0.6, len(queries) - 0.4)
    ax.set_ylabel("time / original time (log)")
    # (two lines: on a plot of a few queries one line was cut off at "U unsu")
    ax.set_title(f"{engine}, TPC-H SF {sf:g}: lineage strategies relative to the original query\n"
                 f"(T timeout, M out of memory, E error, U unsupported)", fontsize=10)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(ncol=len(strategies), loc="upper left", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ratio_ticks(ax) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def bytes_plot(records: list[dict[str, Any]], path: Path, sf: float) -> Path | None:
    """Per query, serialised bytes per lineage id for the bitmap strategy (each engine) against the paper's
    4 bytes per id and the set strategy's 8."""
    rows = [r for r in records if r["strategy"] == "bitmap" and r["status"] == "ok" and r["lineage_ids"]]
    if not rows:
        return None
    plt = _pyplot()
    engines = sorted({r["engine"] for r in rows})
    queries = sorted({r["query"] for r in rows})
    by = {(r["engine"], r["query"]): r for r in rows}
    fig, ax = plt.subplots(figsize=(min(16.0, max(8.0, 0.5 * len(queries) + 3)), 4.6))
    width = 0.8 / len(engines)
    shades = ["#55A868", "#937860", "#DA8BC3"]
    for k, e in enumerate(engines):
        xs, ys = [], []
        for i, q in enumerate(queries):
            r = by.get((e, q))
            if r:
                xs.append(i + (k - (len(engines) - 1) / 2) * width)
                ys.append(r["bytes_stored"] / r["lineage_ids"])
        ax.bar(xs, ys, width=width * 0.95, color=shades[k % len(shades)], label=f"bitmap ({e})")
    ax.axhline(4.0, color="#C44E52", linestyle="--", linewidth=1, label="4 B/id (paper, 32-bit ids)")
    ax.axhline(8.0, color="#4C72B0", linestyle=":", linewidth=1, label="8 B/id (set: BIGINT arrays)")
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(range(len(queries)))
    ax.set_xticklabels([f"Q{q}" for q in queries])
    ax.set_xlim(-0.6, len(queries) - 0.4)
    ax.set_ylabel("serialised bytes per lineage id (log)")
    ax.set_title(f"TPC-H SF {sf:g}: space of the lineage of all output rows, per id", fontsize=10)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
