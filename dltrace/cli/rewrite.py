"""``dltrace rewrite``: print a query rewritten to compute its lineage columns (nothing is run)."""

from __future__ import annotations

import argparse

import dltrace
from dltrace.cli import common
from dltrace.tpch import TPCH_SCHEMA

HELP = "print a SQL query rewritten to also compute its lineage columns (dl_<table>), without running it"


def add_parser(sub) -> None:
    p = sub.add_parser("rewrite", help=HELP, description=HELP + ".")
    p.add_argument("file", help="SQL file ('-' for stdin)")
    p.add_argument("--dialect", type=common.dialect_name,
                   help="dialect of the input and (without --to) of the output (default duckdb)")
    p.add_argument("--to", type=common.dialect_name, metavar="DIALECT", help="dialect of the output, when it differs from the input's")
    p.add_argument("--strategy", choices=common.STRATEGIES, default="set", help="lineage strategy (default set)")
    p.add_argument("--semantics", choices=common.SEMANTICS, default="witness", help="lineage semantics (default witness)")
    p.add_argument("--tpch", type=common.scale_factor, metavar="SF",
                   help="with --table, the TPC-H tables too (their columns are read; without --table they are known)")
    p.add_argument("--table", action="append", default=[], metavar="NAME=PATH",
                   help="a table whose columns the query needs (repeatable; the TPC-H tables are known without it)")
    p.set_defaults(func=main, engine="duckdb", master=None)
    common.add_debug(p)


def main(args: argparse.Namespace) -> int:
    sql = common.read_sql(args.file)
    if args.tpch is not None or args.table:
        with common.session(args) as s:
            schema = s.schema()
    else:  # the TPC-H tables are known without registering them (other tables must be named with --table)
        schema = TPCH_SCHEMA
    try:
        text = dltrace.rewrite(sql, dialect=args.to or args.dialect or "duckdb", strategy=args.strategy,
                               semantics=args.semantics, schema=schema, read=args.dialect or "duckdb", pretty=True)
    except dltrace.UnknownTable as e:
        if schema is not TPCH_SCHEMA:
            raise
        # (without --table only the TPC-H tables are known: a new user's query named its own, and the error
        # listed TPC-H's tables alone)
        raise dltrace.UnknownTable(f"{e}: without --table only the TPC-H tables are known; name each table the query "
                                   f"reads with --table NAME=PATH (a parquet or CSV file)") from None
    print(text)
    return 0
