"""The table sources every engine understands, and where a registered table's rows live.

What a user passes to ``register`` (a parquet or CSV path, a folder or a glob of them, an Arrow table or stream,
a pandas DataFrame, a DuckDB relation, a Spark DataFrame) becomes one :data:`Source` here: parquet files with
the row id of each file's first row, an in-memory table carrying its row ids ``dl_rid``, or an engine's own
object. Engine-free: the adapters read these, none is imported here.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from dltrace.errors import ReservedName, SourceError, check_choice
from dltrace.names import RID, reserved_prefix

T = TypeVar("T")


@dataclass(frozen=True)
class ParquetSource:
    """Parquet files in sorted name order; ``offsets[i]`` is the rid of the first row of ``files[i]``."""

    files: tuple[str, ...]
    offsets: tuple[int, ...]
    num_rows: int
    # the files' (path, size, mtime_ns) taken before their row counts were read (:func:`files_signature`): a
    # file whose stat differs since may hold another count, which the offsets do not describe
    signature: tuple | None = field(default=None, compare=False)

    @property
    def file_rows(self) -> tuple[int, ...]:
        """The row count of each file, as counted when the offsets were made."""
        return tuple(b - a for a, b in zip(self.offsets, (*self.offsets[1:], self.num_rows)))


@dataclass(frozen=True)
class ArrowSource:
    """An in-memory table; rids are row positions (it already carries the ``dl_rid`` column).

    ``typed_by``: the engine's SQL of the query these rows are the result of (a step), or None. An engine's
    Arrow form of a result loses some of its types (DuckDB: HUGEINT comes as DECIMAL(38,0), an ENUM as strings,
    a collation is dropped; Spark: a collation), so the engine stores the rows with the types it gives that
    query: a step reads as the same query inlined would."""

    table: pa.Table
    typed_by: str | None = None

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def private(self) -> tuple[str, ...]:
        """Columns besides ``dl_rid`` that only the rows relation shows (the user's relation leaves them out)."""
        return ()

    @property
    def own_columns(self) -> list[str]:
        """The columns the user's relation shows: all but ``dl_rid`` and the private ones, in order."""
        return [c for c in self.table.column_names if c != RID and c not in self.private]


@dataclass(frozen=True)
class LineageSource(ArrowSource):
    """Rows that carry lineage already: a step's result registered as a source of the next step.

    ``table`` holds the user's columns, ``dl_rid`` and one lineage column per base table the rows came from
    (``lineage``: (base table, column) pairs; ``strategy`` "set": list<int64>, "bitmap": portable roaring
    bytes). The lineage columns live in the rows relation only, like ``dl_rid``.
    """

    lineage: tuple[tuple[str, str], ...] = ()
    strategy: str = "set"
    # (base table, its snapshot when the lineage was computed: Catalog.snapshot): a later result reading these
    # rows end to end names those tables' rows as they were then, which its reads of base rows check
    based_on: tuple[tuple[str, tuple], ...] = ()
    # the semantics its lineage was computed with ("witness" | "control"; None: rows without lineage): a query
    # reading it end to end must ask the same, or its lineage would be one semantics through the step and the
    # other in its own subqueries
    semantics: str | None = None

    @property
    def private(self) -> tuple[str, ...]:
        return tuple(column for _, column in self.lineage)


@dataclass(frozen=True)
class NativeSource:
    """An engine-native object (a Spark DataFrame); only the engine that owns it can register it."""

    obj: Any
    kind: str = field(default="spark")


Source = ParquetSource | ArrowSource | NativeSource

# Where a registered table's rows live while queries run (``register(..., storage=)``):
#   "source": read from the source at each query (parquet files scanned in place, Arrow tables scanned in place);
#   "memory": copied once into the engine's own storage when registered (a DuckDB native table, compressed on
#             dltrace's own connection; a cached Spark DataFrame), so queries never touch the files again. Row ids are the same in both.
STORAGES = ("source", "memory")


def check_storage(storage: str) -> str:
    """``storage`` if it is one of :data:`STORAGES`, else the error naming the choices (``UnknownChoice``, as for
    every other option; ``ArgumentError`` for a value that is not text)."""
    return check_choice(storage, "storage", STORAGES)


CSV_SUFFIXES = (".csv", ".tsv")


def _hidden(path: Path) -> bool:
    """Does Spark's (and Hive's) file listing skip ``path``, relative to the folder read? A part named ``.x``,
    or ``_x`` unless it holds ``=`` (a partition folder): ``_SUCCESS``, the attempt files a killed job leaves in
    ``_temporary/``, ``_metadata`` summaries, a ``.hidden`` copy."""
    return any(part.startswith(".") or (part.startswith("_") and "=" not in part) for part in path.parts)


def _folder_files(folder: Path) -> list[Path]:
    """A folder's data files, in sorted path order, searched in its subfolders too: its parquet files, or its CSV
    files (a folder of both is refused: which one the user means is not known)."""
    found = [p for p in folder.rglob("*") if p.is_file() and not _hidden(p.relative_to(folder))]
    parquet = sorted(p for p in found if p.suffix == ".parquet")
    csv = sorted(p for p in found if p.suffix.lower() in CSV_SUFFIXES)
    if parquet and csv:
        raise SourceError(f"folder {str(folder)!r} holds both .parquet and CSV files: register one kind with a "
                          f"glob, e.g. {str(folder / '*.parquet')!r}")
    if not parquet and not csv:
        raise SourceError(f"folder {str(folder)!r} holds no .parquet, .csv or .tsv files")
    return parquet or csv


def resolve_source(source: Any) -> Source:
    """Turn what a user passes to ``register`` into a :data:`Source` (rids assigned, files ordered)."""
    if isinstance(source, (ParquetSource, ArrowSource, NativeSource)):
        return source  # resolved already (dltrace's own sources, e.g. a step's rows with their lineage)
    if isinstance(source, pa.Table):
        return ArrowSource(with_rid(source))
    if type(source).__module__.startswith("pandas"):
        # copied: Arrow would share the frame's numeric columns, and the user's later edit in place (df.loc[...]
        # = ...) would change the registered rows under the ids (1M rows, 5 columns: 36 ms -> 53 ms)
        try:
            table = pa.Table.from_pandas(source.copy(deep=True), preserve_index=False)
        except (pa.ArrowTypeError, pa.ArrowInvalid, OverflowError) as e:  # (mixed types: 'x', 3.5; an int past 2**63)
            raise SourceError(f"the pandas DataFrame does not convert to Arrow, whose columns hold one type each: "
                              f"{'; '.join(' '.join(str(a).split()) for a in e.args)}; give that column one type "
                              f"(df[col].astype(str))") from None
        except ValueError as e:  # (pyarrow: "Duplicate column names found: ['a', 'a']")
            raise SourceError(f"the pandas DataFrame does not convert to Arrow: {str(e).splitlines()[0]}; give each "
                              f"column its own name") from None
        return ArrowSource(with_rid(table))
    if type(source).__module__.startswith("pyspark"):
        return NativeSource(source)
    if isinstance(source, pa.RecordBatchReader):  # a stream is read once: its rows, in order
        return ArrowSource(with_rid(source.read_all()))
    if type(source).__module__.split(".")[0] in ("duckdb", "_duckdb") and hasattr(source, "to_arrow_table"):
        return ArrowSource(with_rid(source.to_arrow_table()))  # a DuckDB relation: its rows, as it gives them
    if isinstance(source, (str, os.PathLike)):
        text = str(source)
        # a pattern's files, as DuckDB reads it: the files it matches (the folders it matches too are not read
        # again: `d/**` lists d and its subfolders besides their files, each file was read twice), the folders it
        # matches where it matches no file (`data/2024-*`), else the file of that very name (`sales [2024].csv`,
        # which DuckDB reads when the pattern matches nothing)
        found = sorted(glob.glob(text, **GLOB_AS_DUCKDB)) if _is_pattern(text) else []
        matches = [m for m in found if os.path.isfile(m)] or _outermost(found)
        if matches:
            paths = [Path(m) for m in matches]
        elif _is_pattern(text) and not os.path.exists(text):  # (a folder `sales [2024]` too)
            raise SourceError(f"no file matches {text!r}")
        else:
            if not os.path.exists(text):
                raise SourceError(f"file not found: {text!r}")
            paths = [Path(text)]
        files = [f for p in paths for f in (_folder_files(p) if p.is_dir() else [p])]
        if all(f.suffix.lower() in CSV_SUFFIXES for f in files):
            kinds = sorted({f.suffix.lower() for f in files})
            if len(kinds) > 1:  # (one read sniffs one delimiter: DuckDB's error named a file that was fine)
                example = f", e.g. {str(Path(text) / '**' / '*.csv')!r}" if os.path.isdir(text) else ""
                raise SourceError(f"{text!r} holds both {' and '.join(kinds)} files, which one read takes with one "
                                  f"delimiter: register each kind on its own, with a glob{example}")
            return ArrowSource(with_rid(_read_csv(files)))
        return _parquet_source([str(f) for f in files])
    raise SourceError(
        f"cannot register a {type(source).__name__}: pass a parquet/CSV path, a pyarrow Table or "
        "RecordBatchReader, a pandas DataFrame, a DuckDB relation or a Spark DataFrame"
    )


def _is_pattern(path: str) -> bool:
    """Does ``path`` hold a character DuckDB's readers (and Python's glob) read as a pattern's: ``[``, ``*``, ``?``?"""
    return any(c in path for c in "[*?")


def _outermost(folders: list[str]) -> list[str]:
    """``folders`` (sorted) without those inside another of them: each is read with its subfolders (a pattern
    matching `h/k=1` and `h/k=1/j=a` read the files below both twice; a review)."""
    kept: list[str] = []
    for folder in folders:
        if not any(Path(folder).is_relative_to(k) for k in kept):
            kept.append(folder)
    return kept


def duckdb_path(path: str) -> str:
    """``path`` as DuckDB's readers take that one file: they read a path holding ``[``, ``*`` or ``?`` as a pattern
    (``data[1].csv`` read ``data1.csv`` where both exist), whose only escape is a class of one character: each in
    brackets. A path without them is read as it is (a backslash included, which a pattern reads otherwise: such a
    path with them too has no form DuckDB reads as that one file, and is refused)."""
    if not _is_pattern(path):
        return path
    if "\\" in path:
        raise SourceError(f"{path!r} holds both a backslash and one of [ * ?, which DuckDB's readers cannot take as "
                          f"that one file's name: rename the file or its folder")
    return re.sub(r"([\[*?])", r"[\1]", path)


#: a pattern's files as DuckDB's read_parquet lists them: ``**`` any number of folders deep (the files beside it
#: too), and hidden files and folders matched by ``*`` (Python 3.11+; 3.10's glob skips those)
GLOB_AS_DUCKDB = {"recursive": True, **({"include_hidden": True} if sys.version_info >= (3, 11) else {})}


def _read_csv(paths: list[Path]) -> pa.Table:
    # CSV is read once in Python so both engines see the same rows in the same order (same rids).
    if len(paths) == 1:
        return _read_one_csv(paths[0])
    first = _csv_columns(paths[0])
    for path in paths[1:]:
        names = _csv_columns(path)
        if names != first:
            raise SourceError(f"CSV {str(path)!r} has columns {', '.join(names)} where {str(paths[0])!r} has "
                              f"{', '.join(first)}: CSV files read as one table must have the same columns")
    # the files in one read_csv, as DuckDB reads a glob of them: one type a column's values in every file hold
    # (integers in one file and decimals in another are DOUBLE, integers and text VARCHAR; a review)
    return _duckdb_csv([str(p) for p in paths], repr(str(paths[0])) + " ...")


def _read_one_csv(path: Path) -> pa.Table:
    """The rows DuckDB's own ``read_csv`` gives the file, as Arrow: its sniffer's delimiter, header and types (a ZIP
    code ``00123`` stays text, a 20-digit number an exact integer, names trimmed, a header without rows VARCHAR
    columns), and its NULLs (an empty field). Arrow's reader inferred otherwise: ``00123`` was 123, and a join with
    another file's ``'00123'`` matched ``4567``'s row too (a new user: the rows and lineage DuckDB does not give)."""
    return _duckdb_csv(str(path), repr(str(path)))


def _csv_columns(path: Path) -> list[str]:
    return _read_csv_relation(str(path), repr(str(path)), lambda rel: list(rel.columns))  # (bound, not read)


def _duckdb_csv(files: str | list[str], what: str) -> pa.Table:
    table = _read_csv_relation(files, what, lambda rel: rel.to_arrow_table())
    check_columns(table.column_names, f"CSV {what}")
    return table


def _read_csv_relation(files: str | list[str], what: str, take: Callable[[Any], T]) -> T:
    """``take`` of DuckDB's ``read_csv`` relation of ``files``, in a private in-memory database (the user's
    connection is not touched), its error a :class:`SourceError` naming ``what``."""
    con = duckdb.connect()
    try:
        return take(con.read_csv([duckdb_path(f) for f in files] if isinstance(files, list) else duckdb_path(files)))
    except duckdb.Error as e:
        lines = str(e).splitlines()
        # (the cause is on a later line of DuckDB's message: "CSV Error on Line: 2" alone hid it)
        cause = next((f" ({line.strip()})" for line in lines[1:] if "not utf-8 encoded" in line.lower()), "")
        raise SourceError(f"cannot read CSV {what}: {lines[0] if lines else type(e).__name__}{cause}") from None
    finally:
        con.close()


def _parquet_source(files: list[str]) -> ParquetSource:
    paths = tuple(os.path.abspath(f) for f in files)
    signature = files_signature(paths)  # (before the counts: a file changed after the stat shows in a later one)
    offsets, total, first = [], 0, None
    for f in files:
        meta = parquet_metadata(f)
        # the file's own names (an engine scanning it beside the rid it adds would see dl_rid as dl_rid_1)
        names = meta.schema.to_arrow_schema().names
        check_columns(names)
        _no_row_number_column(f, names)
        first = first or (f, names)
        _same_columns(first, f, names)
        offsets.append(total)
        total += meta.num_rows
    return ParquetSource(paths, tuple(offsets), total, signature)


def _no_row_number_column(path: str, names: list[str]) -> None:
    """Refuse a parquet file with a column named ``file_row_number``: dltrace numbers a file's rows with DuckDB's
    ``read_parquet(..., file_row_number = true)`` (the ids on DuckDB, the base rows read back on both engines),
    which adds a column of that name, and DuckDB refuses a file that has one (a new user's binder error, naming an
    option they never gave)."""
    clash = next((n for n in names if n.lower() == "file_row_number"), None)
    if clash is not None:
        raise SourceError(f"parquet {path!r} has a column named {clash!r}, the name of the row numbers dltrace reads "
                          f"with DuckDB's read_parquet: rename it, or register the rows as an Arrow table")


def _same_columns(first: tuple[str, list[str]], path: str, names: list[str]) -> None:
    """Refuse parquet files read as one table whose columns differ, in more than their order (both engines read
    the files by column name: DuckDB filled a missing column with NULLs where Spark refused)."""
    if {n.lower() for n in names} != {n.lower() for n in first[1]}:
        raise SourceError(f"parquet {path!r} has columns {', '.join(names)} where {first[0]!r} has "
                          f"{', '.join(first[1])}: parquet files read as one table must have the same columns")


def parquet_metadata(path: str) -> pq.FileMetaData:
    """The footer of parquet file ``path`` (its row count, its schema), or a :class:`SourceError`."""
    try:
        return pq.ParquetFile(path).metadata
    except (pa.ArrowInvalid, OSError) as e:
        raise SourceError(f"not a readable parquet file: {path!r} ({str(e).splitlines()[0]})") from None


def files_signature(files: tuple[str, ...]) -> tuple | None:
    """``(path, size, modification time in ns)`` of each file, or None when one cannot be read (the engine then
    says what is wrong)."""
    try:
        return tuple((f, st.st_size, st.st_mtime_ns) for f in files for st in [os.stat(f)])
    except OSError:
        return None


def with_rid(table: pa.Table) -> pa.Table:
    """Append ``dl_rid`` = row position, the dense id of an in-memory table."""
    check_columns(table.column_names)
    return table.append_column(RID, pa.array(range(table.num_rows), type=pa.int64()))


def check_columns(names: list[str], where: str = "source") -> None:
    """Refuse a source without columns, one that already has a column of a reserved prefix (``dl_``, ``_dl_``,
    ``_u_``: :data:`dltrace.names.RESERVED_PREFIXES`), or two
    columns whose names differ only in case: SQL reads names without case on both engines (DuckDB renamed the second ``A_1``; Spark
    found every reference ambiguous)."""
    if not names:  # (an engine's own error named no source: DuckDB's "SELECT list is empty")
        raise SourceError(f"{where} has no columns: a table needs at least one")
    seen: dict[str, str] = {}
    for n in names:
        if n.lower() == RID:  # (a table dltrace.add_rids numbered for SQL run outside a session: a new user's)
            raise ReservedName(f"{where} column {n!r} uses the reserved prefix 'dl_': it is dltrace's row id "
                               f"column, which dltrace.add_rids gives a table; register or adopt a view without it "
                               f"(SELECT * EXCLUDE ({n}) on DuckDB, EXCEPT ({n}) on Spark): a session numbers the "
                               f"rows itself")
        if (prefix := reserved_prefix(n)) is not None:  # (a query naming it would be refused: refused here first)
            raise ReservedName(f"{where} column {n!r} uses the reserved prefix {prefix!r}; rename it before "
                               f"registering")
        if n == seen.get(n.lower()):
            raise SourceError(f"{where} has two columns named {n!r}; rename one before registering")
        if n.lower() in seen:
            raise SourceError(f"{where} columns {seen[n.lower()]!r} and {n!r} differ only in case, which SQL does "
                              f"not tell apart; rename one before registering")
        seen[n.lower()] = n
