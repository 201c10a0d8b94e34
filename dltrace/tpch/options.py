"""The options of ``dltrace tpch``: parsed from the command line, stated back as a command for the report, and
turned into what each worker opens its session with."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from dltrace.errors import DltraceError
from dltrace.tpch import procmon
from dltrace.tpch.worker import STRATEGIES

ENGINES = ("duckdb", "spark")
# --storage: where the tables' rows live while the queries run. memory: DuckDB native tables, Spark cached
# DataFrames (loaded once when the worker starts: what most users query, and what SmokedDuck measures);
# parquet: views over the parquet files, read at each query. The library's names for the two are
# "memory" and "source" (Session.load_tpch(sf, storage=...)).
STORAGES = ("memory", "parquet")
LIBRARY_STORAGE = {"memory": "memory", "parquet": "source"}


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
            if not part:  # (`1,,2` ran 1 and 2: a query left out, as a list of SQL's `a,, b` is an error)
                raise argparse.ArgumentTypeError(f"queries are numbers and ranges like 1-22 or 1,3,6 (got an empty "
                                                 f"item in {text!r})")
            if "-" in part:
                a, b = part.split("-", 1)
                first, last = int(a.strip().lower().removeprefix("q")), int(b.strip().lower().removeprefix("q"))
                if first > last:
                    raise argparse.ArgumentTypeError(f"the range {part} runs backwards: write {last}-{first}")
                out.update(range(first, last + 1))
            else:
                out.add(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"queries are numbers and ranges like 1-22 or 1,3,6 (got {text!r})") from None
    bad = sorted(q for q in out if not 1 <= q <= 22)
    if bad or not out:
        raise argparse.ArgumentTypeError(f"TPC-H has queries 1-22 (got {text!r})")
    return sorted(out)


def _positive(kind: type, zero: bool = False) -> Callable[[str], Any]:
    """A parser of numbers of ``kind`` above 0 (from 0 with ``zero``)."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if v < 0 or (v == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}" if zero else f"must be > 0, got {text!r}")
        return v
    return parse


def _size(text: str) -> str:
    """``--memory-limit`` as written, once it reads as a size (it is turned into bytes against the RAM later)."""
    try:
        size = procmon.parse_size(text, 1 << 30)
    except ValueError:
        size = -1
    if size is not None and size <= 0:
        raise argparse.ArgumentTypeError(f"expected a size such as 75%, 8G, 512M or off, got {text!r}")
    if text.strip().endswith("%") and size is not None and size > 1 << 30:
        # (200% was a guard of twice the RAM: none)
        raise argparse.ArgumentTypeError(f"a share of the RAM is at most 100%, got {text!r}")
    if size is not None and size < 64 << 20 and not text.strip().endswith("%"):
        # (1K stopped every strategy but the original, whose worker the guard's polling missed)
        raise argparse.ArgumentTypeError(f"a memory guard under 64M stops a worker as it starts, got {text!r}")
    return text


def _spark_setting(text: str) -> tuple[str, str]:
    """One ``--spark-conf KEY=VALUE``, checked as the command line is read (not once Spark starts, minutes in):
    the key as Spark names it (``spark.`` added when left out) and the value."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return (key if key.startswith("spark.") else "spark." + key), value


def _default_driver_memory() -> str:
    total = procmon.total_memory_bytes() or (4 << 30)
    return f"{max(1, min(4, int(total * 0.3) >> 30))}g"


DEFAULT_MASTER = "local[2]"


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse options the run would ignore: Spark's without Spark (``--engines duckdb --master local[2]`` ran the
    DuckDB run alone, without a word; a new user's)."""
    if args.report_only:
        _check_report_only(args)
        return
    given = [name for name, value in (("--master", args.master), ("--spark-conf", args.spark_conf)) if value]
    if given and "spark" not in args.engines:
        raise DltraceError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} Spark's, which --engines "
                           f"{','.join(args.engines)} does not run: add spark to --engines, or leave "
                           f"{' and '.join(given)} out")


def _check_report_only(args: argparse.Namespace) -> None:
    """``--report-only`` runs nothing: an option of the run given with it would be ignored (``--report-only --sf 1``
    rebuilt the report of whatever scale factor --out holds, without a word)."""
    defaults = argparse.ArgumentParser()
    add_arguments(defaults)
    run_options = [a for a in defaults._actions if a.dest not in ("help", "out", "report_only")]
    changed = [a.option_strings[0] for a in run_options if getattr(args, a.dest, None) != a.default]
    if changed:
        raise DltraceError(f"{changed[0]} is an option of a run, and --report-only runs nothing (it rebuilds the "
                           f"report from the JSON files in --out): leave {changed[0]} out, or drop --report-only")


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
    p.add_argument("--warmup", type=_positive(int, zero=True), default=1, help="untimed warm-up runs (default 1)")
    p.add_argument("--timeout", type=_positive(float), default=300.0,
                   help="seconds one run may take before it is stopped and recorded as timeout (default 300)")
    p.add_argument("--memory-limit", type=_size, default="75%", metavar="SIZE",
                   help="memory guard on a worker and its children, e.g. 75%% (of RAM), 8G, off or 0 (default 75%%)")
    p.add_argument("--out", default="dltrace-report", metavar="DIR",
                   help="output folder (default ./dltrace-report)")
    p.add_argument("--master", default=None, help=f"Spark master (default {DEFAULT_MASTER})")
    p.add_argument("--spark-conf", type=_spark_setting, action="append", default=[], metavar="KEY=VALUE",
                   help=f"Spark setting, repeatable (default driver memory {_default_driver_memory()})")
    p.add_argument("--report-only", action="store_true",
                   help="only rebuild report.md and the plots from the JSON files already in --out")
    # test hook: QUERY:STRATEGY:SECONDS makes that job sleep before each run (forces a timeout)
    p.add_argument("--debug-sleep", action="append", default=[], help=argparse.SUPPRESS)


def debug_sleeps(specs: list[str]) -> dict[tuple[int, str], float]:
    """The ``--debug-sleep`` test hook's QUERY:STRATEGY:SECONDS specs, by (query, strategy)."""
    out = {}
    for spec in specs:
        q, strategy, seconds = spec.split(":")
        out[(int(q), strategy)] = float(seconds)
    return out


def _spark_options(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {"spark.driver.memory": _default_driver_memory()}
    conf.update(args.spark_conf)
    return {"master": args.master or DEFAULT_MASTER, **conf}


def worker_options(args: argparse.Namespace, engine: str, storage: str) -> dict[str, Any]:
    """What the worker of (engine, storage) opens its session with and how it loads the tables."""
    options = _spark_options(args) if engine == "spark" else {"threads": args.threads} if args.threads else {}
    return {"connect": options, "storage": LIBRARY_STORAGE[storage]}


def command_line(args: argparse.Namespace) -> str:
    """The ``dltrace tpch`` command that ``args`` came from, as the report states it."""
    parts = ["dltrace tpch", f"--sf {args.sf:g}", f"--engines {','.join(args.engines)}",
             f"--strategies {','.join(args.strategies)}", f"--queries {_ranges(args.queries)}",
             f"--storage {','.join(args.storage)}"]
    if args.threads:
        parts.append(f"--threads {args.threads}")
    parts += [f"--repeat {args.repeat}", f"--timeout {args.timeout:g}"]
    if args.warmup != 1:
        parts.append(f"--warmup {args.warmup}")
    if "spark" in args.engines and args.master not in (None, DEFAULT_MASTER):
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
