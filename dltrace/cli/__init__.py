"""The ``dltrace`` command line: run queries with lineage, rewrite them, trace them, query saved lineage, and run
the TPC-H comparison.

One module per subcommand (``run``, ``rewrite``, ``trace``, ``lineage``, ``pipeline``; ``tpch`` is
:mod:`dltrace.tpch.runner`), the shared options and session in :mod:`.common`, every printed row in
:mod:`.output`. :func:`main` turns every error into one ``dltrace: error:`` line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings

import dltrace
from dltrace.cli import common, lineage, pipeline, rewrite, run, trace
from dltrace.errors import DltraceError
from dltrace.tpch import runner as tpch_runner

EPILOG = """\
output: a table (50 rows unless --limit), or --json / --csv (every row unless --limit).
exit codes: 0 done; 2 bad input (every such error is one 'dltrace: error:' line on stderr);
1 unexpected error (rerun with --debug for its traceback); 130 interrupted; 141 output closed early (| head).
"""


class UsageError(common.CliError):
    """Bad arguments (argparse's errors, as one line like every other error)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage and exits; here it is one line like other errors
        raise UsageError(f"{message} (see: {self.prog} --help)")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # `dltrace --bogus` said only that COMMAND is required: argparse checks that before it reports an unknown
        # option, so a misspelt option before the command was never named
        try:
            return super().parse_args(args, namespace)
        except UsageError as e:
            commands = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
            argv = list(sys.argv[1:] if args is None else args)
            command = next((a for a in argv if commands and a in commands), None)
            if command is not None and str(e).startswith("unrecognized arguments: "):
                # (the top parser reports a command's unknown option: `dltrace run q.sql --row 0` pointed at the
                # top help, where --row is not; a new user's)
                raise UsageError(f"{str(e).split(' (see: ')[0]}{_taken_by(commands, argv, command)} (see: "
                                 f"{self.prog} {command} --help)") from None
            if not commands or "the following arguments are required: COMMAND" not in str(e):
                raise
            unknown = [a for a in argv if a.startswith("-") and a != "--debug"]
            raise UsageError(f"{'unrecognized arguments: ' + ' '.join(unknown) + '; ' if unknown else ''}a command is "
                             f"required: choose one of {', '.join(commands)} (see: {self.prog} --help)") from None


def _taken_by(commands: dict, argv: list[str], command: str) -> str:
    """"; --row is an option of trace, lineage" for the first option of ``argv`` that ``command`` does not take
    and other commands do, else ""."""
    for arg in argv:
        option = arg.split("=", 1)[0]
        if not option.startswith("--") or option in commands[command]._option_string_actions:
            continue
        others = [name for name, p in commands.items() if option in p._option_string_actions]
        if others:
            return f"; {option} is an option of {', '.join(others)}"
    return ""


def cmd_tpch(args: argparse.Namespace) -> int:
    return tpch_runner.main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="dltrace",
        description="Tuple-level data lineage for SQL: for every output row, the input rows that produced it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dltrace {dltrace.__version__}")
    common.add_debug(parser, default=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run.add_parser(sub)
    rewrite.add_parser(sub)
    trace.add_parser(sub)
    lineage.add_parser(sub)
    pipeline.add_parser(sub)
    p = sub.add_parser("tpch", help="the TPC-H comparison: original / set / bitmap / reverse-one / reverse-all",
                       description="Run the TPC-H queries under each lineage strategy on each engine, check that the "
                                   "strategies agree on the lineage, and write the timings, a report (report.md) "
                                   "and plots to --out. The data is generated once per scale factor into a cache "
                                   "folder.")
    tpch_runner.add_arguments(p)
    common.add_debug(p)
    p.set_defaults(func=cmd_tpch)
    return parser


def _error(text: str) -> None:
    try:
        print(f"dltrace: error: {text}", file=sys.stderr, flush=True)
    except OSError:  # stderr is gone too
        pass


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"dltrace: warning: {common.cli_message(message)}", file=sys.stderr)


def _drop_stdout() -> None:
    """The reader of stdout went away (``| head``): send what is still buffered nowhere, so the interpreter's
    last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        pass


def _tolerate_encoding() -> None:
    """On a stdout that cannot encode everything (an ASCII locale), print '?' rather than fail."""
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("-", "")
    if encoding not in ("utf8", "utf16", "utf32"):
        try:
            sys.stdout.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass


def main(argv: list[str] | None = None) -> int:
    """Run the ``dltrace`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    _tolerate_encoding()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            try:
                args = build_parser().parse_args(argv)
            except SystemExit as e:  # --help, --version
                code = 0 if e.code is None else e.code if isinstance(e.code, int) else 2
            else:
                debug = debug or bool(getattr(args, "debug", False))
                code = args.func(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _drop_stdout()
        return 141
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except DltraceError as e:
        if debug:
            traceback.print_exc()
        _error(common.cli_message(e))
        return 2
    except OSError as e:  # (the system's: a full disk under `> file`, said to be unexpected with its class name)
        if debug:
            traceback.print_exc()
        _error(f"{e.strerror or e}" + (f": {e.filename!r}" if e.filename else "") + " (an error of the system)")
        return 1
    except Exception as e:  # noqa: BLE001 - one line, not a traceback, unless --debug
        if debug:
            traceback.print_exc()
        _error(f"{type(e).__name__}: {common.cli_message(e)} (unexpected; rerun with --debug for the traceback)")
        return 1


__all__ = ["main", "build_parser"]
