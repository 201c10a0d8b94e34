"""The engine protocol, and which engine made each relation on a connection or SparkSession sessions share.

An engine adapter registers tables (each with its stable row id ``dl_rid``), installs the dl_* functions,
quotes names and runs SQL text in its own dialect, returning Arrow. Nothing outside ``engines/`` knows which
engine runs. Lineage logic (which input rows feed an output row) never lives in an adapter: the engines
package only says how each engine's SQL spells lineage sets (:mod:`dltrace.engines.lineage_sql`). The table
sources an adapter registers are :mod:`dltrace.engines.sources`.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

from dltrace.engines.sources import Source

def types_show_collation(schema: Mapping[str, Mapping[str, str]]) -> bool:
    """Does a column type of ``schema`` ({table: {column: type}}) name a collation (Spark's ``string collate
    UTF8_LCASE``, a user's ``VARCHAR COLLATE NOCASE``)? One the types do not show is the engine's to tell
    (:meth:`Engine.collated_strings`)."""
    return any("collate" in str(t).lower() for columns in schema.values() for t in columns.values())


# Which engine made each relation on a connection or SparkSession that two dltrace sessions share (the second
# may take over a name with replace=True): (id of the connection / SparkSession, relation) -> (that object, the
# engine). The first then neither drops nor reads it as its own (its close() dropped the second's table). The
# objects themselves are kept, not only their ids, which Python gives again to a later object once one is gone.
_RELATION_OWNERS: dict[tuple[int, str], tuple[Any, Any]] = {}


def claim_relation(target: Any, name: str, engine: Any) -> None:
    """Record ``engine`` as the maker of relation ``name`` on connection / SparkSession ``target``."""
    _RELATION_OWNERS[(id(target), name)] = (target, engine)


def _owner(target: Any, name: str) -> Any:
    entry = _RELATION_OWNERS.get((id(target), name))
    return entry[1] if entry is not None and entry[0] is target else None


def made_by_dltrace(target: Any, name: str) -> bool:
    """Did some dltrace engine (this session's or another's) make relation ``name`` on ``target``?"""
    return _owner(target, name) is not None


def holds_relation(target: Any, name: str, engine: Any) -> bool:
    """Is ``engine`` the last dltrace engine that made relation ``name`` on ``target``?"""
    return _owner(target, name) is engine


def taken_over(target: Any, name: str, engine: Any) -> bool:
    """Did another dltrace engine make relation ``name`` on ``target`` after ``engine`` made it?"""
    owner = _owner(target, name)
    return owner is not None and owner is not engine


def release_relation(target: Any, name: str, engine: Any) -> None:
    if holds_relation(target, name, engine):
        del _RELATION_OWNERS[(id(target), name)]


def release_target(target: Any) -> None:
    """Forget every relation on ``target`` (a connection or SparkSession dltrace opened and now closes)."""
    for key in [k for k, (obj, _) in _RELATION_OWNERS.items() if obj is target]:
        del _RELATION_OWNERS[key]


@runtime_checkable
class Engine(Protocol):
    """What every engine adapter provides. SQL text passed in is in the engine's own dialect."""

    name: str  # the sqlglot dialect name: "duckdb" | "spark"
    compares_maps: bool  # can `a IS NOT DISTINCT FROM b` compare two MAP values (backward tracing matches rows so)

    def quote(self, name: str) -> str:
        """``name`` as a quoted identifier of the engine's dialect (code outside ``engines/`` never hand-quotes)."""

    def register(self, name: str, source: Source, storage: str = "source") -> None:
        """Expose ``source`` as table ``name`` with the source's columns, and its rows relation with them plus
        ``dl_rid`` (BIGINT, 0..n-1); ``storage`` (:data:`~dltrace.engines.sources.STORAGES`): read from the source
        at each query, or copied once into the engine's memory (the same rows and the same ids)."""

    def exists(self, name: str) -> bool:
        """Is there a relation ``name`` in the engine (the user's or dltrace's)?"""

    def created(self, name: str) -> bool:
        """Did this adapter make relation ``name``? Only those it replaces or drops: it is a guest on a
        connection or SparkSession the user passed in."""

    def taken_over(self, name: str) -> bool:
        """Has another dltrace session on the same connection / SparkSession made relation ``name`` since?"""

    def replaced_by_user(self, names: Collection[str]) -> list[str]:
        """Those of relations ``names`` this adapter made that the user made again since (``CREATE OR REPLACE``,
        ``createOrReplaceTempView``): the name reads the user's relation now, not the rows registered."""

    def fresh_name(self, base: str) -> str:
        """A name for a relation dltrace makes: ``base``, or ``base_<n>`` when an object on the engine (the
        user's, another session's) has it already (dltrace never replaces nor shadows what it did not make)."""

    def rows_name(self, name: str) -> str:
        """The relation holding registered ``name``'s rows with ``dl_rid`` (named when it was made)."""

    def create_view(self, name: str, query: Any) -> None:
        """A temporary view ``name`` over ``query`` (a sqlglot expression), owned by the adapter."""

    def adopt(self, name: str) -> None:
        """Give the user's existing relation ``name`` a rows relation with ``dl_rid`` (rows frozen once, in the
        relation's own order), leaving ``name`` itself as it is."""

    def adopted_state(self, name: str) -> tuple[Hashable, int | None] | None:
        """What tells, cheaply (no scan of the rows), that the user's relation ``name`` changed after it was
        adopted: ``(identity, row count or None)``, unequal between two calls when it did, as far as they can tell
        (DuckDB: the relation the name resolves to with a view's definition, and a table's row count; Spark: the
        relation's analysed plan); None when it is no longer there."""

    def columns(self, name: str) -> dict[str, str]:
        """The table's own columns (without ``dl_rid``) and their SQL types, in order."""

    def sql(self, text: str) -> pa.Table:
        """Run one statement and return its result as Arrow (an empty table for DDL)."""

    def content_hash(self, name: str, exclude: Collection[str] = ()) -> tuple[int, int]:
        """(row count, an order-independent hash of the rows) of table ``name`` (a source with no file or Arrow
        copy to hash in Python), its columns ``exclude`` left out (a rows relation's ``dl_rid``)."""

    def column_names(self, text: str) -> list[str]:
        """The names the engine gives the output columns of query ``text``, without running it."""

    def table_column_names(self, names: list[str]) -> list[str]:
        """The names a table the engine makes of rows with columns ``names`` gives them (``CREATE TABLE ... AS``):
        DuckDB numbers a repeated one (``amount``, ``amount_1``); one that keeps them refuses the table."""

    def column_types(self, text: str) -> list[str]:
        """The SQL types of the output columns of query ``text``, in the engine's spelling, without running it
        (backward tracing compares values in the types the engine compared them in)."""

    def estimated_rows(self, text: str) -> int | None:
        """The optimizer's estimate of how many rows query ``text`` gives, without running it; None when the
        engine gives none (or the query cannot be planned)."""

    def integer_range(self, text: str) -> tuple[int, int] | None:
        """(lowest, highest) value of the one integer column of query ``text`` as the engine's statistics bound it,
        without computing them from the data (at most its first rows read); None when they do not (another type, no
        statistics, no rows). A bound, not the values: a rewrite may only use it to choose between exact forms."""

    def collated_strings(self, names: Collection[str]) -> bool:
        """May a string column of relations ``names`` group distinct strings as one by a collation that the types
        :meth:`columns` gives do not show? (One they show is read off them.) The rewriter then takes no string
        key for the same string on every row of its group."""

    def volatile_functions(self, names: Collection[str]) -> frozenset[str]:
        """Those of ``names`` (lower case) that the engine knows to give another value at each call (a user's
        function registered as having side effects, a random draw sqlglot does not know); empty when the engine
        does not say."""

    def functions_reading_relations(self, names: Collection[str]) -> frozenset[str]:
        """Those of ``names`` (lower case) that are the user's functions whose body reads a relation (a macro
        holding a subquery): rows the query's text does not name, which its lineage cannot show; empty when the
        engine does not say."""

    def materialize(self, name: str, text: str) -> None:
        """Store the result of query ``text`` as a temporary relation ``name`` (temp table, cached DataFrame)."""

    def drop(self, name: str) -> None:
        """Remove a relation made by :meth:`materialize` (no error when it is gone)."""

    def install_functions(self) -> None:
        """Register the dl_* SQL functions (both strategies) on this engine."""

    def close(self) -> None:
        """Release the engine (a SparkSession passed in by the user is left running)."""
