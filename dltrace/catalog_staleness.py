"""Stale lineage: whether the row ids a result holds still name the rows they named when it was computed.

The paper: "if a base tuple is updated, a new id is assigned", so a result's ids are valid against unchanged
tables only. A result keeps a :class:`TableState` of each table it read (:meth:`StaleChecks.snapshot`); reading
base rows through it later first checks that each table is still that registration, and a parquet table read in
place still those files. Mixed into :class:`dltrace.catalog.Catalog`, whose registrations it reads
(``tables``, ``versions``, ``storage``, ``_file_states``, ``view_groups``, ``view_snapshots``) and whose
``num_rows`` and ``rows_relations`` it calls.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable
from typing import Any, NamedTuple

from sqlglot import exp

from dltrace.engines.sources import ParquetSource, files_signature, parquet_metadata
from dltrace.errors import StaleLineage


class TableState(NamedTuple):
    """What a result's row ids name in one table (:meth:`Catalog.snapshot`)."""

    version: int  # the generation of its registration (Catalog.versions)
    files: tuple | None  # parquet read in place: each file's (path, size, mtime_ns); None: rows that cannot change
    rows: int  # its row count: the ids are in [0, rows)


class StaleChecks:
    """The stale-lineage checks of a catalog (see the module)."""

    tables: dict[str, Any]
    versions: dict[str, int]
    storage: dict[str, str]
    _file_states: dict[str, tuple | None]
    view_groups: dict[str, tuple[str, ...]]
    view_snapshots: dict[str, dict[str, TableState]]
    adopted: set[str]
    _adopted_states: dict[str, tuple[Hashable, int | None] | None]
    engine: Any

    def snapshot(self, tables: Iterable[str]) -> dict[str, TableState]:
        """:class:`TableState` of the registered ``tables`` now: what a result's row ids name. ``files``: a
        parquet table read in place, ``(path, size, mtime)`` per file (a stat each: checked at every read of base
        rows, where a content hash would read the files); the others' rows cannot change under a registration
        (Arrow and CSV are in memory, a memory copy, an adopted relation and a Spark DataFrame are frozen)."""
        out = {}
        for t in tables:
            src = self.tables.get(t)
            if src is not None:
                files = files_signature(src.files) if self._reads_files(t) else None
                out[t] = TableState(self.versions.get(t, 0), files, self.num_rows(t))
        return out

    def _reads_files(self, name: str) -> bool:
        """Is ``name`` a parquet table whose files queries and lookups read (not a copy of them in memory)?"""
        return isinstance(self.tables.get(name), ParquetSource) and self.storage.get(name) == "source"

    def changed_since(self, snapshot: dict[str, TableState]) -> list[tuple[str, str]]:
        """``[(table, why)]`` for the tables of ``snapshot`` whose rows may no longer be the ones it names."""
        problems = []
        for t, state in snapshot.items():
            src = self.tables.get(t)
            if src is None:
                problems.append((t, "is no longer registered"))
            elif self.versions.get(t, 0) != state.version:
                problems.append((t, "was registered again"))
            elif state.files is not None and isinstance(src, ParquetSource):
                now = files_signature(src.files)
                if now != state.files:
                    diff = [f[0] for f in state.files if f not in (now or ())]
                    where = f" ({os.path.basename(diff[0])})" if diff else ""
                    problems.append((t, f"has files changed on disk{where}"))
        return problems

    def check_numbering(self, tables: Iterable[str]) -> None:
        """Raise :class:`StaleLineage` before a query makes row ids of a parquet table read in place whose files
        no longer hold the row counts its ids were numbered by. An id is its file's offset (the rows of the files
        before it, counted at registration) plus the row's position in the file: a file with more or fewer rows
        gives two rows one id, or ids past the table's count. A stat per file; a footer is read only for a file
        whose stat changed, and files rewritten with the same counts are taken (the ids stay exact positions).

        An adopted relation the user changed since (:meth:`check_adopted_unchanged`) raises too, and so does a
        registered table whose relation the user made again (:meth:`check_registered_not_replaced`)."""
        tables = list(dict.fromkeys(tables))
        self.check_registered_not_replaced(tables)
        for t in tables:
            self.check_adopted_unchanged(t)
            if not self._reads_files(t):
                continue
            src, known = self.tables[t], self._file_states.get(t)
            now = files_signature(src.files)
            if now is None or now == known:
                continue  # (a file gone: the engine's scan says which)
            unchanged = set(known or ())
            for entry, counted in zip(now, src.file_rows):
                found = counted if entry in unchanged else parquet_metadata(entry[0]).num_rows
                if found != counted:
                    raise StaleLineage(
                        f"table {t!r} has files changed on disk since it was registered ({os.path.basename(entry[0])}"
                        f" has {found} rows, {counted} then): its row ids are positions in the files as registered "
                        f"and would no longer name one row each; register it again")
            self._file_states[t] = now

    def check_registered_not_replaced(self, tables: Iterable[str]) -> None:
        """Raise :class:`StaleLineage` when the user made the relation of a table dltrace registered again
        (``CREATE OR REPLACE VIEW t``, ``createOrReplaceTempView("t")``): queries with lineage read the rows
        registered, and answered from them where the engine (``s.sql``) answered from the user's (a Spark tester's;
        a change of columns gave the user's column names over the registered values). One catalog question per
        query on a connection or SparkSession of the user's; none on dltrace's own."""
        registered = [t for t in tables if t in self.tables and t not in self.adopted]
        replaced = self.engine.replaced_by_user(registered) if registered else []
        if replaced:
            name = replaced[0]
            raise StaleLineage(f"table {name!r}, which dltrace registered, was made again on the connection since "
                               f"(CREATE OR REPLACE, createOrReplaceTempView): queries with lineage read the rows "
                               f"registered and would answer otherwise than the engine; register the rows under "
                               f"another name, or adopt your relation under another name")

    def check_unchanged_while_run(self, snapshot: dict[str, TableState], tables: Iterable[str]) -> None:
        """Raise :class:`StaleLineage` when a parquet file of ``tables`` (read in place by a query that just ran,
        ``snapshot`` taken just before it) changed meanwhile (:meth:`changed_since`): the ids the query made are
        positions in files the session no longer counted (a packed id past its count spills into the next table's
        field, ``rewriter/passes/pack_ids.py``). A stat per file."""
        during = {t: snapshot[t] for t in dict.fromkeys(tables) if t in snapshot and snapshot[t].files is not None}
        for t, why in self.changed_since(during):
            raise StaleLineage(f"table {t!r} {why} while the query ran: its row ids may not name the rows it read; "
                               f"run it again")

    def check_adopted_unchanged(self, name: str) -> None:
        """Raise :class:`StaleLineage` when ``name`` is a relation of the user's, adopted, that changed on the
        engine since as far as :meth:`Engine.adopted_state` tells, cheaply (not an UPDATE keeping the row count).
        Queries with lineage read its rows as adopted (frozen, so that its ids stay
        put): after the user's INSERT, ``s.run`` answered from the old rows, where the engine (and ``s.run`` with
        ``lineage=None``) answered from the new ones -- a new user's sum that silently left out the new rows."""
        if name not in self._adopted_states:
            return
        then, now = self._adopted_states[name], self.engine.adopted_state(name)
        if now != then:
            raise StaleLineage(f"table {name!r}, which you adopted, changed on the engine since ({_how(then, now)}): "
                               f"queries with lineage read its rows as adopted and would answer otherwise than the "
                               f"engine; adopt it again (s.adopt({name!r}, replace=True)) to trace it as it is now")

    def copy_changed(self, name: str) -> str | None:
        """Why the files a parquet table was copied into memory from no longer hold what was copied (a save
        fingerprints the files, and lookups read the copy), or None."""
        src = self.tables.get(name)
        if not isinstance(src, ParquetSource) or self.storage.get(name) != "memory":
            return None
        known = self._file_states.get(name)
        now = files_signature(src.files)
        if known is not None and now == known:
            return None
        changed = [f[0] for f in (known or ()) if f not in (now or ())] or list(src.files)
        return f"was copied into memory from files changed on disk since ({os.path.basename(changed[0])})"

    def check_fresh(self, snapshot: dict[str, TableState], what: str) -> None:
        """Raise :class:`StaleLineage` when a table of ``snapshot`` changed: ``what`` would read other base rows
        than the ones the result's ids named when it was computed."""
        problems = self.changed_since(snapshot)
        if problems:
            tables = "; ".join(f"table {t!r} {why}" for t, why in problems)
            # ("may": a table registered again with the same rows is a new version all the same; a new user's)
            raise StaleLineage(f"{what}: the lineage is stale: {tables} since the result was computed, so its "
                               "row ids may name other rows now; run the query again (the ids themselves, "
                               "r.lineage(i), are still the ones captured)")

    def check_views_fresh(self, tree: exp.Expression) -> None:
        """Plain SQL reading a result's lineage views together with a base table of its lineage (the join of a
        rid to its row): refused once that table changed (:meth:`check_fresh`). The views alone are ids."""
        if not self.view_groups:
            return
        read = {t.name.lower() for t in tree.find_all(exp.Table)}
        rows = self.rows_relations()
        for group, made in self.view_groups.items():
            if read.isdisjoint(m.lower() for m in made):
                continue
            snapshot = self.view_snapshots.get(group, {})
            joined = {t: v for t, v in snapshot.items() if t in read or rows.get(t, "").lower() in read}
            self.check_fresh(joined, f"a query joining lineage views {group!r}* to their base tables")


def _how(then: tuple[Hashable, int | None] | None, now: tuple[Hashable, int | None] | None) -> str:
    """How an adopted relation changed, from two :meth:`Engine.adopted_state` values."""
    if now is None:
        return "it is no longer there"
    if then is not None and then[0] == now[0]:
        return f"it has {now[1]} rows, {then[1]} when adopted"
    return "it was replaced or redefined"
