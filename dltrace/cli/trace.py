"""``dltrace trace``: backward lineage of output rows by reverse queries, printed like ``run``'s."""

from __future__ import annotations

import argparse

from dltrace.cli import common, output

HELP = "backward lineage of a query's output rows by reverse queries (Cui-Widom), without rewriting it"


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help=HELP, description=HELP + ".")
    p.add_argument("file", help="SQL file ('-' for stdin)")
    common.add_sources(p)
    p.add_argument("--dialect", type=common.dialect_name, help="dialect the SQL is written in (default: the engine's)")
    p.add_argument("--row", type=common.whole_number, action="append", metavar="N",
                   help="output row to trace, as this call's run numbers the rows (without ORDER BY another run "
                        "may number them otherwise; each is printed with its values); repeatable, default: every row")
    p.add_argument("--semantics", choices=common.SEMANTICS, default="witness", help="lineage semantics (default witness)")
    p.add_argument("--tuples", type=common.whole_number, default=0, metavar="K",
                   help="also print each row's first K base tuples per table (in JSON: under \"tuples\")")
    common.add_output(p)
    common.add_debug(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    sql = common.read_sql(args.file)
    s = common.session(args)
    r = s.trace(sql, rows=args.row or None, dialect=args.dialect, semantics=args.semantics)
    rows = common.check_rows(args.row, r.num_rows) if args.row else range(r.num_rows)
    p = common.printer(args)
    p.rows(r, rows, tuples=output.base_tuples(r, args.tuples))
    if args.tuples:
        p.line()
        output.detail(p, r, rows, args.tuples)
    return 0
