"""``dltrace tpch``: the paper's experiments (section 5) on DuckDB and Spark, as one command with a report.

For each engine x query x strategy: a warm-up and ``--repeat`` timed runs (the median is reported), the ratio to
the original query timed beside them (original and strategy alternately, in the same worker: a shared
machine's load bursts meet both alike), lineage size and bytes, agreement with the set strategy's lineage
and peak memory. Output in ``--out``: ``results.json``, ``characteristics.json`` (Table 7), ``report.md`` and
PNG plots (see :mod:`dltrace.tpch.report`).

Isolation: one worker process per engine keeps its session (Spark starts once), the parent sends it jobs and
enforces the per-run timeout and the memory guard by killing the worker's process tree (by pid) and starting a
new worker for the next job. Ctrl-C stops the run and writes what is done so far.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from dltrace.errors import DltraceError
from dltrace.tpch import procmon, report
from dltrace.tpch.isolation import WorkerFailed, WorkerHandle, failure
from dltrace.tpch.worker import LINEAGE_ON_QUERIES, STRATEGIES, lineage_on_supported
from dltrace.tpch_data import TABLES, ensure_tpch, tpch_dir

ENGINES = ("duckdb", "spark")
# --storage: where the tables' rows live while the queries run. memory: DuckDB native tables, Spark cached
# DataFrames (loaded once when the worker starts: what most users query, and what SmokedDuck measures);
# parquet: views over the parquet files, read at each query. The library's names for the two are
# "memory" and "source" (Session.load_tpch(sf, storage=...)).
STORAGES = ("memory", "parquet")
LIBRARY_STORAGE = {"memory": "memory", "parquet": "source"}
STATUSES = ("ok", "timeout", "oom", "error", "unsupported")
RECORD_KEYS = ("engine", "storage", "sf", "query", "strategy", "status", "seconds", "seconds_all", "ratio",
               "readable_seconds", "readable_ratio", "output_rows", "lineage_ids", "bytes_raw", "bytes_stored",
               "agrees", "peak_rss_bytes", "message", "paired_original_seconds")


# -- arguments ---------------------------------------------------------------------------------------

def _csv(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [t.strip().lower() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {','.join(choices)} (got {text!r})")
        return [c for c in choices if c in items]  # canonical order: original and set first
    return parse


def parse_queries(text: str) -> list[int]:
    """``1-22``, ``1,3,6``, ``1-5,7`` -> sorted query numbers."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip().lower().removeprefix("q")
            if not part:
                continue
            if "-" in part:
                a, b = part.split("-", 1)
                out.update(range(int(a.strip().lower().removeprefix("q")), int(b.strip().lower().removeprefix("q")) + 1))
            else:
                out.add(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"queries are numbers and ranges like 1-22 or 1,3,6 (got {text!r})") from None
    bad = sorted(q for q in out if not 1 <= q <= 22)
    if bad or not out:
        raise argparse.ArgumentTypeError(f"TPC-H has queries 1-22 (got {text!r})")
    return sorted(out)


def _positive(kind: type) -> Callable[[str], Any]:
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return v
    return parse


def _default_driver_memory() -> str:
    total = procmon.total_memory_bytes() or (4 << 30)
    return f"{max(1, min(4, int(total * 0.3) >> 30))}g"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``dltrace tpch``."""
    p.add_argument("--sf", type=_positive(float), default=0.1, help="TPC-H scale factor (default 0.1)")
    p.add_argument("--engines", type=_csv(ENGINES), default=list(ENGINES), metavar="LIST",
                   help="comma-separated engines (default duckdb,spark)")
    p.add_argument("--strategies", type=_csv(STRATEGIES), default=list(STRATEGIES), metavar="LIST",
                   help="comma-separated strategies (default original,set,bitmap,reverse-one,reverse-all)")
    p.add_argument("--queries", type=parse_queries, default=list(range(1, 23)), metavar="LIST",
                   help="query numbers and ranges, e.g. 1-22 or 1,3,6 (default 1-22)")
    p.add_argument("--storage", type=_csv(STORAGES), default=[STORAGES[0]], metavar="LIST",
                   help="where the tables live: memory (DuckDB native tables, Spark cached DataFrames, loaded "
                        "once) or parquet (views over the files, read at each query); memory,parquet runs both, "
                        "the report shows memory first (default memory)")
    p.add_argument("--threads", type=_positive(int), default=None, metavar="N",
                   help="DuckDB threads (default: DuckDB's own, one per core)")
    p.add_argument("--repeat", type=_positive(int), default=3, help="timed runs after the warm-up (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up runs (default 1)")
    p.add_argument("--timeout", type=_positive(float), default=300.0,
                   help="seconds one run may take before it is stopped and recorded as timeout (default 300)")
    p.add_argument("--memory-limit", default="75%", metavar="SIZE",
                   help="memory guard on a worker and its children, e.g. 75%% (of RAM), 8G, off (default 75%%)")
    p.add_argument("--out", default="dltrace-report", metavar="DIR",
                   help="output folder (default ./dltrace-report)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help=f"Spark setting, repeatable (default driver memory {_default_driver_memory()})")
    p.add_argument("--report-only", action="store_true",
                   help="only rebuild report.md and the plots from the JSON files already in --out")
    # test hook: QUERY:STRATEGY:SECONDS makes that job sleep before each run (forces a timeout)
    p.add_argument("--debug-sleep", action="append", default=[], help=argparse.SUPPRESS)


# -- the run -----------------------------------------------------------------------------------------

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


def _debug_sleeps(specs: list[str]) -> dict[tuple[int, str], float]:
    out = {}
    for spec in specs:
        q, strategy, seconds = spec.split(":")
        out[(int(q), strategy)] = float(seconds)
    return out


def _spark_options(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {"spark.driver.memory": _default_driver_memory()}
    for spec in args.spark_conf:
        k, sep, v = spec.partition("=")
        if not sep or not k:
            raise DltraceError(f"--spark-conf expects KEY=VALUE, got {spec!r}")
        conf[k if k.startswith("spark.") else "spark." + k] = v
    return {"master": args.master, **conf}


def _command(args: argparse.Namespace) -> str:
    parts = ["dltrace tpch", f"--sf {args.sf:g}", f"--engines {','.join(args.engines)}",
             f"--strategies {','.join(args.strategies)}", f"--queries {_ranges(args.queries)}",
             f"--storage {','.join(args.storage)}"]
    if args.threads:
        parts.append(f"--threads {args.threads}")
    parts += [f"--repeat {args.repeat}", f"--timeout {args.timeout:g}"]
    if args.warmup != 1:
        parts.append(f"--warmup {args.warmup}")
    if "spark" in args.engines and args.master != "local[2]":
        parts.append(f"--master {args.master}")
    parts.append(f"--out {args.out}")
    return " ".join(parts)


def _ranges(qs: list[int]) -> str:
    out, i = [], 0
    while i < len(qs):
        j = i
        while j + 1 < len(qs) and qs[j + 1] == qs[j] + 1:
            j += 1
        out.append(f"{qs[i]}-{qs[j]}" if j > i else str(qs[i]))
        i = j + 1
    return ",".join(out)


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
            "command": _command(args), "sf": args.sf, "engines": args.engines, "strategies": args.strategies,
            "storage": args.storage, "threads": args.threads, "engine_details": {},
            "queries": args.queries, "repeat": args.repeat, "warmup": args.warmup, "timeout": args.timeout,
            "memory_limit_bytes": None, "machine": machine(), "started": _dt.datetime.now().isoformat(timespec="seconds"),
            "wall_seconds": None, "interrupted": False, "load_average_start": _load_average(),
            "cpu_seconds": {}, "engine_start_seconds": {}, "lineage_on": None,
        }

    def save(self) -> None:
        _write_json(self.out / "results.json", self.records)
        _write_json(self.out / "characteristics.json", self.characteristics)
        _write_json(self.out / "run.json", self.meta)
        if self.lineage_on:
            _write_json(self.out / "lineage_on.json", self.lineage_on)


def _plan(args: argparse.Namespace, lineage_on: bool) -> list[tuple[str, str, int, str, bool]]:
    """(engine, storage, query, strategy, LINEAGE ON?) in run order: engine by engine, and per query its storages
    one after the other (their workers stay up side by side), so that a shared machine's load, which changes
    over a long run, hits both storages of a query alike; the LINEAGE ON experiment on the first storage only."""
    jobs = []
    for engine in args.engines:
        for q in args.queries:
            for storage in args.storage:
                for strategy in args.strategies:
                    jobs.append((engine, storage, q, strategy, False))
        if lineage_on:
            for q in [q for q in LINEAGE_ON_QUERIES if q in args.queries]:
                for strategy in [s for s in ("set", "bitmap") if s in args.strategies]:
                    jobs.append((engine, args.storage[0], q, strategy, True))
    return jobs


def worker_options(args: argparse.Namespace, engine: str, storage: str) -> dict[str, Any]:
    """What the worker of (engine, storage) opens its session with and how it loads the tables."""
    options = _spark_options(args) if engine == "spark" else {"threads": args.threads} if args.threads else {}
    return {"connect": options, "storage": LIBRARY_STORAGE[storage]}


def execute(args: argparse.Namespace, output: RunnerOutput, console: Console) -> None:
    on_ok, on_why = lineage_on_supported()
    output.meta["lineage_on"] = {"supported": on_ok, "message": on_why or None}
    jobs = _plan(args, on_ok)
    sleeps = _debug_sleeps(args.debug_sleep)
    mem_limit = procmon.parse_size(args.memory_limit, procmon.total_memory_bytes())
    output.meta["memory_limit_bytes"] = mem_limit
    logs = output.out / "logs"
    logs.mkdir(exist_ok=True)

    original: dict[tuple[str, str, int], dict[str, Any]] = {}
    reference: dict[tuple[str, str, int], list[str]] = {}
    chars: dict[tuple[str, str, int], dict[str, Any]] = {}
    handles: dict[tuple[str, str], WorkerHandle] = {}  # one worker per (engine, storage), up while its engine runs
    engine_failed: dict[tuple[str, str], WorkerFailed] = {}
    said: set[tuple] = set()
    cpu = output.meta["cpu_seconds"]
    columns = [SpinnerColumn(), TextColumn("{task.description}", style="bold"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=False, refresh_per_second=4) as progress:
        task = progress.add_task("starting", total=len(jobs))
        try:
            for engine, storage, q, strategy, on in jobs:
                where = f"{engine} {storage}" if len(args.storage) > 1 else engine
                label = f"{where} Q{q:02d} {strategy}{' LINEAGE ON' if on else ''}"
                config = (engine, storage)
                for other in [c for c in handles if c[0] != engine]:  # the previous engine is done
                    done = handles.pop(other)
                    done.stop()
                    cpu[done.label] = round(done.cpu_seconds, 1)
                if config not in handles:
                    handles[config] = WorkerHandle(engine, args.sf, worker_options(args, engine, storage),
                                                   logs / f"{engine}-{storage}.log",
                                                   init_timeout=max(180.0, args.timeout), memory_limit=mem_limit,
                                                   storage=storage)
                handle = handles[config]
                if config in engine_failed:
                    fields, extra, peak = failure(engine_failed[config].status, engine_failed[config].message), {}, None
                else:
                    if not handle.alive:
                        progress.update(task, description=f"{where}: starting the session and loading the tables")
                        try:
                            handle.start()
                            output.meta["engine_start_seconds"].setdefault(handle.label, handle.start_seconds)
                            output.meta["engine_details"].setdefault(handle.label, handle.details)
                        except WorkerFailed as e:
                            engine_failed[config] = e
                            console.print(f"[red]{e.message}[/red] — every {where} run is recorded as {e.status}")
                    if config in engine_failed:
                        fields, extra, peak = failure(engine_failed[config].status,
                                                       engine_failed[config].message), {}, None
                    else:
                        job = {"query": q, "strategy": strategy, "repeat": args.repeat, "warmup": args.warmup,
                               "paired": strategy != "original" and "original" in args.strategies and not on,
                               "lineage_on": on, "reference": None if on else reference.get((engine, storage, q)),
                               "original_rows": (original.get((engine, storage, q)) or {}).get("output_rows"),
                               "debug_sleep": sleeps.get((q, strategy))}
                        progress.update(task, description=label)
                        try:
                            fields, extra, peak = handle.run(
                                job, args.timeout,
                                lambda what, label=label: progress.update(task, description=f"{label} · {what}"))
                        except WorkerFailed as e:  # the worker died between jobs and did not come back
                            fields, extra, peak = failure(e.status, e.message), {}, None
                orig = original.get((engine, storage, q))
                rec = make_record(engine, args.sf, q, strategy, fields,
                                  orig["seconds"] if orig else None, peak, storage)
                if strategy == "original" and not on:
                    original[(engine, storage, q)] = rec
                if strategy == "set" and not on and rec["status"] == "ok" and "digests" in extra:
                    reference[(engine, storage, q)] = extra["digests"]
                    chars[(engine, storage, q)] = {"engine": engine, "storage": storage, "sf": args.sf, "query": q,
                                                   **extra["characteristics"],
                                                   "lineage_digest": extra.get("lineage_digest")}
                    output.characteristics = sorted(chars.values(), key=lambda c: (
                        c["engine"], args.storage.index(c["storage"]), c["query"]))
                (output.lineage_on if on else output.records).append(rec)
                if rec["status"] != "ok":
                    key = (engine, storage, strategy, rec["status"], rec["message"])
                    if key not in said:  # a strategy that is not available says so once, not per query
                        said.add(key)
                        console.print(f"  {label}: [yellow]{rec['status']}[/yellow] — {rec['message']}")
                elif rec["agrees"] is False:
                    console.print(f"  {label}: lineage differs from set — {rec['message']}")
                output.save()
                progress.advance(task)
            progress.update(task, description="done")
        finally:
            for handle in handles.values():
                handle.kill() if sys.exc_info()[0] is not None else handle.stop()
                cpu[handle.label] = round(handle.cpu_seconds, 1)


def main(args: argparse.Namespace) -> int:
    """Run ``dltrace tpch`` with parsed ``args``; returns the exit code (130 when interrupted)."""
    console = Console()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        if not (out / "results.json").is_file():
            raise DltraceError(f"no results.json in {out} to build a report from")
        path = report.write_report(out)
        console.print(f"report: {path}")
        return 0

    output = RunnerOutput(args, out)
    t0 = time.monotonic()
    previous = signal.getsignal(signal.SIGTERM)
    interrupted = False
    try:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread
        previous = None
    try:
        _ensure_data(args.sf, console)
        execute(args, output, console)
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: writing what is done so far[/yellow]")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        output.meta["wall_seconds"] = round(time.monotonic() - t0, 1)
        output.meta["interrupted"] = interrupted
        output.meta["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
        output.meta["load_average_end"] = _load_average()
        own = os.times()
        output.meta["cpu_seconds"]["runner"] = round(own.user + own.system, 1)
        output.save()
    path = report.write_report(out)
    report.print_summary(output.records, console, output.meta)
    console.print(f"\n{len(output.records)} runs in {output.meta['wall_seconds']:.0f} s · report: {path}")
    return 130 if interrupted else 0


def _load_average() -> float | None:
    """The 1-minute load average: on a shared machine it says how much else was running."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _raise_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def _ensure_data(sf: float, console: Console) -> None:
    folder = tpch_dir(sf)
    if all((folder / f"{t}.parquet").is_file() for t in TABLES):
        return
    t = time.monotonic()
    with console.status(f"generating TPC-H SF {sf:g} into {folder} (tpchgen-cli)…"):
        ensure_tpch(sf)
    console.print(f"generated TPC-H SF {sf:g} in {time.monotonic() - t:.1f} s")


__all__ = ["add_arguments", "main", "parse_queries", "RECORD_KEYS", "STATUSES"]
