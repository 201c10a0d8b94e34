"""LINEAGE ON: variable-granularity lineage (the paper's section 4.3), and lineage only where wanted.

``LINEAGE ON (e1, ..., ek)`` — every ``e`` reads columns of one base table T. Each distinct value tuple of
T gets a dense id from a dictionary (``SELECT DISTINCT e1..ek FROM T`` numbered in value order: ids never
collide, unlike hashes), every occurrence of T in the query reads its row's dictionary id in place of its
rid, and DLUNION works unchanged; the result's one lineage column ``dl_on`` holds ids, decoded to value
tuples through the same dictionary. ``LINEAGE ON TABLES (t, ...)`` keeps per-tuple lineage for those tables
only; the other tables' lineage is never computed. ``LINEAGE ON ()`` turns lineage off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dltrace.errors import UnknownColumn, UnknownTable, UnsupportedQuery
from dltrace.rewriter.grammar import LineageOn
from dltrace.rewriter.parse import position
from dltrace.rewriter.shape import engine_reads

ON_COLUMN = "dl_on"
DICTIONARY = "_dl_on_dict"
ON_ID = "dl_on_id"


@dataclass
class OnSpec:
    off: bool = False
    tables: frozenset | None = None  # per-tuple lineage only for these tables
    table: str | None = None  # LINEAGE ON (exprs): the base table they read
    expressions: list = field(default_factory=list)  # over T's columns, unqualified
    labels: list = field(default_factory=list)  # how each expression was written

    def dictionary(self) -> exp.Select:
        """``SELECT k0..kn, dl_on_id``: the dictionary of T's distinct value tuples, ids in value order."""
        keys = [f"_dl_k{i}" for i in range(len(self.expressions))]
        distinct = exp.select(*[exp.alias_(e.copy(), k) for e, k in zip(self.expressions, keys)]).distinct()
        distinct = distinct.from_(exp.Table(this=exp.to_identifier(self.table, quoted=True)))
        order = exp.Order(expressions=[exp.Ordered(this=exp.column(k), nulls_first=False) for k in keys])
        number = exp.Sub(this=exp.Window(this=exp.RowNumber(), order=order), expression=exp.Literal.number(1))
        return exp.select(*[exp.column(k) for k in keys], exp.alias_(number, ON_ID)).from_(
            exp.Subquery(this=distinct, alias=exp.TableAlias(this=exp.to_identifier("_dl_dv")))
        )


def dictionary_match(spec: OnSpec, alias: str) -> exp.Expression:
    """The condition that joins a row of the clause's table to its tuple in the dictionary read as ``alias``: every
    value compared null-safely, so NULL values get an id too (forward and backward lineage both map rows so)."""
    return exp.and_(*[exp.NullSafeEQ(this=exp.column(f"_dl_k{i}", table=alias), expression=e.copy())
                      for i, e in enumerate(spec.expressions)])


def clause_tables(tree: exp.Expression) -> frozenset:
    """The ids of the table names a ``LINEAGE ON TABLES (...)`` clause of ``tree`` lists (names the query gives
    its tables, which :func:`resolve` checks), for a check of the tables the query reads to pass over."""
    return frozenset(id(t) for clause in tree.find_all(LineageOn) for t in clause.find_all(exp.Table))


def take_clause(tree: exp.Expression) -> LineageOn | None:
    """Remove and return the query's LINEAGE ON clause; it is only meaningful on the outermost SELECT."""
    clauses = list(tree.find_all(LineageOn))
    if not clauses:
        return None
    for clause in clauses:
        if clause.parent is not tree:
            setop = isinstance(tree, exp.SetOperation) and clause.parent in (tree.this, tree.expression)
            hint = (f"; over a {type(tree).__name__.upper()}, wrap it: SELECT * FROM (...) LINEAGE ON (...)" if setop
                    else "")
            raise UnsupportedQuery(
                f"LINEAGE ON applies to a whole query: write it in the outermost SELECT only{hint}, at "
                f"{position(clause)}"
            )
    clause = tree.args["lineage_on"]
    tree.set("lineage_on", None)
    return clause


def resolve(clause: LineageOn, tree: exp.Expression, schema: dict | None) -> OnSpec:
    """Check the clause against the query and the schema, and say what lineage to compute."""
    if clause.is_off:
        return OnSpec(off=True)
    aliases = {}
    for t in engine_reads(tree):  # (a table read inside a CTE of its own name too)
        aliases[t.alias_or_name.lower()] = t.name.lower()
        aliases[t.name.lower()] = t.name.lower()
    read = {t.name.lower() for t in engine_reads(tree)}
    if clause.args.get("tables"):
        # (a name the query gives a table, `FROM customer c ... LINEAGE ON TABLES (c)`, is that table; a table's own
        # name is that table, also where the query gives it to another as an alias: `FROM orders AS items JOIN items
        # AS orders`, impact's run asking for orders read items' lineage, found by a new user)
        names = frozenset(t.name.lower() if t.name.lower() in read else aliases.get(t.name.lower(), t.name.lower())
                          for t in clause.args["tables"])
        unknown = sorted(names - read)
        if unknown:
            # (the tables it reads named: over a pipeline step, a step's own base tables are not among them)
            raise UnknownTable(f"LINEAGE ON TABLES names {', '.join(unknown)}, which the query does not read (it reads "
                               f"{', '.join(sorted(read)) or 'no table'}), at {position(clause)}")
        return OnSpec(tables=names)
    for e in clause.expressions:
        bad = e.find(exp.AggFunc, exp.Window)
        if bad is not None:
            kind = "a window function" if isinstance(bad, exp.Window) else "an aggregate"
            raise UnsupportedQuery(f"LINEAGE ON takes expressions over base rows, not {kind} ({bad.sql()}), at {position(clause)}")
        if e.find(exp.Subquery, exp.Select):
            raise UnsupportedQuery(f"LINEAGE ON cannot hold a subquery, at {position(clause)}")
    schema = {t.lower(): {c.lower() for c in cols} for t, cols in (schema or {}).items()}
    labels = [e.sql() for e in clause.expressions]
    relations = _relation_names(tree)
    clause = _fields_read(clause, aliases, read, schema, relations)
    owners = set()
    for col in clause.find_all(exp.Column):
        owners.add(_owner(col, aliases, read, schema, clause, relations))
    if len(owners) != 1:
        what = "no column" if not owners else f"columns of {', '.join(sorted(owners))}"
        raise UnsupportedQuery(f"LINEAGE ON expressions must read columns of exactly one base table, not {what}, at {position(clause)}")
    table = owners.pop()
    exprs = []
    for e in clause.expressions:
        e = e.copy()
        for col in e.find_all(exp.Column):
            col.set("table", exp.to_identifier(table, quoted=True))
            col.set("this", exp.to_identifier(col.name, quoted=True))
        exprs.append(e)
    return OnSpec(tables=frozenset([table]), table=table, expressions=exprs, labels=labels)


def _relation_names(tree: exp.Expression) -> set[str]:
    """The names of every relation the query names: its tables and their aliases, derived tables, CTEs, unnests."""
    names = {t.name.lower() for t in tree.find_all(exp.Table)}
    return names | {a.name.lower() for a in tree.find_all(exp.TableAlias) if a.name}


def _fields_read(clause: LineageOn, aliases: dict, read: set, schema: dict, relations: set[str]) -> LineageOn:
    """``info.b`` / ``t.info.b`` where ``info`` is no relation of the query but a column of a table read: the field
    ``b`` of that column, written ``(info).b`` (a copy of ``clause``), as the engine reads it. (``st.b`` over a
    derived table or CTE named ``st`` is that relation's column, which the clause does not read: left for the
    refusal; a review found it read as a struct field of another table's column ``st``.)"""
    def field(col: exp.Column) -> exp.Expression | None:
        parts = col.parts
        if len(parts) not in (2, 3) or parts[-2].name.lower() in relations and len(parts) == 2:
            return None
        table = aliases.get(parts[0].name.lower()) if len(parts) == 3 else None
        owners = [table] if table else sorted(read)
        if not any(parts[-2].name.lower() in schema.get(t, set()) for t in owners):
            return None
        column = exp.Column(this=parts[-2].copy(), table=parts[0].copy() if len(parts) == 3 else None)
        return exp.Dot(this=exp.Paren(this=column), expression=parts[-1].copy())

    clause = clause.copy()
    for col in list(clause.find_all(exp.Column)):
        dotted = field(col)
        if dotted is not None:
            col.replace(dotted)
    return clause


def _owner(col: exp.Column, aliases: dict, read: set, schema: dict, clause, relations: set[str]) -> str:
    name = col.name.lower()
    if col.table:
        table = aliases.get(col.table.lower())
        if table is None and col.table.lower() in relations:
            raise UnknownColumn(f"LINEAGE ON column {col.sql()}: {col.table!r} is a derived table, CTE, unnest or row "
                                f"generator of the query, and the clause reads base tables: name a column of a table "
                                f"it reads, at {position(clause)}")
        if table is None:
            raise UnknownColumn(f"LINEAGE ON column {col.sql()}: no table or alias {col.table!r} in the query, at {position(clause)}")
        if schema and name not in schema.get(table, set()):
            raise UnknownColumn(f"LINEAGE ON column {col.sql()}: table {table!r} has no column {col.name!r}, at {position(clause)}")
        return table
    owners = sorted(t for t in read if name in schema.get(t, set()))
    if not owners:
        raise UnknownColumn(f"LINEAGE ON column {col.name!r} is not a column of any table the query reads, at {position(clause)}")
    if len(owners) > 1:
        raise UnknownColumn(f"LINEAGE ON column {col.name!r} is ambiguous ({', '.join(owners)}): qualify it, at {position(clause)}")
    return owners[0]
