"""``dltrace tpch``: the paper's experiments (section 5) on DuckDB and Spark, as one command with a report.

For each engine x query x strategy: a warm-up and ``--repeat`` timed runs (the median is reported), the ratio to
the original query timed beside them (original and strategy alternately, in the same worker: a shared
machine's load bursts meet both alike), lineage size and bytes, agreement with the set strategy's lineage
and peak memory. Output in ``--out``: ``results.json``, ``characteristics.json`` (Table 7), ``report.md`` and
PNG plots (see :mod:`dltrace.tpch.report`).

Isolation: one worker process per engine keeps its session (Spark starts once), the parent sends it jobs and
enforces the per-run timeout and the memory guard by killing the worker's process tree (by pid) and starting a
new worker for the next job. Ctrl-C stops the run and writes what is done so far.

The command's options live in :mod:`dltrace.tpch.options`; the records and the files a run writes in
:mod:`dltrace.tpch.records`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

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

from dltrace.errors import DltraceError, folder_problem
from dltrace.tpch import procmon, report
from dltrace.tpch.isolation import WorkerFailed, WorkerHandle, failure
from dltrace.tpch.options import add_arguments, check_arguments, debug_sleeps, parse_queries, worker_options
from dltrace.tpch.records import RECORD_KEYS, STATUSES, RunnerOutput, load_average, make_record
from dltrace.tpch.worker import LINEAGE_ON_QUERIES, lineage_on_supported
from dltrace.tpch_data import TABLES, ensure_tpch, tpch_dir


# -- the run -----------------------------------------------------------------------------------------

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


def execute(args: argparse.Namespace, output: RunnerOutput, console: Console) -> None:
    on_ok, on_why = lineage_on_supported()
    output.meta["lineage_on"] = {"supported": on_ok, "message": on_why or None}
    jobs = _plan(args, on_ok)
    sleeps = debug_sleeps(args.debug_sleep)
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
    check_arguments(args)
    out = _out_folder(args.out, made=not args.report_only)
    if args.report_only:
        if not (out / "results.json").is_file():
            raise DltraceError(f"no results.json in {out} to build a report from")
        path = _write_report(out)
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
        output.meta["load_average_end"] = load_average()
        own = os.times()
        output.meta["cpu_seconds"]["runner"] = round(own.user + own.system, 1)
        output.save()
    path = _write_report(out)
    report.print_summary(output.records, console, output.meta)
    console.print(f"\n{len(output.records)} runs in {output.meta['wall_seconds']:.0f} s · report: {path}")
    if interrupted:
        return 130
    if output.records and not any(r["status"] == "ok" for r in output.records):
        # (a run where every query failed is no comparison: a script running it must not take it for one)
        console.print("[red]every run failed: see the report's errors[/red]")
        return 1
    return 0


def _out_folder(path: str, made: bool) -> Path:
    """The ``--out`` folder (``made``: created if missing, for a run; a report is only rebuilt from one that
    exists), or one line saying why it cannot be used: checked before the first run, which found a file or a
    read-only folder there only when it wrote its results."""
    out = Path(path)
    if not made:
        return out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DltraceError(f"cannot use --out {path!r}: {folder_problem(out, e)}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise DltraceError(f"cannot use --out {path!r}: the folder is not writable")
    return out


def _write_report(out: Path) -> Path:
    try:
        return report.write_report(out)
    except OSError as e:
        raise DltraceError(f"cannot write the report into {str(out)!r}: {folder_problem(out, e)}") from None


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
