"""The folder a lineage result is saved to: written atomically, with a manifest that fingerprints its base tables.

A save is a folder::

    manifest.json       what was run, how, when, and a fingerprint of every base table it read
    rows.parquet        the query's own rows (column names as in the result; positional names if duplicated)
    lineage.parquet     ``row`` (the output row's index in rows.parquet), then one column per base table,
                        ``dl_<table>``: list<int64> rid sets or roaring bitmap bytes (saves before ``row``
                        existed have the lineage columns only, row i at position i: they load as before)
    lineage_on.parquet  LINEAGE ON results only: the dictionary id -> value tuple (typed, so it round-trips)
    (a column Parquet has no type for, an INTERVAL or a UNION, is in a stored form: its Arrow schema in the manifest)
    shared_lineage.parquet  results with lineage every row has (an uncorrelated scalar subquery's) only: one row,
                        ``dl_<table>`` per table; part of every row's lineage, stored once

Writing is atomic (:mod:`dltrace.atomic_folder`): everything goes into a hidden temporary sibling folder, manifest
last, each file fsync-ed, then renamed in place of the previous save. A crash at any point leaves a complete save
readable: :func:`read_manifest` finds a previous save a crash left aside.

Fingerprints (the paper: "if a base tuple is updated, a new id is assigned", so saved rids are only valid
against unchanged tables): row count plus a content hash (:mod:`dltrace.fingerprints`) -- of the file bytes
for parquet sources, of the Arrow IPC serialisation for in-memory tables (CSV is read into memory at
registration, so that is what the catalog actually holds), of an engine-side ``bit_xor(xxhash64(*))`` for a
Spark DataFrame. Reopening a save as a result is :func:`dltrace.store.load`.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sqlglot import exp

from dltrace.atomic_folder import aside, fsync_dir, fsync_file, replace_folder
from dltrace.catalog import Catalog
from dltrace.engines.sources import ArrowSource, NativeSource, ParquetSource
from dltrace.errors import DltraceError, StaleLineage, folder_problem
from dltrace.fingerprints import arrow_hash, file_hash, new_hash
from dltrace.lineage_data import LineageData
from dltrace.names import RID
from dltrace.parquet_forms import restored, storable
from dltrace.py_values import py_list
from dltrace.rewriter.parse import parse_query
from dltrace.version import __version__

FORMAT = "dltrace-lineage"
FORMAT_VERSION = 2  # the newest this dltrace reads; 2: a column in a stored form (:mod:`dltrace.parquet_forms`)
MANIFEST = "manifest.json"
ROWS = "rows.parquet"
LINEAGE = "lineage.parquet"
LINEAGE_ON = "lineage_on.parquet"
SHARED = "shared_lineage.parquet"
ROW = "row"  # lineage.parquet's output row index


# ---------------------------------------------------------------------------------------------------------------
# fingerprints of registered tables
# ---------------------------------------------------------------------------------------------------------------


def table_fingerprint(catalog: Catalog, name: str) -> dict[str, Any]:
    """``{"kind", "num_rows", "hash", ...}`` of a registered table's current content. A parquet table copied into
    memory is fingerprinted by its files while they are as copied (a stat each), else refused: the ids name the
    copy's rows, which the files no longer hold."""
    src = catalog.tables[name]
    origin = catalog.origins.get(name)
    changed = catalog.copy_changed(name)
    if changed:
        raise StaleLineage(f"table {name!r} {changed}: a save fingerprints them, and they no longer hold the rows "
                           "its ids name; register it again and run the query again")
    if isinstance(src, ParquetSource):
        files = [{"path": f, "size": os.path.getsize(f), "hash": file_hash(f)} for f in src.files]
        h = new_hash()
        for f, off in zip(files, src.offsets):
            h.update(f"{off}:{f['hash']};".encode())
        fp = {"kind": "parquet", "num_rows": src.num_rows, "hash": h.hexdigest(), "files": files}
    elif isinstance(src, ArrowSource):
        digest = catalog.derived(name, "content hash", lambda source: arrow_hash(source.table))
        fp = {"kind": "arrow", "num_rows": src.num_rows, "hash": digest}
    elif isinstance(src, NativeSource):
        fp = {"kind": "engine", "num_rows": catalog.num_rows(name), "hash": _engine_hash(catalog, name)}
    else:  # pragma: no cover - resolve_source builds only the three kinds
        fp = {"kind": type(src).__name__, "num_rows": catalog.num_rows(name), "hash": None}
    if origin:
        fp["origin"] = origin
    return fp


def _engine_hash(catalog: Catalog, name: str) -> str:
    """A content hash the engine computes (a Spark DataFrame has no file or Arrow copy to hash here).

    An adopted relation's is of the rows dltrace froze when adopting it (its rows relation without ``dl_rid``),
    which the lineage's ids name: the user's relation changed since (an INSERT) would be fingerprinted as it is
    now, and a session adopting the changed relation would then load the lineage as fresh. The same rows hash
    alike either way (saves made before this hashed the user's relation)."""
    if name in catalog.adopted:
        n, h = catalog.engine.content_hash(catalog.engine.rows_name(name), exclude=(RID,))
    else:
        n, h = catalog.engine.content_hash(name)
    digest = new_hash()
    digest.update(f"{n}:{h}".encode())
    return digest.hexdigest()


def _query_tables(result: LineageData) -> list[str]:
    """The registered base tables the query reads (its lineage tables first, in their order).

    An earlier step the query read end to end (``composed_from``) is not one: its rows' lineage is in the
    result's lineage tables' ids, which is all a load needs (the step need not exist in the loading session)."""
    names = list(result.lineage_columns)
    steps = set(getattr(result, "composed_from", ()))
    try:
        tree = parse_query(result.sql, result.dialect)
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for t in tree.find_all(exp.Table):
            n = t.name.lower()
            if n and n not in ctes and n not in names and n not in steps and n in result.session.tables:
                names.append(n)
    except DltraceError:
        pass
    return [n for n in names if n in result.session.tables]


# ---------------------------------------------------------------------------------------------------------------
# save
# ---------------------------------------------------------------------------------------------------------------


def _write_table(table: pa.Table, path: Path) -> None:
    # use_compliant_nested_type=False keeps list item names (DuckDB's "l"), so types round-trip exactly.
    pq.write_table(table, path, compression="zstd", use_compliant_nested_type=False)
    fsync_file(path)


def _is_save(folder: Path) -> bool:
    try:
        m = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(m, dict) and m.get("format") == FORMAT


def save(result: LineageData, path: str | os.PathLike) -> Path:
    """Write ``result`` (rows, lineage columns, LINEAGE ON dictionary) and its manifest to folder ``path``,
    atomically replacing a previous save there. Returns the folder."""
    target = Path(path).absolute()
    try:
        return _save(result, target)
    except OSError as e:  # a folder that cannot be made or written (no such parent, no permission, disk full)
        raise DltraceError(f"cannot save lineage to {str(target)!r}: {folder_problem(target, e)}") from None


def _save(result: LineageData, target: Path) -> Path:
    if target.exists() and not target.is_dir():
        raise DltraceError(f"cannot save lineage to {str(target)!r}: it is a file")
    if target.exists() and any(target.iterdir()) and not _is_save(target):
        raise DltraceError(f"cannot save lineage to {str(target)!r}: the folder holds other files (not a dltrace save)")
    manifest = _manifest(result)
    replace_folder(target, lambda folder: _write_contents(result, folder, manifest), _is_save)
    return target


def _manifest(result: LineageData) -> dict[str, Any]:
    catalog = result.session
    names = list(result.table.column_names)
    lineage = {}
    for t, col in result.lineage_columns.items():
        lineage[t] = {"column": f"dl_{t}", "type": str(col.type)}
    tables = {t: table_fingerprint(catalog, t) for t in _query_tables(result)}
    return {
        "format": FORMAT,
        "format_version": 1,  # (2 once a column is written in a stored form, which an older dltrace misreads)
        "dltrace_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "query": result.sql,
        "dialect": result.dialect,
        "engine": catalog.dialect,
        "strategy": result.strategy,
        "semantics": result.semantics,
        "rewritten_sql": result.rewritten_sql,
        "num_rows": result.num_rows,
        "columns": names,
        "lineage": lineage,
        "lineage_on": None,
        "shared_lineage": None,
        "tables": tables,
        # the earlier steps read end to end (their rows' lineage is in the tables' ids): verify is refused
        "composed_from": list(getattr(result, "composed_from", ())),
        "files": {},
    }


def _write_contents(result: LineageData, folder: Path, manifest: dict[str, Any]) -> None:
    names = list(result.table.column_names)
    rows = result.table
    if len(set(names)) != len(names):  # Parquet wants distinct names: positional ones, real ones in the manifest
        rows = rows.rename_columns([f"c{j}" for j in range(len(names))])
    rows = rows.replace_schema_metadata(None)
    files = {ROWS: rows}
    if result.lineage_columns:
        row = pa.array(np.arange(result.num_rows, dtype=np.int64))  # explicit: readers other than dltrace join on it
        files[LINEAGE] = pa.table({ROW: row, **{f"dl_{t}": col for t, col in result.lineage_columns.items()}})
    if result.shared_lineage:
        manifest["shared_lineage"] = {"file": SHARED, "tables": list(result.shared_lineage)}
        files[SHARED] = pa.table({f"dl_{t}": col for t, col in result.shared_lineage.items()})
    if result.on_values is not None:
        manifest["lineage_on"] = {"file": LINEAGE_ON, "size": len(result.on_values)}
        files[LINEAGE_ON] = _on_values_table(result.on_values)
    for name, table in files.items():
        table, schema = storable(table)
        _write_table(table, folder / name)
        manifest["files"][name] = {"bytes": (folder / name).stat().st_size, "rows": table.num_rows}
        if schema is not None:  # the types Parquet holds in no other form, restored when loaded
            manifest["files"][name]["arrow_schema"] = schema
            manifest["format_version"] = 2
    text = json.dumps(manifest, indent=1, default=str)
    with open(folder / MANIFEST, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(folder)


def _on_values_table(on_values: dict[int, tuple]) -> pa.Table:
    ids = sorted(on_values)
    width = max((len(v) for v in on_values.values()), default=0)
    cols = {"dl_on_id": pa.array(ids, type=pa.int64())}
    for k in range(width):
        cols[f"v{k}"] = pa.array([on_values[i][k] for i in ids])
    return pa.table(cols)


# ---------------------------------------------------------------------------------------------------------------
# read
# ---------------------------------------------------------------------------------------------------------------


def read_manifest(path: str | os.PathLike) -> tuple[Path, dict[str, Any]]:
    """The folder actually holding the save at ``path`` (or its aside copy after a crash) and its manifest."""
    folder = Path(path).absolute()
    if not (folder / MANIFEST).is_file():
        old = aside(folder, _is_save)
        if old is None:
            raise DltraceError(f"no saved lineage at {str(folder)!r} (no {MANIFEST})")
        folder = old
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # (a UnicodeDecodeError is a ValueError)
        raise DltraceError(f"unreadable manifest in {str(folder)!r}: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DltraceError(f"{str(folder)!r} is not a dltrace lineage save")
    version = manifest.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise _damaged(folder, f"format_version is {version!r}, not a number")
    if version > FORMAT_VERSION:
        raise DltraceError(f"{str(folder)!r} was saved by a newer dltrace (format {version}); upgrade dltrace")
    _check_manifest(folder, manifest)
    return folder, manifest


def _damaged(folder: Path, what: str) -> DltraceError:
    return DltraceError(f"saved lineage at {str(folder)!r} is damaged: {MANIFEST}'s {what}")


# what every save's manifest holds (:func:`_manifest`), by key: the type its value has
_MANIFEST_KEYS = {"query": str, "num_rows": int, "columns": list, "lineage": dict, "tables": dict, "files": dict,
                  "semantics": str}


def _check_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Raise naming the first key of the manifest that is missing or of another shape than a save writes (a
    hand-edited or damaged manifest raised KeyError, TypeError or AttributeError, or loaded as lineage of nothing)."""
    for key, kind in _MANIFEST_KEYS.items():
        value = manifest.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _damaged(folder, f"{key!r} is {'missing' if key not in manifest else repr(value)[:40]}, not a "
                                   f"{kind.__name__}")
    if not all(isinstance(c, str) for c in manifest["columns"]):
        raise _damaged(folder, "'columns' holds something other than names")
    strategy = manifest.get("strategy")
    if manifest["lineage"] and not isinstance(strategy, str):
        raise _damaged(folder, f"'strategy' is {'missing' if 'strategy' not in manifest else repr(strategy)}, "
                               f"beside lineage columns")
    for t, info in manifest["lineage"].items():
        if not isinstance(info, dict) or not isinstance(info.get("column"), str):
            raise _damaged(folder, f"lineage of {t!r} names no column")
    for key in ("tables", "files"):
        if not all(isinstance(v, dict) for v in manifest[key].values()):
            raise _damaged(folder, f"{key!r} holds something other than a description per entry")
    rows = manifest["files"].get(ROWS)
    if rows is None:
        raise _damaged(folder, f"'files' does not list {ROWS}")
    if rows.get("rows") != manifest["num_rows"]:
        raise _damaged(folder, f"'num_rows' is {manifest['num_rows']}, where {ROWS} holds {rows.get('rows')} rows")
    for key in ("lineage_on", "shared_lineage"):
        if manifest.get(key) is not None and not isinstance(manifest[key], dict):
            raise _damaged(folder, f"{key!r} is {manifest[key]!r}, not a description")


def stale_tables(catalog: Catalog, manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """``[(table, why)]`` for every base table whose fingerprint no longer matches (or that is missing)."""
    problems = []
    for name, saved in manifest.get("tables", {}).items():
        if name not in catalog.tables:
            problems.append((name, "is not registered in this session"))
            continue
        changed = catalog.copy_changed(name)
        if changed:  # (the copy may hold the saved rows, but nothing tells without hashing it)
            problems.append((name, changed))
            continue
        now = table_fingerprint(catalog, name)
        if now["num_rows"] != saved.get("num_rows"):
            problems.append((name, f"has {now['num_rows']} rows, {saved.get('num_rows')} when saved"))
        elif now.get("hash") != saved.get("hash"):
            changed = ""
            if now.get("kind") == saved.get("kind") == "parquet":
                was = {f["path"]: f["hash"] for f in saved.get("files", [])}
                diff = [f["path"] for f in now["files"] if was.get(f["path"]) != f["hash"]]
                if diff:
                    changed = f" ({os.path.basename(diff[0])}" + (f" and {len(diff) - 1} more" if len(diff) > 1 else "") + ")"
            problems.append((name, f"content changed since the lineage was saved{changed}"))
    return problems


def read_contents(folder: Path, manifest: dict[str, Any]) -> tuple[
        pa.Table, dict[str, pa.ChunkedArray], dict[int, tuple] | None, dict[str, pa.ChunkedArray]]:
    """The saved rows, lineage columns, LINEAGE ON dictionary and shared lineage of the save in ``folder``
    (checked whole first)."""
    for name, info in manifest.get("files", {}).items():
        f = folder / name
        if not f.is_file() or f.stat().st_size != info.get("bytes"):
            raise DltraceError(f"saved lineage at {str(folder)!r} is damaged: {name} is missing or truncated")
    rows = _read(folder, manifest, ROWS)
    columns = manifest.get("columns") or rows.column_names
    if len(columns) != rows.num_columns:
        raise _damaged(folder, f"'columns' names {len(columns)} columns, where {ROWS} holds {rows.num_columns}")
    if list(rows.column_names) != list(columns):
        rows = rows.rename_columns(columns)
    lineage: dict[str, pa.ChunkedArray] = {}
    if manifest.get("lineage"):
        lt = pq.read_table(folder / LINEAGE)
        if ROW in lt.column_names:  # a save with the explicit row column: put the rows in their order
            lt = lt.sort_by(ROW)
            if not np.array_equal(lt.column(ROW).to_numpy(), np.arange(rows.num_rows)):
                raise DltraceError(f"saved lineage at {str(folder)!r} is damaged: its rows do not match rows.parquet")
        for t, info in manifest["lineage"].items():
            if info["column"] not in lt.column_names:
                raise _damaged(folder, f"lineage of {t!r} names the column {info['column']!r}, which {LINEAGE} "
                                       f"does not hold")
            lineage[t] = lt.column(info["column"])
    on_values = None
    if manifest.get("lineage_on"):
        ot = _read(folder, manifest, manifest["lineage_on"].get("file", LINEAGE_ON))
        ids = ot.column("dl_on_id").to_pylist()
        vals = [py_list(ot.column(c)) for c in ot.column_names[1:]]
        on_values = {int(i): tuple(v[j] for v in vals) for j, i in enumerate(ids)}
    shared: dict[str, pa.ChunkedArray] = {}
    if manifest.get("shared_lineage"):
        st = pq.read_table(folder / manifest["shared_lineage"].get("file", SHARED))
        tables = manifest["shared_lineage"].get("tables")
        if not isinstance(tables, list) or any(f"dl_{t}" not in st.column_names for t in tables):
            raise _damaged(folder, f"shared lineage tables {tables!r} are not the columns its file holds")
        shared = {t: st.column(f"dl_{t}") for t in tables}
    return rows, lineage, on_values, shared


def _read(folder: Path, manifest: dict[str, Any], name: str) -> pa.Table:
    """Saved file ``name``, its columns written in a stored form back in their types."""
    return restored(pq.read_table(folder / name), manifest.get("files", {}).get(name, {}).get("arrow_schema"))
