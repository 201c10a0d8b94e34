"""Lineage that persists: ``r.save(path)`` writes a folder (:mod:`dltrace.save_folder`: rows, lineage, a manifest
fingerprinting every base table, written atomically) and ``dltrace.load(path, session)`` reopens it as a result
whose lookups work as before -- refused when a base table changed since, unless ``allow_stale``."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

from dltrace.catalog import Catalog
from dltrace.errors import StaleLineage
from dltrace.result import LineageResult
from dltrace.save_folder import read_contents, read_manifest, save, stale_tables


@dataclass(repr=False)  # (LineageData.__repr__: a few lines, not the session and every column)
class SavedLineageResult(LineageResult):
    """A :class:`LineageResult` reopened from a save: ``path``, its ``manifest``, and the ``stale`` tables
    (non-empty only when loaded with ``allow_stale=True``)."""

    path: str | None = None
    manifest: dict = field(default_factory=dict)
    stale: list = field(default_factory=list)

    def table_rows(self, table: str) -> int | None:
        """The row count saved with the lineage (a table loaded stale, ``allow_stale``, may have another now)."""
        saved = self.manifest.get("tables", {}).get(table, {}).get("num_rows")
        return int(saved) if saved is not None else super().table_rows(table)


def load(path: str | os.PathLike, session: Catalog, allow_stale: bool = False) -> SavedLineageResult:
    """Reopen a save as a lineage result bound to ``session``.

    Every base table the saved query read must be registered in ``session`` with unchanged content (same
    row count and hash); otherwise :class:`dltrace.StaleLineage` names the table, unless ``allow_stale``.
    """
    folder, manifest = read_manifest(path)
    problems = stale_tables(session, manifest)
    if problems and not allow_stale:
        what = "; ".join(f"table {t!r} {why}" for t, why in problems)
        raise StaleLineage(f"saved lineage at {str(folder)!r} is stale: {what} (dltrace.load(path, session, allow_stale=True) loads it anyway)")
    if problems:
        warnings.warn(f"loading stale lineage: tables {', '.join(t for t, _ in problems)} changed", stacklevel=2)
    rows, lineage, on_values, shared = read_contents(folder, manifest)
    return SavedLineageResult(
        session=session,
        sql=manifest["query"],
        dialect=manifest.get("dialect") or session.dialect,
        table=rows,
        lineage_columns=lineage,
        strategy=manifest.get("strategy"),
        semantics=manifest.get("semantics", "witness"),
        rewritten_sql=manifest.get("rewritten_sql"),
        on_values=on_values,
        shared_lineage=shared,
        composed_from=tuple(manifest.get("composed_from") or ()),
        path=str(folder),
        manifest=manifest,
        stale=[t for t, _ in problems],
    )


__all__ = ["SavedLineageResult", "load", "read_manifest", "save", "stale_tables"]
