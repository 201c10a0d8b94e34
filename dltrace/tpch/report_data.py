"""The runner's records of one storage and how the report writes a number: what ``report.py`` and
``report_summary.py`` read."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dltrace.errors import DltraceError, read_user_text

FORWARD = ("set", "bitmap")
BACKWARD = ("reverse-one", "reverse-all")
LARGE_LINEAGE = 1000  # average ids per output row from which a query counts as "large lineage" (paper 4.1)
ENGINE_NAMES = {"duckdb": "DuckDB", "spark": "Spark"}
STORAGE_TEXT = {
    "memory": "memory (DuckDB native tables, compressed; Spark cached DataFrames: loaded once before the runs)",
    "parquet": "parquet (views over the parquet files, read at each query)",
}
OLD_STORAGE = "parquet"  # results written before --storage existed ran on views over the parquet files


def storage_of(r: dict[str, Any]) -> str:
    return r.get("storage") or OLD_STORAGE


def storages(records, meta) -> list[str]:
    """The storages with results, in the order the run asked for them (the first is the report's main one)."""
    found = {storage_of(r) for r in records}
    asked = [x for x in (meta.get("storage") or []) if x in found]
    return asked + sorted(found - set(asked))


def load_json(out: Path, name: str, default: Any) -> Any:
    """The JSON file ``name`` a run wrote into ``out`` (``default`` when there is none), of ``default``'s type,
    or one line naming the file that is not what a run writes (a truncated or hand-edited one)."""
    p = out / name
    if not p.is_file():
        return default
    try:
        data = json.loads(read_user_text(p, "results file"))
    except ValueError as e:
        raise DltraceError(f"cannot read {str(p)!r}: it is not valid JSON ({e})") from None
    if not isinstance(data, type(default)):
        raise DltraceError(f"cannot read {str(p)!r}: a run writes a JSON {type(default).__name__}, this holds a "
                           f"{type(data).__name__}")
    return data


def geomean(values) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def ratio_text(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.2f}×" if v < 10 else f"{v:.1f}×" if v < 100 else f"{v:.0f}×"


def secs_text(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def bytes_text(v: int | None) -> str:
    if v is None:
        return "–"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= size:
            return f"{v / size:.1f} {unit}"
    return f"{v} B"


def query_list(qs) -> str:
    return ", ".join(f"Q{q}" for q in sorted(qs))


def load_note(meta: dict, mach: dict) -> str:
    loads = [x for x in (meta.get("load_average_start"), meta.get("load_average_end")) if x is not None]
    if not loads:
        return ""
    text = f" Load average {' → '.join(f'{x:.1f}' for x in loads)}"
    cores = mach.get("cores") or 0
    if cores and max(loads) > cores:
        text += f" on {cores} cores: other work shared the machine, so absolute times are inflated"
    return text + "."


def cell_text(r: dict[str, Any] | None) -> str:
    if r is None:
        return ""
    if r["status"] != "ok":
        return r["status"]
    if r["strategy"] == "original":
        return secs_text(r["seconds"])
    mark = " ✗" if r["agrees"] is False else ""
    return (ratio_text(r["ratio"]) if r["ratio"] is not None else secs_text(r["seconds"])) + mark


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "--:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


class Data:
    """The records of one storage (``storage``; default the run's first) and what is computed from them."""

    def __init__(self, records, chars, meta, lineage_on, storage: str | None = None) -> None:
        self.storage = storage or (storages(records, meta) or [OLD_STORAGE])[0]
        records = [r for r in records if storage_of(r) == self.storage]
        chars = [c for c in chars if storage_of(c) == self.storage]
        lineage_on = [r for r in lineage_on if storage_of(r) == self.storage]
        self.records, self.chars, self.meta, self.lineage_on = records, chars, meta, lineage_on
        self.engines = [e for e in ("duckdb", "spark") if any(r["engine"] == e for r in records)]
        self.strategies = [s for s in ("original",) + FORWARD + BACKWARD if any(r["strategy"] == s for r in records)]
        self.queries = sorted({r["query"] for r in records})
        self.by = {(r["engine"], r["query"], r["strategy"]): r for r in records}
        self.sf = meta.get("sf") or (records[0]["sf"] if records else 0)
        self.char = {}
        for c in chars:  # Table 7 from the first engine that has it (duckdb first); lineage is engine-independent
            self.char.setdefault(c["query"], c)

    def get(self, engine, q, s):
        return self.by.get((engine, q, s))

    def ratios(self, engine, strategy, key: str = "ratio") -> dict[int, float]:
        return {q: r[key] for q in self.queries if (r := self.get(engine, q, strategy)) and r.get(key)}
