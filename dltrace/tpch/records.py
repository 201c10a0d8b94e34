"""What a ``dltrace tpch`` run writes: one record per (engine, storage, query, strategy) run, the machine it ran
on, and the JSON files in ``--out`` (rewritten after every run, so an interrupted invocation leaves a report)."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
from pathlib import Path
from typing import Any

from dltrace.tpch import procmon
from dltrace.tpch.options import STORAGES, command_line

STATUSES = ("ok", "timeout", "oom", "error", "unsupported")
RECORD_KEYS = ("engine", "storage", "sf", "query", "strategy", "status", "seconds", "seconds_all", "ratio",
               "readable_seconds", "readable_ratio", "output_rows", "lineage_ids", "bytes_raw", "bytes_stored",
               "agrees", "peak_rss_bytes", "message", "paired_original_seconds")


def make_record(engine: str, sf: float, query: int, strategy: str, fields: dict[str, Any],
                original_seconds: float | None, peak: int | None, storage: str = STORAGES[0]) -> dict[str, Any]:
    rec = {"engine": engine, "storage": storage, "sf": sf, "query": query, "strategy": strategy, **fields,
           "peak_rss_bytes": int(peak) if peak else None}
    if strategy == "original":
        rec["agrees"] = None
        rec["ratio"] = 1.0 if rec["status"] == "ok" else None
    else:
        # against the original timed beside this strategy's runs in the same job when there is one
        base = rec.get("paired_original_seconds") or original_seconds
        ok = rec["status"] == "ok" and rec["seconds"] is not None and base
        rec["ratio"] = rec["seconds"] / base if ok else None
        readable = rec.get("readable_seconds")
        rec["readable_ratio"] = readable / base if ok and readable is not None else None
    if rec["status"] != "ok":
        rec["seconds"] = None
        rec["readable_seconds"] = None
    return {k: rec.get(k) for k in RECORD_KEYS}


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {"python": platform.python_version()}
    for mod in ("dltrace", "duckdb", "pyspark", "pyarrow", "sqlglot", "pyroaring"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            pass
    total = procmon.total_memory_bytes()
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": total, "os": platform.platform(),
            "versions": versions}


class RunnerOutput:
    """What one ``dltrace tpch`` invocation produces: its records and metadata so far, and the folder they are
    written to (after every run, so an interrupted invocation still leaves a report)."""

    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args = args
        self.out = out
        self.records: list[dict[str, Any]] = []
        self.lineage_on: list[dict[str, Any]] = []
        self.characteristics: list[dict[str, Any]] = []
        self.meta: dict[str, Any] = {
            "command": command_line(args), "sf": args.sf, "engines": args.engines, "strategies": args.strategies,
            "storage": args.storage, "threads": args.threads, "engine_details": {},
            "queries": args.queries, "repeat": args.repeat, "warmup": args.warmup, "timeout": args.timeout,
            "memory_limit_bytes": None, "machine": machine(), "started": _dt.datetime.now().isoformat(timespec="seconds"),
            "wall_seconds": None, "interrupted": False, "load_average_start": load_average(),
            "cpu_seconds": {}, "engine_start_seconds": {}, "lineage_on": None,
        }

    def save(self) -> None:
        _write_json(self.out / "results.json", self.records)
        _write_json(self.out / "characteristics.json", self.characteristics)
        _write_json(self.out / "run.json", self.meta)
        if self.lineage_on:
            _write_json(self.out / "lineage_on.json", self.lineage_on)


def load_average() -> float | None:
    """The 1-minute load average: on a shared machine it says how much else was running."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None
