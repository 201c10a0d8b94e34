"""What every pass may read: the target dialect, the schema, and the lineage wanted (never mutated)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

from sqlglot import exp

from dltrace.engines import LineageFunctions
from dltrace.rewriter.lineage_on import OnSpec
from dltrace.rewriter.slots import KeptRids


@dataclass(frozen=True)
class PassContext:
    dialect: str  # the dialect of the tree and of the SQL generated from it
    fns: LineageFunctions  # the engine's lineage SQL for this dialect and strategy
    schema: dict | None = None  # table -> {column: type}, lower-case table names
    semantics: str = "witness"  # "witness" | "control"
    on: OnSpec | None = None  # the query's LINEAGE ON clause, resolved
    wide: frozenset = frozenset()  # tables with >= 2^32 rows (64-bit bitmaps)
    # a session's tables: read their rids from their rows relations (table -> relation, or the tables alone)
    rows_relations: Mapping[str, str] | frozenset = frozenset()
    # sources whose rows carry lineage already (a pipeline step's result): table -> ((base table, column), ...)
    composed: dict = field(default_factory=dict)
    # lineage every output row has (an uncorrelated scalar subquery's) as a separate one-row query, kept once by
    # the result, rather than merged into each row's columns (see passes/instrument.py)
    shared_lineage: bool = False
    # the engine's estimate of how many rows a query (a sqlglot tree in ``dialect``) gives, or None: lets a rule
    # choose the cheaper of two exact rewrites (rules/nested_lineage.py); None (no engine at hand) keeps the first
    estimate_rows: Callable[[exp.Expression], int | None] | None = None
    # the engine's statistics' bounds of a one-column query's integer values (None: unknown): lets a rule split a
    # join by ranges of its key where the engine joins a narrow range faster (rules/inner_equi_joins.py)
    integer_range: Callable[[exp.Expression], tuple[int, int] | None] | None = None
    # forward lineage may leave an aggregating query's correlated EXISTS in place and join their witnesses to the
    # rows that passed (passes/late_witnesses.py); backward tracing reads every decorrelated subquery
    late_witnesses: bool = False
    # table -> row count, for the passes that size a table's row ids (passes/pack_ids.py); empty: unknown
    table_rows: dict = field(default_factory=dict)
    # tables read from files that may be rewritten while a query runs (parquet read in place): their ids are not
    # made bit strings of a fixed range (passes/dense_ids.py)
    mutable_rows: frozenset = frozenset()
    # tables scanned from their source at each read (parquet files, an Arrow table): reading one twice decodes it
    # twice, which a rule may avoid by writing the rows it reads once (rules/nested_lineage.py)
    read_in_place: frozenset = frozenset()
    # impact's run: only the asked rows of one table carry their id into the lineage (rules/sources.py)
    kept_rids: KeptRids | None = None
    # may a string column the query reads group distinct strings as one (a collation: DuckDB's COLLATE NOCASE or
    # default_collation, Spark's UTF8_LCASE), which the schema's types do not show? Then no string key groups by
    # identity (passes/key_types.py); true unless the engine (or a schema without any) says otherwise
    collations: bool = True
    # a lookup's guard in a WHERE also holds the engine's test that keeps it where it stands
    # (LineageFunctions.kept_in_place; passes/scalar_lookups.py): a second rewrite, after the first's guard raised
    pinned_lookups: bool = False

    @property
    def control(self) -> bool:
        return self.semantics == "control"
