"""``dltrace lineage DIR``: query lineage saved by ``dltrace run --save DIR`` (or ``r.save(DIR)``)."""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence

import dltrace
from dltrace.cli import common, output
from dltrace.errors import DltraceError
from dltrace.store import read_manifest

HELP = "query saved lineage: its rows, a row's base tuples (--row), or the rows some inputs reach (--forward)"


def add_parser(sub) -> None:
    p = sub.add_parser("lineage", help=HELP, description=HELP + ". Without --row or --forward: the saved query "
                       "and its rows with their lineage.")
    p.add_argument("dir", help="folder written by `dltrace run --save DIR` (or r.save(DIR))")
    common.add_sources(p)
    p.add_argument("--row", type=common.whole_number, action="append", metavar="N",
                   help="output row N: its lineage and base tuples (repeatable)")
    p.add_argument("--forward", action="append", metavar="TABLE:RIDS",
                   help="the output rows that depend on these input rows, e.g. lineitem:42,43 or orders:10-20 (repeatable)")
    p.add_argument("--tuples", type=common.whole_number, metavar="K",
                   help="base tuples to print per table with --row (default 20; in JSON: under \"tuples\")")
    p.add_argument("--allow-stale", action="store_true",
                   help="load even if a base table changed since the save (its rids may point at other rows)")
    common.add_output(p)
    common.add_debug(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    # one CSV table answers one question (--row, however many rows, or one --forward): refused before anything
    # runs, where two --forward printed the first one's table and then the error
    questions = {"--row"} if args.row else set()
    questions |= {f"--forward {spec}" for spec in args.forward or []}
    if getattr(args, "csv", False) and len(questions) > 1:
        raise common.CliError("--csv writes one table: ask --row or one --forward per run (or use --json, whose "
                              "lines name their question)")
    if args.tuples is not None and not args.row:  # (printed the rows without their tuples, without a word)
        raise common.CliError("--tuples K prints the base tuples of the rows --row N asks for: add --row N")
    tuples = 20 if args.tuples is None else args.tuples
    folder, manifest = read_manifest(args.dir)
    if args.row or args.forward:  # (base tuples, and rids checked against the tables: the tables as saved)
        r = dltrace.load(folder, _session(args, manifest), allow_stale=args.allow_stale)
    else:  # the saved rows and their ids alone: no table is read (a save whose files are gone showed nothing)
        s = common.session(args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the tables the save read need not be registered, nor as they were)
            r = dltrace.load(folder, s, allow_stale=True)
    # every question answered before anything is printed: a bad --forward after a good --row printed the row,
    # then the error, where bad input must leave stdout empty
    rows = common.check_rows(args.row, r.num_rows) if args.row else []
    reached = [(spec, *_reach(r, spec)) for spec in args.forward or []]
    p = common.printer(args)
    if not args.row and not args.forward:
        _summary(p, r, manifest)
        p.rows(r, range(r.num_rows))
    if rows:
        if p.is_table:
            output.detail(p, r, rows, tuples)
        else:
            p.rows(r, rows, tuples=output.base_tuples(r, tuples), question="--row")
    for spec, table, rids, hits in reached:
        _forward(p, r, spec, table, rids, hits)
    return 0


def _session(args: argparse.Namespace, manifest: dict) -> dltrace.Session:
    """A session with the saved query's tables: those --tpch/--table give, the others from the paths the manifest
    records (--table orders=... for a save reading customers too read customers from nowhere: "not registered")."""
    s = common.session(args)
    for name, info in manifest.get("tables", {}).items():
        if name.lower() in s.tables:
            continue
        origin = info.get("origin")
        files = info.get("files") or []
        if origin is None and len(files) == 1:
            origin = files[0]["path"]
        if origin is None:
            raise common.CliError(f"table {name!r} was registered from memory when the lineage was saved; "
                                  f"pass --table {name}=PATH (or --tpch SF)")
        try:
            s.register(name, origin)
        except DltraceError as e:
            raise common.CliError(f"cannot register table {name!r} from {origin!r}, where the save says it was "
                                  f"read from ({common.cli_message(e)}); pass --table {name}=PATH") from None
    return s


def _summary(p: output.Printer, r, manifest: dict) -> None:
    sh = output.shape(r)
    p.line(f"query ({manifest.get('dialect')}, saved {manifest.get('created')} by dltrace "
           f"{manifest.get('dltrace_version')} on {manifest.get('engine')}):")
    p.line("  " + manifest.get("query", "").strip().replace("\n", "\n  "))
    p.line(f"{r.num_rows:,} rows; lineage {r.strategy or 'none'} ({r.semantics}) on: {', '.join(sh.keys) or 'none'}")
    p.line()


def forward_spec(spec: str) -> tuple[str, str]:
    """``--forward TABLE:RIDS`` -> (table, the rids' text for :func:`parse_rids`)."""
    table, sep, text = spec.partition(":")
    if not sep or not table:
        raise common.CliError(f"--forward expects TABLE:RID[,RID|LO-HI...], got {spec!r}")
    return table, text


def parse_rids(text: str) -> list[range]:
    """``--forward``'s rids (``1,5,10-20``) as ascending, disjoint ranges, never expanded: each is checked against
    the table by its ends (``0-999999999`` over a 10-row table took gigabytes before it was refused)."""
    if not text.strip():
        raise common.CliError(f"--forward expects TABLE:RID[,RID|LO-HI...], got no rids in {text!r}")
    if any(not part.strip() for part in text.split(",")):  # (`1,,2`: a rid left out, as SQL's `a,, b` is an error)
        raise common.CliError(f"--forward expects TABLE:RID[,RID|LO-HI...], got an empty item in {text!r}")
    parts = [_rid_range(part.strip()) for part in text.split(",")]
    merged: list[range] = []
    for r in sorted(parts, key=lambda r: r.start):
        if merged and r.start <= merged[-1].stop:  # overlapping or adjacent: one range
            merged[-1] = range(merged[-1].start, max(merged[-1].stop, r.stop))
        else:
            merged.append(r)
    return merged


def _rid_range(part: str) -> range:
    lo, sep, hi = part.partition("-")
    try:
        first, last = (int(lo), int(hi)) if sep else (int(part), int(part))
    except ValueError:
        raise common.CliError(f"--forward expects TABLE:RID[,RID|LO-HI...], got a bad rid {part!r}") from None
    if first > last:
        raise common.CliError(f"--forward: the range {part!r} runs backwards: write {last}-{first}")
    return range(first, last + 1)


def ranges_text(ranges: Sequence[range], max_parts: int = 6, noun: str = "id", counted: bool = True) -> str:
    """:func:`output.rids_text` of the ids of ascending, disjoint, non-adjacent ``ranges``, without listing them (a
    ``--forward`` range may span billions of ids)."""
    if not ranges:
        return "-"
    parts = [p for r in ranges for p in (output.rid_parts(r) if len(r) < 3 else [f"{r[0]}-{r[-1]}"])]
    return output.parts_text(parts, sum(len(r) for r in ranges), max_parts, noun, counted)


def rid_set_text(ranges: Sequence[range], max_parts: int = 10) -> str:
    """``{0-99, 150, …} (1,234 ids)``: the rids a ``--forward`` asks about, their count when not all are spelled
    out."""
    body = ranges_text(ranges, max_parts, counted=False)
    return "{" + body + "}" + ranges_text(ranges, max_parts)[len(body):]


def _reach(r, spec: str) -> tuple[str, list[range], list[int]]:
    """``--forward TABLE:RIDS``: the table, the rids, and the output rows they reach."""
    table, text = forward_spec(spec)
    if not r.lineage_columns:
        raise common.CliError("--forward needs lineage: this save has none (it was run with --lineage none or LINEAGE ON ())")
    if r.on_values is not None:
        raise common.CliError("--forward needs row ids: this save holds LINEAGE ON values (use --row N to see them)")
    ranges = parse_rids(text)
    rows = set().union(*(r.forward(table, rids) for rids in ranges))  # (one per range: each checked by its ends)
    return table, ranges, sorted(rows)


def _forward(p: output.Printer, r, spec: str, table: str, ranges: list[range], rows: list[int]) -> None:
    hits = "[" + output.rids_text(rows, 10, counted=False) + "]"
    p.line(f"{len(rows):,} of {r.num_rows:,} output rows depend on {table} rids {rid_set_text(ranges)}: {hits}")
    if rows or not p.is_table:  # (CSV: its header, as `dltrace run` prints for no rows)
        p.rows(r, rows, question=f"--forward {spec}")
    p.line()
