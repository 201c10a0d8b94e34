"""``dltrace run``: run a query with forward lineage (by default, like ``Session.run``), print it, save it."""

from __future__ import annotations

import argparse
import sys

from dltrace.cli import common

HELP = "run a SQL query with forward lineage (the rewritten query) and print its rows with their lineage"


def add_parser(sub) -> None:
    p = sub.add_parser("run", help=HELP, description=HELP + ". Lineage is per base table: the row ids (dl_rid) "
                       "of the input rows each output row came from; LINEAGE ON (...) in the query changes its "
                       "granularity.")
    p.add_argument("file", help="SQL file ('-' for stdin)")
    common.add_sources(p)
    p.add_argument("--dialect", type=common.dialect_name, help="dialect the SQL is written in (default: the engine's)")
    p.add_argument("--lineage", choices=[*common.STRATEGIES, "none"], default="set",
                   help="how lineage is computed: set (default, like the API), bitmap, or none for the plain query")
    p.add_argument("--semantics", choices=common.SEMANTICS, help="lineage semantics (default witness)")
    p.add_argument("--save", metavar="DIR", help="save the rows and their lineage to DIR (read it with `dltrace lineage DIR`)")
    common.add_output(p)
    common.add_debug(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.save == "":  # (nothing was saved, without a word)
        raise common.CliError("--save needs a folder name")
    lineage = None if args.lineage == "none" else args.lineage
    if lineage is None and args.semantics is not None:  # (--lineage none --semantics control ran without a word)
        raise common.CliError("--semantics is the semantics of the lineage, and --lineage none computes none: "
                              "leave one of them out")
    sql = common.read_sql(args.file)
    s = common.session(args)
    r = s.run(sql, lineage=lineage, dialect=args.dialect, semantics=args.semantics or "witness")
    if r is None:  # CREATE ... IF NOT EXISTS over a name that exists: nothing ran, as on the engine
        print("dltrace: the relation exists already: nothing done (CREATE ... IF NOT EXISTS)", file=sys.stderr)
        return 0
    if args.save:  # before printing: a reader that stops early (| head) must not lose the save
        folder = r.save(args.save)
        what = "rows and lineage" if r.lineage_columns else "rows (no lineage)"
        print(f"dltrace: saved {r.num_rows:,} {what} to {folder}", file=sys.stderr)
    common.printer(args).rows(r, range(r.num_rows))
    return 0
