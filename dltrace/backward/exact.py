"""Values a reverse query compares, compared as the engine produced them: in its types, never changed by Arrow.

A reverse query finds the rows behind a target row by comparing values it computes again with the target's. Two
things stood between them, each losing lineage silently (a row traced to nothing):

- a set operation casts each side's columns to its output type (DuckDB's UNION of DECIMAL(18,4) and
  DECIMAL(38,0) gives DECIMAL(38,0), 1.5 becoming 2; INTEGER and DOUBLE, DATE and TIMESTAMP, VARCHAR and INTEGER
  alike), so a side's value is compared cast as the engine cast it (:meth:`Types.casts`, ``Targets.casts``);
- the query's own rows reach the trace as Arrow and go back as a registered Arrow table: a type that does not come
  back as itself (TIMETZ loses its offset, BIT becomes BLOB, HUGEINT a DECIMAL(38,0) too narrow for it, ENUM and
  UUID become VARCHAR, a STRUCT or LIST holding one of them) is carried beside the row as the engine's text of
  the value and cast back by the engine (:class:`RootRows`). A value whose text does not cast back to an equal
  value (a STRUCT holding a UNION: its tag is not in the text) is refused by name, never traced to nothing.

The engine says which: it names the types (``Engine.column_types``), and no rows of the query's keys, fetched as Arrow
and registered back, show which types change on the way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dltrace.backward.segment_sql import col, subquery, table_ref
from dltrace.backward.tracing import TID, Targets
from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position

TEXT = "_dl_text"  # a key's text, beside the root's columns
SAME = "_dl_same"  # does that text cast back to a value equal to the key's?


class Types:
    """The engine's SQL types of what a trace compares (``run``: the trace's :class:`~.execute.Run`)."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def of(self, query: exp.Expression) -> list[str]:
        """The types of ``query``'s output columns, in the engine's spelling (bound, not run)."""
        return self.run.engine.column_types(self.run.text(query))

    def named(self, types: list[str]) -> list[exp.DataType | None]:
        """Each of ``types`` as a sqlglot type the engine reads back as the same type; None where it does not."""
        built: list[exp.DataType | None] = []
        for text in types:
            try:
                built.append(exp.DataType.build(text, dialect=self.run.dialect, udt=True))
            except SqlglotError:
                built.append(None)
        if not any(b is not None for b in built):
            return built
        back = self.of(self._nulls(built))
        return [b if b is not None and back[j] == types[j] else None for j, b in enumerate(built)]

    def casts(self, side: list[str], out: list[str], where: exp.Expression) -> list[exp.DataType | None]:
        """Per column of a set operation's side: the operation's output type where the engine cast the side's
        values to it (their types differ), else None."""
        changed = [j for j, (s, o) in enumerate(zip(side, out)) if s != o]
        found: list[exp.DataType | None] = [None] * len(out)
        for j, kind in zip(changed, self.named([out[j] for j in changed]) if changed else []):
            if kind is None:
                raise UnsupportedQuery(f"backward tracing of a set operation that casts column {j + 1} to {out[j]}, a "
                                       f"type dltrace cannot write, is not supported, at {position(where)}")
            found[j] = kind
        return found

    def lost_in_arrow(self, query: exp.Expression, positions: list[int], kinds: list[str]) -> list[bool]:
        """Does each column at ``positions`` of ``query`` (of types ``kinds``) come back from Arrow as another type?
        Asked of no rows of ``query`` itself (``WHERE FALSE``: planned, not run), fetched and registered back."""
        probe = exp.select(*[col(f"_dl_c{p}") for p in positions]).from_(_positional(query, len(kinds)))
        empty = self.run.fetch(probe.where(exp.false()))
        back = self.of(exp.select(exp.Star()).from_(table_ref(self.run.register("a", empty))))
        return [back[j] != kinds[p] for j, p in enumerate(positions)]

    @staticmethod
    def _nulls(kinds: list[exp.DataType | None]) -> exp.Select:
        """``SELECT CAST(NULL AS <kind>), ...`` for the kinds given (None left out)."""
        return exp.select(*[exp.alias_(exp.Cast(this=exp.null(), to=k.copy()), f"_dl_c{j}", quoted=True)
                            for j, k in enumerate(kinds) if k is not None])


@dataclass
class RootRows:
    """How the query's own rows are fetched so that its key values can be compared exactly (see the module)."""

    query: exp.Expression  # the root's output query, wrapped with the text columns when there are any
    keys: list[int]  # the positions of the root's keys among its output columns
    texts: dict[int, exp.DataType]  # key position -> its type, for the keys carried as text
    width: int  # the query's own columns
    names: list[str]  # the engine's names of the query's own columns

    def own(self, out: pa.Table) -> pa.Table:
        """The query's own columns of the fetched ``out``, under the engine's names."""
        table = out.select(list(range(self.width)))
        return table.rename_columns(self.names) if self.texts else table

    def targets(self, run: Any, out: pa.Table, wanted: pa.Array, labels: list[str]) -> Targets:
        """The target rows ``wanted`` of ``out`` as a registered Arrow table, keys carried as text cast back."""
        cols = [f"_dl_v{j}" for j in range(len(self.keys))]
        values = []
        for j, p in enumerate(self.keys):
            if p in self.texts:
                same = out.column(f"{SAME}{p}").take(wanted)
                if not all(v is not False for v in same.to_pylist()):
                    raise UnsupportedQuery(
                        f"backward tracing of column {labels[j]!r} of type {self.texts[p].sql(run.dialect)} is not "
                        f"supported: its values reach the trace through Arrow as another type, and their text does not "
                        f"give them back (cast the column in the query; forward lineage, s.run, reads it)")
                values.append(out.column(f"{TEXT}{p}").take(wanted))
            else:
                values.append(out.column(p).take(wanted))
        name = run.register("t", pa.table([wanted, *values], names=[TID, *cols]))
        if not self.texts:
            return Targets(table_ref(name), cols, "keys")
        typed = [col(c) if p not in self.texts else exp.Cast(this=col(c), to=self.texts[p].copy())
                 for c, p in zip(cols, self.keys)]
        query = exp.select(col(TID), *[exp.alias_(v, c, quoted=True) for v, c in zip(typed, cols)])
        return Targets(query.from_(table_ref(name)), cols, "keys")


def _positional(query: exp.Expression, n: int) -> exp.Subquery:
    """``query`` as a derived table whose ``n`` columns are named by position (``_dl_c<i>``: a query may repeat a
    name)."""
    return subquery(query.copy(), "_dl_o", [f"_dl_c{i}" for i in range(n)])


def root_rows(types: Types, query: exp.Expression, keys: list[int], width: int, kinds: list[str]) -> RootRows:
    """The fetch of the root's rows, its keys of the types Arrow changes carried as text (see the module)."""
    lost = types.lost_in_arrow(query, keys, kinds) if keys else []
    carried = [p for p, gone in zip(keys, lost) if gone]
    if not carried:
        return RootRows(query, keys, {}, width, [])
    texts = {}
    for p, kind in zip(carried, types.named([kinds[p] for p in carried])):
        if kind is None:
            raise UnsupportedQuery(f"backward tracing of output column {p + 1} of type {kinds[p]}, which Arrow gives "
                                   f"back as another type and dltrace cannot write, is not supported (cast it in the "
                                   f"query; forward lineage, s.run, reads it)")
        texts[p] = kind
    names = types.run.engine.column_names(types.run.text(query))[:width]
    inner = [f"_dl_c{i}" for i in range(len(kinds))]
    wrapped = exp.select(*[col(c) for c in inner]).from_(_positional(query, len(kinds)))
    for p, kind in texts.items():
        text = exp.Cast(this=col(inner[p]), to=exp.DataType.build("VARCHAR"))
        back = exp.TryCast(this=text.copy(), to=kind.copy())
        wrapped.select(exp.alias_(text, f"{TEXT}{p}", quoted=True),
                       exp.alias_(exp.NullSafeEQ(this=back, expression=col(inner[p])), f"{SAME}{p}", quoted=True),
                       append=True, copy=False)
    return RootRows(wrapped, keys, texts, width, names)
