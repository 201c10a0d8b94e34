"""The tables registered on one engine: what every layer above the engines reads.

A :class:`Catalog` knows each table's source, its row count and its columns, and checks that a query names
only registered tables (and, :mod:`dltrace.catalog_staleness`, whether a result's row ids still name the rows they
named). :class:`dltrace.Session` is a catalog with the lineage entry points on top; the
modules below the session (backward tracing, results, lookups, persistence) take a catalog, never a session.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable
from typing import Any, Callable, TypeVar

import pyarrow as pa
import sqlglot
from sqlglot import exp

from dltrace.engines import Engine, resolve_source, types_show_collation
from dltrace.engines.guest import ClosedEngine
from dltrace.engines.sources import (ArrowSource, NativeSource, ParquetSource, check_storage, files_signature,
                                     with_rid)
from dltrace.errors import (ArgumentError, DuplicateTable, ParseError, QueryError, ReservedName, SourceError,
                             StaleLineage, UnknownTable, UnsupportedQuery, check_flag, check_text, got)
from dltrace.names import reserved_prefix, unknown_table
from dltrace.catalog_staleness import StaleChecks, TableState
from dltrace.plans import PlanCache

T = TypeVar("T")


def has_capital_outside_ascii(name: str) -> bool:
    """Does ``name`` hold a capital letter outside ASCII (which SQL engines and Python fold differently)?"""
    return any(ch != ch.lower() and not ch.isascii() for ch in name)


class Catalog(StaleChecks):
    """Registered tables on one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tables: dict[str, Any] = {}  # name -> resolved source
        self.origins: dict[str, str] = {}  # name -> absolute path it was registered from (for saved lineage)
        self._counts: dict[str, int] = {}  # row counts of engine-native sources (frozen when registered)
        self._derived: dict[str, dict[str, Any]] = {}  # name -> values computed from its source, by kind
        self.adopted: set[str] = set()  # tables that are the user's own relations (dltrace made only their rows)
        # the user's relation when adopted (Engine.adopted_state)
        self._adopted_states: dict[str, tuple[Hashable, int | None] | None] = {}
        self.views: set[str] = set()  # relations dltrace made for plain SQL (lineage views): no rows relation
        self.view_groups: dict[str, tuple[str, ...]] = {}  # a result registered as views: name -> every view made
        self.storage: dict[str, str] = {}  # name -> where its rows live while queries run ("source", "memory")
        self.generation = 0  # bumped by every (re)registration: the rewritten queries kept are keyed by it
        # name -> the generation of its current registration: a result keeps the ones of the tables it read
        # (snapshot), and reads of base rows through it are refused once one is registered again
        self.versions: dict[str, int] = {}
        self.view_snapshots: dict[str, dict[str, TableState]] = {}  # a result's views (view_groups): its snapshot
        self.plans = PlanCache()  # rewritten queries (dltrace.plans)
        # parquet tables read in place: (their files' paths, sizes and modification times, their columns then)
        self._columns_seen: dict[str, tuple[tuple, dict[str, str]]] = {}
        # parquet tables: their files' stats when the rows their ids number were last known to be there (copied
        # into memory: when copied; read in place: when each file last had the row count its offsets hold)
        self._file_states: dict[str, tuple | None] = {}

    @property
    def dialect(self) -> str:
        return self.engine.name

    def register(self, name: str, source: Any, replace: bool = False, storage: str = "source") -> None:
        """Register ``source`` (parquet file/folder/glob, CSV, Arrow, pandas, Spark DataFrame) as ``name``.

        Every row gets the stable dense id ``dl_rid`` in ``[0, n)``: its position in the source.
        ``storage``: ``"source"`` (default) reads the source at each query (parquet files scanned in place, an
        Arrow table in place); ``"memory"`` copies the rows once into the engine's own storage (a DuckDB native
        table, a cached Spark DataFrame), dropped or unpersisted with the table. Same rows, same ids;
        a memory copy does not see later changes to the files (register again).
        """
        self._check_name(name)
        check_flag(replace, "replace")
        key = name.lower()
        check_storage(storage)
        if key in self.adopted:
            raise DuplicateTable(f"table {name!r} is your own relation (adopted): dltrace does not replace it; "
                                 "register the new source under another name")
        resolved = resolve_source(source)
        # the same files again, unchanged since (load_tpch after a pipeline ran): the steps' lineage still names
        # the same rows (a memory copy of files rewritten since holds other rows than the new copy)
        same_rows = (isinstance(resolved, ParquetSource) and self.tables.get(key) == resolved
                     and self._file_states.get(key) == resolved.signature)
        self._claim(name, replace, same_rows=same_rows)
        self.engine.register(key, resolved, storage=storage)
        self.tables[key] = resolved
        self.storage[key] = storage
        version = self.versions.get(key)
        self._forget(key)
        if same_rows and version is not None:  # the same rows: results over them stay fresh (files: snapshot)
            self.versions[key] = version
        if isinstance(resolved, ParquetSource):
            self._file_states[key] = resolved.signature
        if isinstance(source, (str, os.PathLike)):
            self.origins[key] = os.path.abspath(os.fspath(source))

    def adopt(self, name: str, replace: bool = False) -> None:
        """Trace the engine's existing relation ``name`` (your table, view, registered Arrow object or
        RecordBatchReader on DuckDB; your table or temp view on Spark) as it is, without replacing it.

        dltrace copies its rows once into a private rows relation and numbers them ``dl_rid`` in the order the
        relation gives them; queries with lineage read that copy, plain SQL reads your relation. Adopt again
        (``replace=True``) after changing it. A RecordBatchReader is a one-shot stream: adopting reads it.
        """
        self._check_name(name, adopting=True)
        check_flag(replace, "replace")
        key = name.lower()
        if key in self.tables and not replace:
            raise DuplicateTable(f"table {name!r} is already registered (pass replace=True to adopt it again)")
        if key in self.tables and key not in self.adopted:
            raise DuplicateTable(f"table {name!r} is a table dltrace registered, not one of yours to adopt")
        if key in self.tables:
            self._check_no_step_reads(key)
        self.engine.adopt(key)
        self.tables[key] = NativeSource(key, kind="adopted")
        self.storage[key] = "memory"  # the rows relation is a frozen copy in the engine
        self.adopted.add(key)
        self._forget(key)
        self._adopted_states[key] = self.engine.adopted_state(key)

    def _check_name(self, name: str, adopting: bool = False) -> None:
        check_text(name, "a table name")
        if not name.strip():
            raise ArgumentError(f"a table name must be a non-empty string, got {name!r}")
        if has_capital_outside_ascii(name):
            # dltrace keys names by Python's lower(), sqlglot and DuckDB fold ASCII letters only: `Émp` could not be
            # read under its own name (a review found "Column 'k' could not be resolved"). A relation of the user's
            # so named is adopted through a view of another name (adopting 'zoë ü' for "Zoë Ü" found no relation)
            how = (f"create a view of it under a name without one (CREATE VIEW v AS SELECT * FROM \"{name}\") and "
                   f"adopt that" if adopting else f"register it as {name.lower()!r}")
            raise SourceError(f"table name {name!r} has a capital letter outside ASCII, which SQL engines fold "
                               f"otherwise than dltrace: {how}")
        prefix = reserved_prefix(name)
        if prefix:
            raise ReservedName(f"table name {name!r} uses the reserved prefix {prefix!r}")

    def _claim(self, name: str, replace: bool, same_rows: bool = False) -> None:
        """Check that dltrace may create relation ``name``: it is not registered yet (or ``replace``), and no
        relation of the user's has that name (dltrace is a guest on a connection passed in: it never replaces
        what it did not make)."""
        key = name.lower()
        if key in self.tables or key in self.views:
            if not replace:
                raise DuplicateTable(f"table {name!r} is already registered (pass replace=True to replace it)")
            if not same_rows:
                self._check_no_step_reads(key)
            return
        if not self.engine.exists(key) or self.engine.created(key):
            return
        if self.engine.taken_over(key):  # registered by another dltrace session on this connection
            if replace:
                return
            raise DuplicateTable(f"table {name!r} is already registered by another dltrace session on this "
                                 "connection (pass replace=True to replace it)")
        raise DuplicateTable(f"{name!r} already exists on the connection and is not dltrace's: dltrace does "
                             f"not replace it; pick another name, or trace it as it is with adopt({name!r})")

    def _check_no_step_reads(self, key: str) -> None:
        """A registered step (a result registered with its lineage) whose rows' lineage is in table ``key``'s row
        ids would, after ``key`` is replaced, name rows of the new table that did not produce it: refused."""
        for step, source in self.tables.items():
            if step != key and any(base == key for base, _ in getattr(source, "lineage", ())):
                raise DuplicateTable(f"table {key!r} is in the lineage of {step!r} (a result registered with its "
                                     f"lineage): replacing it would point that lineage at other rows; register "
                                     f"the new rows under another name, or replace {step!r} first (a "
                                     f"pipeline's dataset: running the pipeline again makes its datasets anew)")

    def claim_view(self, name: str, replace: bool = False) -> None:
        """Check that dltrace may create view ``name`` (see :meth:`add_view`)."""
        self._check_name(name)
        if name.lower() in self.tables:
            raise DuplicateTable(f"{name!r} is a registered table; choose another name for the view")
        self._claim(name, replace)

    def add_view(self, name: str, body: pa.Table | exp.Expression, typed_by: str | None = None) -> None:
        """Create relation ``name`` for plain SQL (an Arrow table without row ids, or a query): readable in
        :meth:`check_known_tables` with ``views``, dropped with the session. ``typed_by``: the engine's query
        whose column types the Arrow table's rows have (:attr:`ArrowSource.typed_by`: an ENUM came back as
        strings, and a view ordered them alphabetically); its rows relation then holds them typed."""
        if name.lower() in self.views:
            self.engine.drop(name.lower())  # a view replaced by a table (or the reverse) is made anew
        if isinstance(body, pa.Table):
            self.engine.register(name.lower(), ArrowSource(with_rid(body) if typed_by else body, typed_by=typed_by))
        else:
            self.engine.create_view(name.lower(), body)
        self.views.add(name.lower())

    def drop_view(self, name: str) -> None:
        """Drop relation ``name`` that :meth:`add_view` made."""
        if name.lower() in self.views:
            self.engine.drop(name.lower())
            self.views.discard(name.lower())

    def _forget(self, key: str) -> None:
        """Drop what was known about a previous registration of ``key`` (and every rewritten query kept)."""
        self.generation += 1
        self.versions[key] = self.generation
        self.plans.clear()
        self._counts.pop(key, None)
        self._columns_seen.pop(key, None)
        self._file_states.pop(key, None)
        self._adopted_states.pop(key, None)
        self._derived.pop(key, None)
        self.origins.pop(key, None)

    def schema(self, query: exp.Expression | str | None = None) -> dict[str, dict[str, str]]:
        """``{table: {column: type}}`` of the registered tables (without ``dl_rid``), for sqlglot; with a
        ``query`` (SQL text or parsed), of the tables it names anywhere only (each is a round trip to the engine; a
        CTE may shadow the table it reads, so CTE names are not left out)."""
        if isinstance(query, str):  # (SQL text: the tables it names)
            try:
                query = sqlglot.parse_one(query, read=self.dialect)
            except sqlglot.errors.SqlglotError as e:
                raise ParseError(f"SQL does not parse: {str(e).splitlines()[0]}") from None
        if query is not None and not isinstance(query, exp.Expression):
            raise ArgumentError(f"query must be SQL text, a parsed sqlglot expression or None, got {got(query)}")
        wanted = None if query is None else set()
        for table in query.find_all(exp.Table) if query is not None else ():
            wanted.add(table.name.lower())
            if isinstance(table.this, exp.Anonymous):  # (a call's string arguments: Spark's IDENTIFIER('t'))
                wanted |= {a.this.lower() for a in table.this.expressions if isinstance(a, exp.Literal) and a.is_string}
        return {name: self.table_columns(name, current=True) for name in self.tables
                if wanted is None or name in wanted}

    def collations(self, schema: dict[str, dict[str, str]]) -> bool:
        """May a string column of the registered tables of ``schema`` (:meth:`schema`) group distinct strings as
        one: a collation its type shows (Spark's ``string collate UTF8_LCASE``) or one the engine knows of
        otherwise (:meth:`Engine.collated_strings` over their rows relations: DuckDB's types hide it)?"""
        if types_show_collation(schema):
            return True
        return self.engine.collated_strings([self.engine.rows_name(n) for n in schema if n in self.tables])

    def table_columns(self, name: str, current: bool = False) -> dict[str, str]:
        """Registered ``name``'s columns (without ``dl_rid``), as its rows relation holds them: the rows a query
        with lineage reads (and a result's rows are fetched from). ``current``: for a query to run now, where the
        engine names the output columns by the user's relation, an adopted relation whose columns the user
        changed since (``adopt`` froze its rows) raises :class:`StaleLineage`: its new columns are not the frozen
        rows' (``SELECT *`` gave the frozen rows under the new column list, or a raw error naming a new column).
        A step's lineage columns, which its rows relation holds beside ``dl_rid``, are left out as the user's
        relation leaves them out (``SELECT *``, a NATURAL join or a whole-row reference over a step read them)."""
        private = set(getattr(self.tables.get(name), "private", ()))
        frozen = {c: t for c, t in self.engine.columns(self.engine.rows_name(name)).items() if c not in private}
        if current and name in self.adopted:
            try:  # (asked at every query: whether the relation is still there only when its columns fail)
                now = self.engine.columns(name)
            except QueryError:
                if self.engine.exists(name):
                    raise
                raise StaleLineage(f"table {name!r}, which you adopted, is no longer on the engine: adopt it again "
                                   f"(s.adopt({name!r}, replace=True)) once it is back, to trace it") from None
            if now != frozen:
                raise StaleLineage(f"table {name!r} changed since it was adopted (its columns are now "
                                   f"{', '.join(now)}; adopted: {', '.join(frozen)}): s.adopt({name!r}, "
                                   f"replace=True) to trace it as it is now")
        return frozen

    def source_columns(self, name: str) -> dict[str, str]:
        """The columns of a table read in place as they are now, which a kept plan checks before it runs again
        (:mod:`dltrace.plans`). For parquet files whose every file has the size and modification time (to the
        nanosecond) it had when last asked, the columns found then: binding a view over parquet reads the files'
        footers, 2 ms a table at every query (TPC-H over parquet: 3% of the queries' time). Other sources are
        asked each time."""
        source = self.tables.get(name)
        signature = files_signature(source.files) if isinstance(source, ParquetSource) else None
        seen = self._columns_seen.get(name)
        if signature is not None and seen is not None and seen[0] == signature:
            return dict(seen[1])
        columns = self.table_columns(name, current=True)
        if signature is not None:
            self._columns_seen[name] = (signature, dict(columns))
        return columns

    def num_rows(self, name: str) -> int:
        key = name.lower()
        n = getattr(self.tables[key], "num_rows", None)
        if n is not None:
            return int(n)
        if key not in self._counts:  # frozen rows in the engine: counted once, every run asks (64-bit bitmaps?)
            count = exp.select(exp.alias_(exp.Count(this=exp.Star()), "n")).from_(
                exp.Table(this=exp.to_identifier(self.engine.rows_name(key), quoted=True)))
            self._counts[key] = int(self.engine.sql(count.sql(self.dialect))[0][0].as_py())
        return self._counts[key]

    def derived(self, name: str, kind: str, compute: Callable[[Any], T]) -> T:
        """``compute(source)`` of registered table ``name``, computed once per registration and kept with it
        (an in-memory table's content hash, its row store): released when the table is replaced or the catalog
        goes, never keyed by an ``id()`` that outlives the object."""
        per_table = self._derived.setdefault(name.lower(), {})
        if kind not in per_table:
            per_table[kind] = compute(self.tables[name.lower()])
        return per_table[kind]

    def check_known_tables(self, tree: exp.Expression, views: bool = False, named: frozenset = frozenset()) -> None:
        """Raise :class:`UnknownTable` when the query reads a table that is neither registered nor its own CTE
        (nor, with ``views``, one of dltrace's lineage views, a table's rows relation or a relation of the user's
        on the engine: plain SQL reads them, lineage cannot)."""
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            if id(table) in named:
                continue  # (a table named by a clause, LINEAGE ON TABLES (c): c may be an alias, which it checks)
            name = table.name.lower()
            if has_capital_outside_ascii(table.name) and name not in ctes and not views:
                # no registered table has one (_check_name), and DuckDB matches such a letter by its case: "Été" is
                # not the registered été there (dltrace found it, and failed on its columns)
                raise UnknownTable(f"unknown table {table.name!r}: a capital letter outside ASCII is matched by its "
                                   f"case; write the name as registered" +
                                   (f" ({name!r})" if name in self.tables else ""))
            if table.args.get("db") and not views:
                # tables are traced by their registered names; s2.t is not the registered t (nor any other)
                at = written_at(table)
                raise UnsupportedQuery(f"a schema-qualified table ({table.sql(self.dialect)}) is not supported: "
                                       "lineage is traced through tables registered or adopted by name; register "
                                       f"it (or adopt a view of it) under a plain name{at}")
            if name in self.tables and name not in ctes and not table.args.get("db") \
                    and (self.engine.taken_over(self.engine.rows_name(name)) or self.engine.taken_over(name)):
                raise DuplicateTable(f"table {table.name!r} was registered again by another dltrace session on this "
                                     f"connection, which holds it now: register it here again (or query it there)")
            if not name or name in ctes or name in self.tables or table.args.get("db"):
                continue
            if views and (name in self.views or name in {r.lower() for r in self.rows_relations().values()}):
                continue
            if views and isinstance(table.this, exp.Identifier) and self.engine.exists(table.name):
                continue  # plain SQL reads the user's own relation (a guest sees their views by name)
            if _names_a_file(table):
                if views:
                    continue  # (the engine reads it: DuckDB's FROM 'sales.csv'; it said "unknown table")
                raise UnsupportedQuery(f"a file read in place (FROM {exp.Literal.string(table.name).sql()}) has no "
                                       f"row ids: register it as a table (s.register(name, path); on the command "
                                       f"line --table NAME=PATH) and query that{written_at(table)}")
            if name in self.views:
                raise UnknownTable(f"{table.name!r} is a lineage view: query it with s.sql(...); lineage is traced "
                                   "through registered tables only")
            if isinstance(table.this, exp.Identifier):
                raise UnknownTable(self.not_registered(table.name))
        if not views:
            self._check_functions_reading_relations(tree)

    def _check_functions_reading_relations(self, tree: exp.Expression) -> None:
        """Refuse a call of the user's function whose body reads a relation (a DuckDB macro holding a subquery):
        the rows it reads are no FROM item's, so no lineage would show them (the query's rows, lineage without
        them: a new user's)."""
        # (a known function's names too: DuckDB calls a macro of the user's named upper() in place of its own)
        calls = [(c, {c.name.lower()} if isinstance(c, exp.Anonymous) else {n.lower() for n in c.sql_names()})
                 for c in tree.find_all(exp.Func)]
        names = set().union(*[n for _, n in calls]) if calls else set()
        reading = self.engine.functions_reading_relations(names) if names else frozenset()
        call = next((c for c, n in calls if n & reading), None)
        if call is not None:
            name = call.name if isinstance(call, exp.Anonymous) else call.sql_name().lower()
            raise UnsupportedQuery(f"a call of {name}, a function of yours whose body reads a relation, is not "
                                   f"supported (the rows it reads are in no FROM, so no lineage would show them)"
                                   f"{written_at(call)}: write its body into the query")

    def not_registered(self, name: str) -> str:
        """Why table ``name``, which is not registered, cannot be read with lineage, and what to do: adopt it when
        it is the user's own relation on the engine, else register it (naming the tables there are)."""
        table = next((t for t, rows in self.rows_relations().items() if rows.lower() == name.lower()), None)
        if table is not None:  # (adopting it, as the message below said, is refused: a reserved name)
            return f"{name!r} is dltrace's rows relation of table {table!r}: query {table!r} itself (each row's id " \
                   f"is its dl_rid)"
        prefix = reserved_prefix(name)
        if prefix:
            return f"{unknown_table(name, self.tables)} (the name uses the reserved prefix {prefix!r}: dltrace's own " \
                   f"relations are not traced)"
        if self.engine.exists(name):
            return f"table {name!r} is on the engine but dltrace does not trace it yet: s.adopt({name!r}) it (or " \
                   "register it) first"
        return unknown_table(name, self.tables)  # (the names listed quoted where a bare one would mislead)

    def rows_relations(self) -> dict[str, str]:
        """Each registered table's rows relation (the rewriter reads row ids there)."""
        return {t: self.engine.rows_name(t) for t in self.tables}

    def close(self) -> None:
        """Release the engine: dltrace's own relations go; a connection or SparkSession passed in stays open
        with everything of the user's as it was. Afterwards every use of the session (or of a result of it that
        needs the engine) raises :class:`SessionClosed`; closing again does nothing."""
        if isinstance(self.engine, ClosedEngine):
            return
        name = self.engine.name
        self.engine.close()
        self.engine = ClosedEngine(name)


def written_at(node: exp.Expression) -> str:
    """``, at line L, col C`` where the first word of ``node`` that sqlglot placed begins (it records where a word
    ends, and where it starts in the text: `s2.t` walks t first); empty when none is placed."""
    placed = [n.meta for n in node.walk() if "line" in n.meta and "start" in n.meta and "end" in n.meta]
    if not placed:
        return ""
    first = min(placed, key=lambda meta: meta["start"])
    return f", at line {first['line']}, col {first['col'] - (first['end'] - first['start'])}"


#: a quoted name DuckDB reads as a file (its replacement scans: by the extension, or a URL)
_FILE_NAME = re.compile(r"(?i)(\.(csv|tsv|txt|parquet|json|jsonl|ndjson|xlsx)(\.gz|\.zst)?$|^[a-z][a-z0-9+]*://)")


def _names_a_file(table: exp.Table) -> bool:
    return isinstance(table.this, exp.Identifier) and table.this.quoted and bool(_FILE_NAME.search(table.name))
