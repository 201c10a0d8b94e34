"""``dltrace pipeline PATH``: run a pipeline (an SDP project or a folder of CREATE ... AS files) with end-to-end
lineage; print its datasets, a row's source rows (--row), the rows a source row reaches in every step
(--forward), or the datasets a changed source makes stale (--stale, after a run)."""

from __future__ import annotations

import argparse

import dltrace
from dltrace.cli import common, output
from dltrace.cli.lineage import forward_spec, parse_rids, rid_set_text
from dltrace.pipelines import METHODS

HELP = "run a pipeline of SQL steps (a Spark Declarative Pipelines project or a folder of CREATE ... AS files) " \
       "with end-to-end lineage"


def add_parser(sub) -> None:
    p = sub.add_parser("pipeline", help=HELP, description=HELP + ". Lineage of every dataset is in the source "
                       "tables' row ids (dl_rid), through every step. Each call runs the pipeline again, and a "
                       "row's index (--row, --show, --forward) is its position in that call's run: a dataset "
                       "without ORDER BY may come in another order at the next call, so every row is printed "
                       "with its values.")
    p.add_argument("path", help="folder with a spark-pipeline.yml, the spec file itself, a folder of .sql files, or "
                   "one .sql file of CREATE ... AS statements")
    common.add_sources(p)
    p.add_argument("--lineage", choices=[*common.STRATEGIES, "none"], default="set",
                   help="how lineage is computed: set (default), bitmap, or none for the plain pipeline")
    p.add_argument("--method", choices=METHODS, default="forward",
                   help="forward (rewritten queries, default) or backward (reverse queries per step, composed)")
    p.add_argument("--row", action="append", metavar="DATASET:N",
                   help="row N of DATASET (its index in this call's run): its values, its source rows through "
                        "every step, and their tuples (repeatable)")
    p.add_argument("--forward", action="append", metavar="TABLE:RIDS",
                   help="the rows of every dataset these source rows reach, with their values and lineage, e.g. "
                        "orders:42 or orders:10-20 (repeatable)")
    p.add_argument("--show", metavar="DATASET", action=common.Once,
                   help="print DATASET's rows with their lineage (without --show, --row or --forward: the graph, and "
                        "with --json or --csv the rows of the last step run)")
    p.add_argument("--tuples", type=common.whole_number, default=5, metavar="K",
                   help="source tuples to print per table with --row (default 5)")
    common.add_output(p)
    common.add_debug(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if getattr(args, "csv", False):  # one CSV table: one dataset's rows, one question
        datasets = {_row_spec(spec)[0] for spec in args.row or []} | ({args.show} if args.show else set())
        if args.forward or len(datasets) > 1:
            raise common.CliError("--csv writes one table: --forward (rows of every dataset it reaches) and --row / "
                                  "--show of several datasets need --json, whose lines name their dataset")
    if args.lineage == "none" and args.method != "forward":  # (moot: it ran the plain pipeline, saying "backward")
        raise common.CliError(f"--method {args.method} traces lineage, and --lineage none asks for none: drop one")
    s = common.session(args)
    lineage = None if args.lineage == "none" else args.lineage
    result = dltrace.pipeline(args.path, session=s, lineage=lineage, method=args.method)
    # every question answered before anything is printed: a bad one after a good one (--forward t:99) printed
    # part of the output, then the error, where bad input must leave stdout empty
    shown = result[args.show] if args.show else None
    asked = []
    for spec in args.row or []:
        name, i = _row_spec(spec)
        asked.append((name, result[name], common.check_rows([i], result[name].num_rows)))
    reached = [(spec, *_reach(result, spec)) for spec in args.forward or []]
    p = common.printer(args)
    if not args.row and not args.forward and not args.show:
        _summary(p, result)
    if shown is not None:
        p.rows(shown, range(shown.num_rows), dataset=args.show)
    for name, r, rows in asked:
        if p.is_table:
            p.line(f"{name}:")
            output.detail(p, r, rows, args.tuples)
        else:
            p.rows(r, rows, tuples=output.base_tuples(r, args.tuples), dataset=name, question="--row")
    for spec, table, rids, hits in reached:
        _forward(p, result, spec, table, rids, hits)
    return 0


def _row_spec(spec: str) -> tuple[str, int]:
    name, sep, n = spec.rpartition(":")
    if not sep or not name:
        raise common.CliError(f"--row expects DATASET:N, got {spec!r}")
    try:
        return name, common.whole_number(n)
    except argparse.ArgumentTypeError as e:
        raise common.CliError(f"--row {spec}: {e}") from None


def _summary(p: output.Printer, result) -> None:
    pipe = result.pipeline
    layout = {"sdp": "Spark Declarative Pipelines", "file": "one file"}.get(pipe.layout, pipe.layout)
    p.line(f"pipeline {pipe.name!r} ({layout}), "
           f"{output.count(len(pipe.steps), 'step')} over {', '.join(pipe.sources) or 'no source table'}; "
           f"lineage {result.strategy or 'none'} "
           f"({result.method})")
    for step in pipe.steps:
        r = result[step.name]
        reach = ", ".join(r.lineage_columns) or "no lineage"
        p.line(f"  {step.name:<20} {step.kind:<18} {r.num_rows:>9,} rows  from {reach}  [{step.file}]")
    if not p.is_table:  # JSON / CSV: the last dataset's rows
        last = result[pipe.steps[-1].name]
        p.rows(last, range(last.num_rows), dataset=pipe.steps[-1].name)


def _reach(result, spec: str) -> tuple[str, list[range], dict[str, list[int]]]:
    """``--forward TABLE:RIDS``: the table, the rids, and the rows of every dataset they reach."""
    table, text = forward_spec(spec)
    if result.strategy is None:
        raise common.CliError("--forward needs lineage: run with --lineage set or bitmap")
    ranges = parse_rids(text)
    answers = [result.impact(table, rids) for rids in ranges]  # (one per range: each checked by its ends)
    return table, ranges, {name: sorted(set().union(*(a[name] for a in answers))) for name in answers[0]}


def _forward(p: output.Printer, result, spec: str, table: str, ranges: list[range],
             hits: dict[str, list[int]]) -> None:
    p.line(f"{table} rids {rid_set_text(ranges)} reach:")
    for name, rows in hits.items():
        r = result[name]
        at = f" [{output.rids_text(rows, 10, counted=False)}]" if rows else ""
        p.line(f"  {name}: {len(rows):,} of {r.num_rows:,} rows{at}")
        if rows:  # the rows themselves: their indexes are this run's (see --help)
            p.rows(r, rows, dataset=name, question=f"--forward {spec}")
            p.line()
