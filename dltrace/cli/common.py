"""What the subcommands share: their common options, the session they open, status lines, and bad input as
:class:`DltraceError` (printed by :func:`dltrace.cli.main` as one ``dltrace: error:`` line, exit code 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sqlglot.dialects import Dialects
from sqlglot.dialects.dialect import Dialect

import dltrace
from dltrace.cli.output import Printer
from dltrace.engines import ENGINES, command_line_options, starts_slowly
from dltrace.errors import DltraceError, read_user_text, rows_held
from dltrace.rewriter.analysis import SEMANTICS  # noqa: F401 - the subcommands read it from here
from dltrace.tpch import TABLES as TPCH_TABLES

STRATEGIES = ("set", "bitmap")  # forward lineage; the TPC-H runner also compares the reverse queries

#: Phrases of the library's messages meant for Python callers, and what a CLI user types instead.
_API_HINTS = (
    ("dltrace.load(path, session, allow_stale=True) loads it anyway", "--allow-stale loads it anyway"),
    ("allow_stale=True", "--allow-stale"),
    ("lineage='set' or 'bitmap'", "--lineage set or bitmap"),
    ("pass replace=True to replace it", "give each table once"),
)


class CliError(DltraceError):
    """Bad input noticed by the CLI itself."""


def cli_message(e: BaseException) -> str:
    """An error's message as one line, with hints for Python callers rephrased as CLI options."""
    text = " ".join(part.strip() for part in str(e).splitlines() if part.strip()) or type(e).__name__
    for api, cli in _API_HINTS:
        text = text.replace(api, cli)
    return text


def status(msg: str) -> None:
    """A status line on stderr, for what takes a while (generating data, starting Spark)."""
    print(f"dltrace: {msg}", file=sys.stderr, flush=True)


# -- argument types ---------------------------------------------------------------------------------------------


class Once(argparse.Action):
    """An option taken once: given again, it is refused (`--show a --show b` printed b alone, without a word)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            raise argparse.ArgumentError(self, "is given twice: give it once")
        setattr(namespace, self.dest, values)


def dialects() -> list[str]:
    return sorted(d.value for d in Dialects if d.value)


def dialect_name(text: str) -> str:
    """A sqlglot dialect name (argparse type): an unknown one fails listing the known ones."""
    try:
        Dialect.get_or_raise(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"unknown dialect {text!r}: choose one of {', '.join(dialects())}") from None
    return text.lower()


def whole_number(text: str) -> int:
    """An integer >= 0 (argparse type): a row index, a limit, a count."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return n


def scale_factor(text: str) -> float:
    """A TPC-H scale factor (argparse type): a number > 0."""
    try:
        sf = float(text)
    except ValueError:
        sf = 0.0
    if not sf > 0 or sf == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a TPC-H scale factor > 0 such as 0.01 or 1, got {text!r}")
    return sf


def add_sources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=ENGINES, default="duckdb", help="engine to run on (default duckdb)")
    p.add_argument("--master", help="Spark master when --engine spark (default local[*])")
    p.add_argument("--tpch", type=scale_factor, metavar="SF", help="register the TPC-H tables at scale factor SF "
                   "(generated once into the cache)")
    p.add_argument("--table", action="append", default=[], metavar="NAME=PATH",
                   help="register a table from a parquet or CSV file, a folder of them or a glob (repeatable)")


def add_output(p: argparse.ArgumentParser, what: str = "rows") -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true",
                   help=f'{what} as JSON lines: {{"index": N, "row": {{column: value}}, "lineage": {{table: [rid, ...]}}}} '
                        "(under LINEAGE ON (e, ...): {\"table(e, ...)\": [[value, ...], ...]}); every row unless --limit")
    g.add_argument("--csv", action="store_true",
                   help=f"{what} as CSV: dl_row (the row's index), the query's columns, then one dl_<table> column per "
                        "base table holding its rids joined with spaces (LINEAGE ON values: a JSON list); "
                        "every row unless --limit")
    p.add_argument("--limit", type=whole_number, metavar="N",
                   help="rows to print (default: 50 in a table, all in JSON/CSV; 0 = all)")


def add_debug(p: argparse.ArgumentParser, default: Any = argparse.SUPPRESS) -> None:
    p.add_argument("--debug", action="store_true", default=default,
                   help="print the traceback of an error (for bug reports)")


def printer(args: argparse.Namespace) -> Printer:
    fmt = "json" if getattr(args, "json", False) else "csv" if getattr(args, "csv", False) else "table"
    return Printer(fmt, getattr(args, "limit", None))


# -- sessions and input -----------------------------------------------------------------------------------------


def connect(args: argparse.Namespace) -> dltrace.Session:
    """A session on ``--engine`` (a status line while Spark starts)."""
    every = {name for kind in ENGINES for name in command_line_options(kind)}
    ignored = sorted(n for n in every - set(command_line_options(args.engine)) if getattr(args, n, None) is not None)
    if ignored:  # (--engine duckdb --master local ran on DuckDB without a word)
        raise CliError(f"--{ignored[0]} is an option of another engine than {args.engine}: drop it, or pass --engine")
    # (an option not given: the engine's own default)
    options: dict[str, Any] = {name: getattr(args, name) for name in command_line_options(args.engine)
                               if getattr(args, name, None) is not None}
    if starts_slowly(args.engine):
        status(f"starting {args.engine} ({', '.join(map(str, options.values())) or 'defaults'})…")
    return dltrace.connect(args.engine, **options)


def table_specs(args: argparse.Namespace) -> list[tuple[str, str]]:
    specs, seen = [], set()
    for spec in args.table:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path:
            raise CliError(f"--table expects NAME=PATH, got {spec!r}")
        key = name.strip().lower()
        if key in seen:
            raise CliError(f"--table {name.strip()} is given twice")
        seen.add(key)
        specs.append((name.strip(), path))
    return specs


def session(args: argparse.Namespace) -> dltrace.Session:
    """A session with ``--tpch`` and ``--table`` registered."""
    specs = table_specs(args)
    if args.tpch is not None:
        clash = [name for name, _ in specs if name.lower() in TPCH_TABLES]
        if clash:
            raise CliError(f"--table {clash[0]} clashes with the TPC-H table of that name (from --tpch)")
    s = connect(args)
    if args.tpch is not None:
        load_tpch(s, args.tpch)
    for name, path in specs:
        s.register(name, path)
    return s


def load_tpch(s: dltrace.Session, sf: float) -> None:
    s.load_tpch(sf, progress=lambda msg: status(msg + "…"))


def read_sql(path: str) -> str:
    if path == "-":
        try:
            return sys.stdin.read()
        except UnicodeDecodeError as e:
            raise CliError(f"cannot read SQL from stdin: {e}") from None
    if not path:  # (Path('') is the current folder: `dltrace run ""` said '' is a folder)
        raise CliError("the SQL file's name is empty")
    if Path(path).is_dir():
        raise CliError(f"{path!r} is a folder, not a SQL file")
    if not Path(path).exists():
        raise CliError(f"SQL file not found: {path!r}")
    if not (Path(path).is_file() or Path(path).is_fifo() or Path(path).is_char_device()):  # (`<(echo ...)` is a pipe)
        raise CliError(f"{path!r} is not a file to read SQL from")
    return read_user_text(path, "SQL file", CliError)


def check_rows(rows: list[int], n: int) -> list[int]:
    """``rows`` sorted and distinct; every one must be a row of a result with ``n`` rows."""
    wanted = sorted(set(rows))
    bad = [i for i in wanted if i >= n]
    if bad:
        raise CliError(f"row {bad[0]} out of range: the result has {rows_held(n)}")
    return wanted
