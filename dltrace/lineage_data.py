"""The rows of a query and their lineage, as data: what lookups, the completeness oracle and persistence read.

:class:`LineageData` holds a query's own rows as Arrow and one lineage column per base table (a set of rids
per row: a list, or roaring bitmap bytes); it decodes them. Lineage that every row has (an uncorrelated scalar
subquery's: a HAVING threshold) is kept once, in ``shared_lineage``, and is part of every row's lineage:
``lineage(i)`` and ``sets(table)`` include it, ``lineage_columns`` holds the rows' own part only. The questions one asks of it (``backward``,
``forward``, ``explain``, ``verify``, ``save``) are methods of :class:`dltrace.result.LineageResult`, which is
this data plus those methods, one layer up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dltrace.catalog import Catalog, TableState
from dltrace.errors import DltraceError, UnknownTable, check_text, row_index
from dltrace.names import value_tuples
from dltrace.py_values import py_value
from dltrace.udafs import decode, encode_bitmaps
from dltrace.udafs.bitmap_arrow import union_arrow
from dltrace.udafs.bitstrings import bitmaps_of_bitstrings
from dltrace.udafs.packed_ids import unpack_ids
from dltrace.udafs.sets_arrow import set_union_arrow, sorted_sets


def is_bitmap_type(t: pa.DataType) -> bool:
    """Is a lineage column of this type roaring bitmaps (binary), rather than sets (lists of rids)?"""
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or getattr(pa.types, "is_binary_view", lambda _: False)(t)


def decode_ids(value: Any) -> list[int]:
    """One lineage value as it comes back from an engine (array, bitmap bytes, None) -> sorted rids."""
    if value is None:
        return []
    if isinstance(value, (bytes, bytearray, memoryview)):
        return decode(bytes(value))
    return sorted({int(v) for v in value if v is not None})


class ByTable(dict):
    """``{table: ...}`` keyed by the tables' names in lower case, as the engines read names (case-insensitively),
    and looked up in any case: ``r.lineage(i)["Events"]`` of a table registered as ``Events`` (a new user met a
    KeyError)."""

    def _key(self, key: Any) -> Any:
        if isinstance(key, str) and not dict.__contains__(self, key) and dict.__contains__(self, key.lower()):
            return key.lower()
        return key

    def __getitem__(self, key: Any) -> Any:
        return dict.__getitem__(self, self._key(key))

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, self._key(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, self._key(key), default)

    def copy(self) -> "ByTable":
        return ByTable(self)


class FinishedOnRead(MutableMapping):
    """A result's lineage columns (base table -> column), some of them still as the engine returned them and
    finished the first time they are read, then kept: id lists built into bitmaps (``encode_bitmaps``, the bytes
    ``dl_bitmap_build`` writes; ``rewriter/passes/build_on_read.py``), or sorted and deduplicated into sets
    (``sorted_sets``). Reading is every way a mapping is read (``[t]``, ``get``, ``items``, ``values``), so no
    reader sees an unfinished column; a column set (``[t] = col``) is taken as finished."""

    def __init__(self, columns: Mapping[str, pa.ChunkedArray],
                 finish: Callable[[str, pa.ChunkedArray], pa.ChunkedArray], pending: Iterable[str],
                 packed: Mapping[str, tuple[int, int, int]] | None = None) -> None:
        self._columns = dict(columns)
        self._finish = finish
        self._pending = set(pending) & set(self._columns)
        # table -> (shift, bits, offset): its column is a packed list its ids are read out of first
        # (rewriter/passes/pack_ids.py)
        self._packed = dict(packed or {})

    @classmethod
    def bitmaps(cls, columns: Mapping[str, pa.ChunkedArray], wide: frozenset[str] = frozenset(),
                packed: Mapping[str, tuple[int, int, int]] | None = None,
                dense: Mapping[str, int] | None = None) -> "FinishedOnRead":
        """Bitmap columns, those of list type built when read (64-bit for the ``wide`` tables); the ``dense``
        tables' columns (table -> its row count) are bit strings of their id range, whose set bits are the ids
        (rewriter/passes/dense_ids.py)."""
        dense = dict(dense or {})

        def finish(t: str, col: pa.ChunkedArray) -> pa.ChunkedArray:
            return bitmaps_of_bitstrings(col, dense[t]) if t in dense else encode_bitmaps(col, wide=t in wide)

        return cls(columns, finish, [t for t, col in columns.items() if t in dense or not is_bitmap_type(col.type)],
                   packed)

    @classmethod
    def sets(cls, columns: Mapping[str, pa.ChunkedArray],
             packed: Mapping[str, tuple[int, int, int]] | None = None) -> "FinishedOnRead":
        """Id lists, every one sorted and deduplicated when read."""
        return cls(columns, lambda t, col: sorted_sets(col), list(columns), packed)

    def __getitem__(self, table: str) -> pa.ChunkedArray:
        col = self._columns[table]
        if table in self._pending:
            if table in self._packed:
                col = unpack_ids(col, *self._packed.pop(table))
            col = self._columns[table] = self._finish(table, col)
            self._pending.discard(table)
        return col

    def __setitem__(self, table: str, col: pa.ChunkedArray) -> None:
        self._columns[table] = col
        self._pending.discard(table)
        self._packed.pop(table, None)

    def __delitem__(self, table: str) -> None:
        del self._columns[table]
        self._pending.discard(table)
        self._packed.pop(table, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def finished(self) -> bool:
        """Is every column finished already?"""
        return not self._pending

    def __repr__(self) -> str:
        return f"FinishedOnRead({', '.join(self._columns)}{'' if self.finished() else '; not all read yet'})"


@dataclass
class LineageData:
    """Rows of a query (``table``) and, per row, the base rows they came from (``lineage(i)``)."""

    session: Catalog  # the tables the query ran on (a :class:`dltrace.Session`)
    sql: str  # the query as the user wrote it
    dialect: str  # the dialect ``sql`` is written in
    table: pa.Table  # the query's own columns
    lineage_columns: dict[str, pa.ChunkedArray] = field(default_factory=dict)  # base table -> sets per row
    strategy: str | None = "set"
    semantics: str = "witness"
    rewritten_sql: str | None = None
    on_values: dict[int, tuple] | None = None  # LINEAGE ON: dictionary id -> value tuple
    # base table -> the lineage every row has besides its column's (a length-1 array of the column's type)
    shared_lineage: MutableMapping[str, pa.ChunkedArray] = field(default_factory=dict)
    # the tables the ids name (and the query read), as they were when the lineage was computed
    # (Catalog.snapshot; by default taken when the result is made): reads of base rows check it
    base_snapshot: dict[str, TableState] | None = None

    def __post_init__(self) -> None:
        if self.base_snapshot is None:
            self.base_snapshot = self.session.snapshot([*self.lineage_columns, *self.shared_lineage])

    def __repr__(self) -> str:
        # (a terminal printed the session, the rewritten SQL and every file's state: a new user's)
        sql = " ".join(self.sql.split())
        lineage = f"{self.strategy} lineage of {', '.join(self.tables) or 'no table'}" if self.strategy else \
            "no lineage"
        names = self.table.column_names
        columns = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        return (f"<{type(self).__name__}: {self.num_rows} row{'s' * (self.num_rows != 1)} x {len(names)} "
                f"column{'s' * (len(names) != 1)} ({columns}), {lineage}; "
                f"sql={sql[:80] + '...' if len(sql) > 80 else sql!r}>")

    def check_every_row(self, what: str) -> None:
        """Refuse ``what``, which reads every row's lineage, when some rows' lineage is unknown (a backward trace
        of some rows: an untraced row would read as having none). Every row's was computed here."""

    def check_fresh(self, what: str) -> None:
        """Raise :class:`dltrace.StaleLineage` when a table this result's ids name changed since it was computed
        (registered again, its parquet files rewritten): ``what`` would read other rows than the lineage's."""
        self.session.check_fresh(self.base_snapshot or {}, what)

    def table_rows(self, table: str) -> int | None:
        """How many rows ``table`` had when the lineage was computed (its ids are below), or None if unknown:
        ids are checked against it, not against the table registered now, which may be another one."""
        state = (self.base_snapshot or {}).get(table)
        return None if state is None else state.rows

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def tables(self) -> list[str]:
        return list(self.lineage_columns)

    def is_traced(self, i: int) -> bool:
        """Whether row ``i``'s lineage is known (backward tracing of some rows only knows theirs)."""
        return True

    def lineage(self, i: int) -> dict[str, list]:
        """``{table: [dl_rid, ...]}`` for output row ``i`` (every base table read; empty lists included).

        Under ``LINEAGE ON (e1, ...)``: ``{table: [(e1, ...), ...]}``, the sorted distinct value tuples of the
        table the expressions read, instead of its row ids.
        """
        i = self.check_row(i)
        found = {t: self._with_shared(t, decode_ids(col[i].as_py())) for t, col in self.lineage_columns.items()}
        return self._decoded(found)

    def shared_ids(self, table: str) -> list[int]:
        """The rids of ``table`` in every row's lineage (sorted; decoded once)."""
        cache = self.__dict__.setdefault("_shared_ids", {})
        if table not in cache:
            value = self.shared_lineage.get(table)
            cache[table] = decode_ids(value[0].as_py()) if value is not None else []
        return cache[table]

    def _with_shared(self, table: str, ids: list[int]) -> list[int]:
        shared = self.shared_ids(table) if self.shared_lineage else ()
        if not shared:
            return ids
        return sorted(set(ids).union(shared)) if ids else list(shared)

    def table_key(self, table: str) -> str:
        """``table`` as this result's key for it (names are case-insensitive), or a one-line error naming the
        tables it has lineage of."""
        key = check_text(table, "table").lower()  # (None, 3: "no lineage for table None", s.impact's type error)
        if key not in self.lineage_columns:
            have = ", ".join(self.lineage_columns) or "none"
            raise UnknownTable(f"the result has no lineage for table {table!r}; it has: {have}")
        return key

    def sets(self, table: str) -> pa.ChunkedArray:
        """Every row's whole lineage of ``table``, as a column (its own part merged with the shared part: built
        on each call, for readers that want one column; ``lineage(i)`` merges one row)."""
        table = self.table_key(table)
        col = self.lineage_columns[table]
        shared = self.shared_lineage.get(table)
        if shared is None or not len(col):
            return col
        union = union_arrow if is_bitmap_type(col.type) else set_union_arrow
        merged = union(col.combine_chunks(), shared.combine_chunks())
        return pa.chunked_array([merged.cast(col.type)], type=col.type)

    def row_index(self, i: Any) -> int:
        """``i`` as a row index of this result, or a one-line error naming what is wrong with it."""
        return row_index(i, self.num_rows)

    def check_row(self, i: Any) -> int:
        """``i`` as the index of a row whose lineage can be read, or a one-line error naming what is wrong."""
        i = self.row_index(i)
        self._has_lineage()
        return i

    def _has_lineage(self, what: str = "") -> None:
        if self.strategy is None:  # (no lineage captured is not an empty lineage)
            raise DltraceError(f"{what}{': ' if what else ''}this result has no lineage: it was run with lineage=None "
                               "or LINEAGE ON (); run it with lineage='set' or 'bitmap'")

    def check_rid_lineage(self, what: str) -> None:
        """Refuse ``what``, a reader of row ids, on a result without lineage or with LINEAGE ON value tuples. A query
        reading no table has lineage, in no table (``lineage(i) == {}``): its readers answer empty."""
        self._has_lineage(what)
        if self.on_values is not None:
            raise DltraceError(f"{what}: this result's lineage is LINEAGE ON value tuples, not row ids; read them "
                               "with r.lineage(i)")

    def lineage_all(self) -> list:
        self._has_lineage()
        cols = {t: c.to_pylist() for t, c in self.lineage_columns.items()}
        return [self._decoded({t: self._with_shared(t, decode_ids(v[i])) for t, v in cols.items()})
                for i in range(self.num_rows)]

    def _decoded(self, found: dict[str, list[int]]) -> dict[str, list]:
        if self.on_values is None:
            return ByTable(found)
        return ByTable({t: value_tuples(self.on_values, ids) for t, ids in found.items()})

    def row(self, i: int) -> dict[str, Any]:
        """Output row ``i`` as ``{column: value}``; a name the row repeats (``SELECT a.k, b.k``) gets the suffix
        the engine's own renaming uses (``k``, ``k_1``)."""
        i = self.row_index(i)
        out: dict[str, Any] = {}
        for j, name in enumerate(self.table.column_names):
            key, n = name, 0
            while key in out:
                n += 1
                key = f"{name}_{n}"
            out[key] = py_value(self.table.column(j)[i])
        return out
