"""What every subcommand prints: result rows with their lineage as one table style, JSON lines or CSV.

Lineage comes in two shapes and both print the same way, one entry per base table:

* row ids: ``{table: [rid, ...]}``;
* ``LINEAGE ON (e1, ...)``: the distinct value tuples of ``(e1, ...)``, under the key ``table(e1, ...)``.

``LINEAGE ON ()`` leaves no lineage and ``LINEAGE ON TABLES (t, ...)`` only the named tables' row ids.
The shapes are read from the result's attributes (``lineage_columns``, ``on_values``), not from
``result.lineage(i)``, whose shape changes with the clause.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dltrace.cli import values
from dltrace.errors import DltraceError
from dltrace.lineage_data import decode_ids
from dltrace.names import numbered_names, value_tuples
from dltrace.py_values import py_list
from dltrace.rewriter.grammar import LineageOn
from dltrace.rewriter.grammar import parse as parse_sql

#: The one table style of the CLI.
BOX = box.SIMPLE_HEAD
#: Rows shown in a table when ``--limit`` is not given.
DEFAULT_LIMIT = 50
#: Rows decoded and written at a time (JSON, CSV, lineage of a long result).
BATCH = 2048
#: Prefix of the lineage columns in tables and CSV: user columns cannot start with it when lineage is on.
PREFIX = "dl_"


# ---------------------------------------------------------------------------------------------------------------
# lineage of a result, whatever its shape
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """How a result's lineage reads: ``tables`` in order, the ``keys`` they print under, and whether the
    entries are LINEAGE ON value tuples (``on_values``) or row ids."""

    tables: tuple[str, ...]
    keys: tuple[str, ...]
    on_values: dict | None

    @property
    def by_value(self) -> bool:
        return self.on_values is not None


def shape(r) -> Shape:
    tables = tuple(r.lineage_columns)
    if r.on_values is None:
        return Shape(tables, tables, None)
    labels = on_labels(r.sql, r.dialect)
    keys = tuple(f"{t}({', '.join(labels)})" if labels else t for t in tables)
    return Shape(tables, keys, r.on_values)


def on_labels(sql: str, dialect: str) -> list[str]:
    """The expressions of the query's ``LINEAGE ON (...)`` clause as written."""
    try:
        trees = [t for t in parse_sql(sql, dialect) if t is not None]
    except Exception:  # noqa: BLE001 - the result came from this SQL; a label is only cosmetic
        return []
    clause = trees[0].find(LineageOn) if trees else None
    return [e.sql(dialect) for e in clause.expressions] if clause is not None else []


def lineage_rows(r, sh: Shape, indices: Sequence[int]) -> list[dict[str, list]]:
    """Per row of ``indices``: ``{key: sorted rids}`` or ``{key: sorted value tuples}``."""
    if not sh.tables:
        return [{} for _ in indices]
    take = pa.array(indices, type=pa.int64())
    out: list[dict[str, list]] = [{} for _ in indices]
    for t, key in zip(sh.tables, sh.keys):
        for j, v in enumerate(r.sets(t).take(take).to_pylist()):
            ids = decode_ids(v)
            if sh.on_values is not None:
                ids = value_tuples(sh.on_values, ids)
            out[j][key] = ids
    return out


def rows_of(table: pa.Table, indices: Sequence[int]) -> list[tuple]:
    """The rows at ``indices`` as tuples (by position: a query may repeat a column name)."""
    if not indices:
        return []
    part = table.take(pa.array(indices, type=pa.int64()))
    return list(zip(*[py_list(c) for c in part.columns])) if part.num_columns else [() for _ in indices]


# ---------------------------------------------------------------------------------------------------------------
# lineage cells
# ---------------------------------------------------------------------------------------------------------------


def rid_parts(rids: Sequence[int]) -> list[str]:
    """Sorted rids as runs: three or more consecutive ids print as ``lo-hi``."""
    parts: list[str] = []
    j, n = 0, len(rids)
    while j < n:
        k = j
        while k + 1 < n and rids[k + 1] == rids[k] + 1:
            k += 1
        if k - j >= 2:
            parts.append(f"{rids[j]}-{rids[k]}")
            j = k + 1
        else:
            parts.append(str(rids[j]))
            j += 1
    return parts


def count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def rids_text(rids: Sequence[int], max_parts: int = 6, noun: str = "id", counted: bool = True) -> str:
    """``0-99, 150, … (1,234 ids)``: runs of ids, cut after ``max_parts``, and their count when not every id is
    spelled out (unless ``counted`` is false)."""
    if not len(rids):
        return "-"
    return parts_text(rid_parts(rids), len(rids), max_parts, noun, counted)


def parts_text(parts: list[str], total: int, max_parts: int, noun: str, counted: bool) -> str:
    """``parts`` (of ``total`` ids) joined, cut after ``max_parts``, counted when not every id is spelled out."""
    cut = len(parts) > max_parts
    body = ", ".join(parts[:max_parts] + (["…"] if cut else []))
    return f"{body} ({count(total, noun)})" if counted and (cut or len(parts) < total) else body


def tuples_text(tuples: Sequence[tuple], max_parts: int = 4) -> str:
    """``AUTOMOBILE, BUILDING, … (5 values)``; tuples of several values in parentheses."""
    if not tuples:
        return "-"
    one = lambda t: values.text(t[0]) if len(t) == 1 else "(" + ", ".join(values.text(x) for x in t) + ")"  # noqa: E731
    body = ", ".join([one(t) for t in tuples[:max_parts]] + (["…"] if len(tuples) > max_parts else []))
    return body if len(tuples) <= max_parts else f"{body} ({count(len(tuples), 'value')})"


def cell(entries: list, sh: Shape) -> str:
    return tuples_text(entries) if sh.by_value else rids_text(entries)


def csv_cell(entries: list, sh: Shape) -> str:
    if sh.by_value:
        return values.to_json([list(t) for t in entries])
    return " ".join(map(str, entries))


# ---------------------------------------------------------------------------------------------------------------
# the printer
# ---------------------------------------------------------------------------------------------------------------


#: Narrowest a lineage column gets on a narrow terminal before the whole table is printed unwrapped instead.
LINEAGE_MIN = 12


#: control characters as a table cell shows them (a tab, drawn by the terminal wider than the width measured for
#: it, cut off the rest of its cell: a new user's); a newline stays a line break, as it does in the cell
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7f] if c != 0x0a} | {0x09: "\\t", 0x0d: "\\r"}


def _printable(cell: str) -> str:
    return cell.translate(_CONTROLS) if any(ord(ch) < 0x20 or ch == "\x7f" for ch in cell) else cell


class Grid:
    """A table in the one style: value columns are never wrapped nor cut; lineage columns wrap to fit a
    terminal, and when even that is not enough the table is printed at full width for the terminal to wrap."""

    def __init__(self) -> None:
        self.table = Table(box=BOX, show_edge=False, pad_edge=False, header_style="bold")
        self.widths: list[int] = []
        self.wraps: list[bool] = []

    def column(self, name: str, right: bool = False, wraps: bool = False, style: str | None = None) -> None:
        self.table.add_column(name, justify="right" if right else "left", style=style, no_wrap=not wraps,
                              overflow="fold")
        self.widths.append(cell_len(name))
        self.wraps.append(wraps)

    def values(self, schema: pa.Schema) -> None:
        """A column per field; numbers to the right."""
        for f in schema:
            t = f.type
            self.column(f.name, right=pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))

    def row(self, cells: list[str]) -> None:
        cells = [_printable(c) for c in cells]
        for j, c in enumerate(cells):
            self.widths[j] = max(self.widths[j], max(map(cell_len, c.split("\n"))))
        self.table.add_row(*[Text(c) for c in cells])

    def print(self) -> None:
        """On stdout (looked up now); elsewhere than a terminal (a pipe, a file) lines carry no trailing blanks."""
        out = sys.stdout
        gaps = 3 * (len(self.widths) - 1)
        full = sum(self.widths) + gaps
        least = sum(min(w, LINEAGE_MIN) if wraps else w for w, wraps in zip(self.widths, self.wraps)) + gaps
        options = dict(highlight=False, markup=False, emoji=False, soft_wrap=False)
        if _isatty(out):
            console = Console(file=out, **options)
            if least > console.width:
                console = Console(file=out, width=full, **options)
            console.print(self.table)
            return
        buf = _Buffer()
        buf.encoding = getattr(out, "encoding", None) or "utf-8"  # rich draws ASCII boxes for an ASCII stdout
        Console(file=buf, width=max(full, 1), color_system=None, **options).print(self.table)
        out.write("".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines()))


class _Buffer(io.StringIO):
    encoding = "utf-8"


def _isatty(file) -> bool:
    try:
        return file.isatty()
    except (AttributeError, ValueError):
        return False


class Printer:
    """Prints result rows in the chosen format (``table``, ``json`` or ``csv``), at most ``limit`` rows per
    call (``None``: the format's default -- 50 in a table, all in JSON and CSV; 0: all)."""

    def __init__(self, fmt: str = "table", limit: int | None = None) -> None:
        self.fmt = fmt
        self.limit = limit
        self._writer = None  # CSV: one header, however many calls
        self._csv_answers = None  # CSV: what its rows answer (their columns, dataset and question): one table

    @property
    def is_table(self) -> bool:
        return self.fmt == "table"

    def cap(self) -> int | None:
        limit = DEFAULT_LIMIT if self.limit is None and self.is_table else self.limit
        return limit or None

    # -- text around tables (only in the table format) ------------------------------------------
    def line(self, s: str = "") -> None:
        if self.is_table:
            sys.stdout.write(s + "\n")

    def note(self, s: str) -> None:
        """A remark about the output: after the table in the table format, on stderr otherwise."""
        if self.is_table:
            sys.stdout.write(s + "\n")
        else:
            sys.stderr.write(f"dltrace: {s}\n")

    # -- result rows ------------------------------------------------------------------------------
    def rows(self, r, indices: Sequence[int], tuples=None, dataset: str | None = None,
             question: str | None = None) -> None:
        """Rows ``indices`` of result ``r`` with their lineage. ``tuples(i)`` -> ``{table: pa.Table}`` adds
        base tuples in JSON (the table format prints them with :meth:`detail`). ``dataset`` (a pipeline's) and
        ``question`` (``--row``, ``--forward t:1``) name what the rows are, in each JSON line; CSV holds one
        table, so rows of another dataset or question are refused there (a reader could not tell them apart)."""
        cap = self.cap()
        shown = list(indices[:cap]) if cap is not None else list(indices)
        rest = len(indices) - len(shown)
        sh = shape(r)
        if self.fmt == "json":
            self._json(r, sh, shown, tuples, dataset, question)
        elif self.fmt == "csv":
            answers = (tuple(r.table.column_names), dataset, question)
            if self._csv_answers is not None and self._csv_answers != answers:
                raise DltraceError("--csv writes one table, and this command answers with rows of several datasets "
                                   "or questions: ask one per run, or use --json (each line names its own)")
            self._csv_answers = answers
            self._csv(r, sh, shown)
        else:
            self._table(r, sh, shown)
        if rest:
            more = f"{rest:,} more {'row' if rest == 1 else 'rows'}"
            self.note(f"… {more} (use --limit 0 for all)" if self.is_table else f"{more} not printed (--limit {cap})")

    def _table(self, r, sh: Shape, shown: list[int]) -> None:
        g = Grid()
        g.column("#", right=True, style="dim")
        g.values(r.table.schema)
        for key in sh.keys:
            g.column(PREFIX + key, wraps=True, style="cyan")
        for start in range(0, len(shown), BATCH):
            part = shown[start: start + BATCH]
            lin = lineage_rows(r, sh, part)
            for i, row, entries in zip(part, rows_of(r.table, part), lin):
                g.row([str(i), *(values.text(v) for v in row), *(cell(entries[k], sh) for k in sh.keys)])
        g.print()
        if not shown and not r.num_rows:
            self.line("(no rows)")

    def _json(self, r, sh: Shape, shown: list[int], tuples, dataset: str | None, question: str | None) -> None:
        out = sys.stdout
        # (SQL allows two columns of one name, SELECT * over a join; a JSON reader keeps the last of two keys, which
        # lost a new user a column: numbered as DuckDB numbers them in a table, amount_1)
        names = numbered_names(r.table.column_names)
        named = ([("dataset", dataset)] if dataset is not None else []) + \
            ([("question", question)] if question is not None else [])
        for start in range(0, len(shown), BATCH):
            part = shown[start: start + BATCH]
            lin = lineage_rows(r, sh, part)
            for i, row, entries in zip(part, rows_of(r.table, part), lin):
                fields = [*named, ("index", i), ("row", values.Raw(values.to_json_object(zip(names, row))))]
                if sh.tables:
                    fields.append(("lineage", values.Raw(values.to_json_object(entries.items()))))
                if tuples is not None:
                    base = {t: values.Raw(table_json(tab)) for t, tab in tuples(i).items()}
                    fields.append(("tuples", values.Raw(values.to_json_object(base.items()))))
                out.write(values.to_json_object(fields) + "\n")

    def _csv(self, r, sh: Shape, shown: list[int]) -> None:
        if self._writer is None:
            self._writer = csv.writer(sys.stdout, lineterminator="\n")
            self._writer.writerow(["dl_row", *r.table.column_names, *(PREFIX + k for k in sh.keys)])
        for start in range(0, len(shown), BATCH):
            part = shown[start: start + BATCH]
            lin = lineage_rows(r, sh, part)
            for i, row, entries in zip(part, rows_of(r.table, part), lin):
                self._writer.writerow([i, *(values.csv_text(v) for v in row), *(csv_cell(entries[k], sh) for k in sh.keys)])

    # -- plain tables (base tuples) ----------------------------------------------------------------
    def table(self, table: pa.Table, title: str | None = None) -> None:
        """An Arrow table in the one table style (table format only)."""
        if not self.is_table:
            return
        if title:
            self.line(title)
        g = Grid()
        g.values(table.schema)
        for row in rows_of(table, list(range(table.num_rows))):
            g.row([values.text(v) for v in row])
        g.print()


def table_json(table: pa.Table) -> str:
    names = numbered_names(table.column_names)
    return "[" + ",".join(values.to_json_object(zip(names, row)) for row in rows_of(table, list(range(table.num_rows)))) + "]"


def row_summary(r, i: int, sh: Shape, entries: dict[str, list]) -> list[str]:
    """``row 3 of 7: a=1, b=x`` and one line per lineage entry: its count and ids (or values)."""
    names = r.table.column_names
    (row,) = rows_of(r.table, [i])
    lines = [f"row {i} of {r.num_rows}: " + ", ".join(f"{k}={values.short(v)}" for k, v in zip(names, row))]
    if not sh.tables:
        lines.append("  (no lineage)")
    width = max((len(k) for k in sh.keys), default=0)
    for key in sh.keys:
        got = entries[key]
        if sh.by_value:
            lines.append(f"  {key:<{width}}  {count(len(got), 'value')}" + (f": {tuples_text(got, 8)}" if got else ""))
        else:
            lines.append(f"  {key:<{width}}  {count(len(got), 'tuple')}" + (f"; rids {rids_text(got, 8)}" if got else ""))
    return lines


def base_tuples(r, k: int):
    """``i -> {table: first k base tuples}`` of result ``r``; None when it has none (no lineage, LINEAGE ON
    values, or ``k`` = 0)."""
    if not k or not r.lineage_columns or r.on_values is not None:
        return None
    return lambda i: r.backward(i, limit=k)


def detail(p: Printer, r, indices: Sequence[int], k: int) -> None:
    """Per row (table format): its values, per table its lineage count and ids, and its first ``k`` base
    tuples per table."""
    if not p.is_table:
        return
    sh = shape(r)
    fetch = base_tuples(r, k)
    cap = p.cap()
    indices = indices[:cap] if cap is not None else indices
    for start in range(0, len(indices), BATCH):
        part = list(indices[start: start + BATCH])
        for i, entries in zip(part, lineage_rows(r, sh, part)):
            p.line("\n".join(row_summary(r, i, sh, entries)))
            if fetch is not None:
                for t, tuples in fetch(i).items():
                    total = len(entries[t])
                    if tuples.num_rows:
                        shown = f"first {tuples.num_rows:,} of {total:,}" if total > tuples.num_rows else f"{total:,}"
                        p.line()
                        p.table(tuples, title=f"{t} ({shown} base {'tuple' if total == 1 else 'tuples'})")
            p.line()
