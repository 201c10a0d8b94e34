"""The ``dltrace`` command line: run queries with lineage, rewrite them, trace them, run the TPC-H comparison."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dltrace.errors import DltraceError


def _add_sources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb", help="engine to run on (default duckdb)")
    p.add_argument("--master", default="local[*]", help="Spark master when --engine spark (default local[*])")
    p.add_argument("--tpch", type=float, metavar="SF", help="register the TPC-H tables at scale factor SF")
    p.add_argument("--table", action="append", default=[], metavar="NAME=PATH",
                   help="register a table from a parquet/CSV file or folder (repeatable)")
    p.add_argument("--dialect", help="dialect the SQL file is written in (default: the engine's)")


def _session(args: argparse.Namespace):
    import dltrace

    options: dict[str, Any] = {"master": args.master} if args.engine == "spark" else {}
    s = dltrace.connect(args.engine, **options)
    if args.tpch is not None:
        s.load_tpch(args.tpch, progress=lambda msg: print(msg, file=sys.stderr))
    for spec in args.table:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise DltraceError(f"--table expects NAME=PATH, got {spec!r}")
        s.register(name, path)
    return s


def _read_sql(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    if not p.is_file():
        raise DltraceError(f"SQL file not found: {path!r}")
    return p.read_text()


def _print_table(table, title: str | None = None, lineage: dict | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    names = list(table.column_names)
    for n in names:
        t.add_column(n)
    if lineage:
        for n in lineage:
            t.add_column(f"dl_{n}", style="cyan")
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        cells = ["NULL" if v is None else str(v) for v in row.values()]
        if lineage:
            cells += [_short(lineage[n][i]) for n in lineage]
        t.add_row(*cells)
    Console().print(t)


def _short(ids: list[int], k: int = 6) -> str:
    if len(ids) <= k:
        return "{" + ", ".join(map(str, ids)) + "}"
    return "{" + ", ".join(map(str, ids[:k])) + f", … ({len(ids)} ids)" + "}"


def _json_default(v: Any) -> Any:
    return str(v)


def cmd_run(args: argparse.Namespace) -> int:
    s = _session(args)
    r = s.run(_read_sql(args.file), lineage=args.lineage, dialect=args.dialect, semantics=args.semantics)
    _emit(r, args)
    if getattr(args, "save", None):
        r.save(args.save)
        print(f"saved to {args.save}", file=sys.stderr)
    return 0


def _emit(r, args: argparse.Namespace) -> None:
    lineage = None
    if r.lineage_columns:
        all_rows = r.lineage_all()
        lineage = {t: [row[t] for row in all_rows] for t in r.tables}
    if args.json:
        rows = r.table.to_pylist()
        if lineage:
            for i, row in enumerate(rows):
                row["lineage"] = {t: lineage[t][i] for t in lineage}
        print(json.dumps(rows, default=_json_default, indent=1))
    else:
        _print_table(r.table, lineage=lineage)


def cmd_rewrite(args: argparse.Namespace) -> int:
    from dltrace.rewriter import rewrite

    schema = None
    if args.tpch is not None or args.table:
        schema = _session(args).schema()
    print(rewrite(_read_sql(args.file), dialect=args.to or args.dialect or "duckdb", strategy=args.strategy,
                  semantics=args.semantics, schema=schema, read=args.dialect, pretty=True))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    s = _session(args)
    r = s.trace(_read_sql(args.file), rows=args.row or None, dialect=args.dialect, semantics=args.semantics)
    rows = args.row or list(range(r.num_rows))
    for i in rows:
        print(f"row {i}: {r.row(i)}")
        for table, ids in r.lineage(i).items():
            print(f"  {table}: {len(ids)} rows {_short(ids, 20)}")
            if args.tuples and ids:
                base = s.sql(f'SELECT * FROM "{table}" WHERE dl_rid IN ({", ".join(map(str, ids[:args.tuples]))}) ORDER BY dl_rid')
                _print_table(base)
    return 0


def _lineage_session(args: argparse.Namespace, manifest: dict):
    """A session with the saved query's tables: from --tpch/--table, else from the paths the manifest records."""
    import dltrace

    if args.tpch is not None or args.table:
        return _session(args)
    options: dict[str, Any] = {"master": args.master} if args.engine == "spark" else {}
    s = dltrace.connect(args.engine, **options)
    for name, info in manifest.get("tables", {}).items():
        origin = info.get("origin")
        files = info.get("files") or []
        if origin is None and len(files) == 1:
            origin = files[0]["path"]
        if origin is None:
            raise DltraceError(f"table {name!r} was registered from memory when the lineage was saved; "
                               f"pass --table {name}=PATH (or --tpch SF)")
        s.register(name, origin)
    return s


def _parse_rids(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise DltraceError(f"--forward expects TABLE:RID[,RID|LO-HI...], got a bad rid {part!r}") from None
    return out


def cmd_lineage(args: argparse.Namespace) -> int:
    from dltrace.store import load, read_manifest

    _, manifest = read_manifest(args.dir)
    s = _lineage_session(args, manifest)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = load(args.dir, s, allow_stale=args.allow_stale)
    for w in caught:
        print(f"dltrace: warning: {w.message}", file=sys.stderr)
    if not args.row and not args.forward:
        print(f"query ({manifest.get('dialect')}, saved {manifest.get('created')} by dltrace "
              f"{manifest.get('dltrace_version')} on {manifest.get('engine')}):")
        print("  " + manifest.get("query", "").strip().replace("\n", "\n  "))
        print(f"{r.num_rows} rows; lineage {r.strategy or 'none'} ({r.semantics}) on: {', '.join(r.tables) or 'none'}")
        return 0
    for i in args.row or []:
        print(r.explain(i, samples=0))
        if r.on_values is None and r.lineage_columns:
            from dltrace.explore import plain_table, row_rids

            for table, tuples in r.backward(i, limit=args.tuples).items():
                total = int(row_rids(r, table, i).size)
                if tuples.num_rows:
                    shown = f"first {tuples.num_rows} of {total}" if total > tuples.num_rows else f"{total}"
                    noun = "base tuple" if total == 1 else "base tuples"
                    print(f"\n{table} ({shown} {noun}):")
                    print(plain_table(tuples))
            print()
    for spec in args.forward or []:
        table, sep, text = spec.partition(":")
        if not sep or not table:
            raise DltraceError(f"--forward expects TABLE:RID[,RID...], got {spec!r}")
        rids = _parse_rids(text)
        rows = r.forward(table, rids)
        print(f"{len(rows)} of {r.num_rows} output rows depend on {table} rids {_short(rids, 10)}: {rows}")
        if rows:
            import pyarrow as pa

            picked = r.table.take(pa.array(rows, type=pa.int64()))
            picked = picked.add_column(0, "row", pa.array(rows, type=pa.int64()))
            _print_table(picked)
    return 0


def cmd_tpch(args: argparse.Namespace) -> int:
    from dltrace.tpch.runner import main as runner_main

    return runner_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dltrace",
        description="Tuple-level data lineage for SQL: for every output row, the input rows that produced it.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a SQL file, optionally with forward lineage (--lineage set|bitmap)")
    p.add_argument("file", help="SQL file ('-' for stdin)")
    _add_sources(p)
    p.add_argument("--lineage", choices=["set", "bitmap"], default=None, help="capture forward lineage")
    p.add_argument("--semantics", choices=["witness", "control"], default="witness")
    p.add_argument("--json", action="store_true", help="print rows (and lineage) as JSON")
    p.add_argument("--save", metavar="DIR", help="save the result and its lineage to DIR")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("rewrite", help="print a SQL file rewritten to compute lineage columns")
    p.add_argument("file", help="SQL file ('-' for stdin)")
    p.add_argument("--dialect", help="dialect of the input and (without --to) the output: duckdb|spark")
    p.add_argument("--to", help="dialect of the output, when it differs from the input's")
    p.add_argument("--strategy", choices=["set", "bitmap"], default="set")
    p.add_argument("--semantics", choices=["witness", "control"], default="witness")
    p.add_argument("--tpch", type=float, metavar="SF", help=argparse.SUPPRESS)
    p.add_argument("--table", action="append", default=[], metavar="NAME=PATH",
                   help="tables whose schema the query needs (TPC-H is known without it)")
    p.add_argument("--engine", default="duckdb", help=argparse.SUPPRESS)
    p.add_argument("--master", default="local[*]", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_rewrite)

    p = sub.add_parser("trace", help="backward lineage of output rows by reverse queries (Cui-Widom)")
    p.add_argument("file", help="SQL file ('-' for stdin)")
    _add_sources(p)
    p.add_argument("--row", type=int, action="append", help="output row index to trace (repeatable; default all)")
    p.add_argument("--semantics", choices=["witness", "control"], default="witness")
    p.add_argument("--tuples", type=int, default=0, metavar="K", help="also print up to K base tuples per table")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("lineage", help="query saved lineage: a row's base tuples, or the rows some inputs reach")
    p.add_argument("dir", help="folder written by `dltrace run --save DIR` (or r.save(DIR))")
    _add_sources(p)
    p.add_argument("--row", type=int, action="append", help="explain output row N and print its base tuples (repeatable)")
    p.add_argument("--forward", action="append", metavar="TABLE:RIDS",
                   help="print the output rows that depend on these rids, e.g. lineitem:42,43 or orders:10-20")
    p.add_argument("--tuples", type=int, default=20, metavar="K", help="base tuples to print per table (default 20)")
    p.add_argument("--allow-stale", action="store_true", help="load even if a base table changed since the save")
    p.set_defaults(func=cmd_lineage)

    p = sub.add_parser("tpch", help="the TPC-H comparison: original / set / bitmap / reverse-one / reverse-all")
    try:
        from dltrace.tpch.runner import add_arguments
    except ImportError:
        add_arguments = None
    if add_arguments is not None:
        add_arguments(p)
    p.set_defaults(func=cmd_tpch)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DltraceError as e:
        print(f"dltrace: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dltrace: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
