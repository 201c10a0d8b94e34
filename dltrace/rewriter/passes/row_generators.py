"""A table function in FROM that generates its rows from constants (``range(5)``, ``generate_series(d1, d2,
INTERVAL 1 DAY)``) is a source of literal rows, as a VALUES list is: no base row is behind them.

A user writes one as a number or calendar spine, ``FROM generate_series(DATE '2024-01-01', DATE '2024-12-31',
INTERVAL 1 DAY) AS d(day) LEFT JOIN orders o ON o.day = d.day``. Each output row's lineage is then the base rows
joined to its generated row, and the generated row adds none (the semantics of a VALUES row).

The call is left as written, for the engine to run as the user would (DuckDB's list functions of the same names are
not the same rows: ``range(0, 5, 0)`` raises where ``unnest(range(0, 5, 0))`` gives none). Before qualification
the pass names what the engine names: the alias (the function's name, as the engine's binder gives it) and the
columns of a call that lists none (``LineageFunctions.row_generators``: DuckDB's ``range`` column, Spark's
``id``; on DuckDB the alias's name where the call has an alias and one column: ``range(3) AS q`` gives a column
``q``), so that a star and a bare name resolve as the engine resolves them. DuckDB also reads the column by the
function's name there (``range``, ``q.range``), which qualification would bind to another table's column of that
name: ``q.range`` in the generator's own SELECT is written ``q.q``; a bare ``range``, or one in a subquery of it,
is refused, naming it. An alias naming more columns than the call gives is refused (DuckDB drops the extra names),
and so is WITH ORDINALITY (a column more). It marks the table (``meta[ROW_GENERATOR]``), which the lineage rules
read as a source without lineage.

Valid where the arguments are constants: the rows are then the same for every row of the query, and read no
table. Refused, naming the call: arguments reading a column (a lateral call, whose rows depend on another FROM
item's row) or holding a subquery (whose rows would owe their number to a table's rows: the subquery's lineage).
A table function the engine does not list as a generator (``read_csv``, ``read_parquet``: rows of a file dltrace
has no ids for) is left to qualification's refusal, which says to register it as a table.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import ROW_GENERATOR, is_within


def row_generators(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    calls = [t for t in expression.find_all(exp.Table) if generator_name(t, context) is not None]
    if not calls:
        return expression
    tree = exp.maybe_copy(expression, copy)
    for table in [t for t in tree.find_all(exp.Table) if generator_name(t, context) is not None]:
        name = generator_name(table, context)
        _check_constant(table, context.dialect)
        if table.args.get("ordinality"):
            raise UnsupportedQuery(f"WITH ORDINALITY on a table function is not supported (number the rows with "
                                   f"row_number() OVER (ORDER BY ...)), at {position(table)}")
        columns = context.fns.row_generators[name]
        alias = table.args.get("alias")
        if alias is None:
            alias = exp.TableAlias(this=exp.to_identifier(name, quoted=True))
            table.set("alias", alias)
        elif not alias.columns and len(columns) == 1 and context.fns.generator_column_takes_alias:
            read_hidden_name(table, columns[0], alias.name)
            columns = (alias.name,)
        if len(alias.columns) > len(columns):
            raise UnsupportedQuery(f"{alias.name} ({table.this.sql(context.dialect)}) gives {len(columns)} "
                                   f"column{'s' * (len(columns) > 1)}, and its alias names {len(alias.columns)}: "
                                   f"name {len(columns)}, at {position(table)}")
        if not alias.columns:
            alias.set("columns", [exp.to_identifier(c, quoted=True) for c in columns])
        table.meta[ROW_GENERATOR] = True
    return tree


def generator_name(table: exp.Table, context: PassContext) -> str | None:
    """The name of the engine's row generator ``table`` calls, as the engine writes it, or None (a table, or
    another table function)."""
    if isinstance(table.this, exp.Identifier) or not isinstance(table.this, exp.Func):
        return None
    written = table.this.sql(context.dialect)
    name = written.split("(", 1)[0].strip().lower()
    return name if name in context.fns.row_generators else None


def read_hidden_name(source: exp.Expression, name: str, alias: str) -> None:
    """DuckDB names an aliased one-column call's column after the alias and still reads it by ``name`` (the
    function's: ``range(3) AS q`` gives ``q`` and ``q.range``; ``unnest(l) AS x`` ``x`` and ``x.unnest``), which
    column qualification knows as one name only. ``alias.name`` in the call's own SELECT is written as the
    column's name; a bare ``name``, or ``alias.name`` in a subquery of the SELECT (where another table may take the
    alias), could be another table's column: refused, naming it."""
    if name.lower() == alias.lower():
        return
    select = source.find_ancestor(exp.Select)
    for column in list(select.find_all(exp.Column)) if select is not None else ():
        if column.name.lower() != name.lower() or column.table.lower() not in ("", alias.lower()) \
                or is_within(column, source):
            continue  # (the call's own argument reads the relations before it, an outer one of the alias's name)
        if column.table and column.find_ancestor(exp.Select) is select:
            replace_read(column, exp.column(alias, table=column.table, quoted=True), column.name, select)
            continue
        if not column.table and isinstance(column.parent, exp.Ordered) and column.parent.parent is \
                select.args.get("order") and name.lower() in map(str.lower, select.named_selects):
            continue  # (ORDER BY an output of that name, as a key alone: the item's; in an expression it is not)
        raise UnsupportedQuery(f"{column.sql()} may read {alias}'s column, which DuckDB names {alias} (and {name}): "
                               f"name the column with a list (AS {alias}(c)), at {position(column)}")


def replace_read(column: exp.Column, written: exp.Expression, name: str, select: exp.Select) -> None:
    """``column`` of ``select`` replaced by ``written``, which reads the same value: a SELECT item keeps its output
    name ``name`` (``x.unnest`` an output ``unnest``, which a query around it may read)."""
    item = column.parent is select and column.arg_key == "expressions"
    column.replace(exp.alias_(written, name, quoted=True) if item else written)


def _check_constant(table: exp.Table, dialect: str) -> None:
    call = table.this
    if call.find(exp.Query, exp.Subquery):
        raise UnsupportedQuery(f"a table function over a subquery ({call.sql(dialect)}) is not supported: its rows "
                               f"would owe their number to the subquery's rows; compute the bounds in a CTE and join "
                               f"it, at {position(table)}")
    column = call.find(exp.Column)
    if column is not None:
        raise UnsupportedQuery(f"a table function reading a column ({call.sql(dialect)}, reading {column.sql(dialect)}) "
                               f"is not supported: its rows depend on another row; give it constants, or unnest a "
                               f"list of the row's (unnest(range(...))), at {position(table)}")


T = exp.DataType.Type
_INTEGERS = frozenset({T.TINYINT, T.SMALLINT, T.MEDIUMINT, T.INT, T.BIGINT, T.UTINYINT, T.USMALLINT, T.UMEDIUMINT,
                       T.UINT})


def generated_type(table: exp.Table, dialect: str) -> exp.DataType | None:
    """The type of a row generator's values, by its first argument's type, or None where that is not told: over
    integers BIGINT (DuckDB's range and generate_series, Spark's range), over dates and timestamps TIMESTAMP and
    over TIMESTAMPTZ TIMESTAMPTZ (DuckDB's, with an INTERVAL step). A rule that must know how a key groups or
    compares (``passes/coarse_keys.py``) reads a generated column by this type rather than as untyped."""
    args = [a for a in table.this.iter_expressions()]
    if not args:
        return None
    try:
        first = annotate_types(args[0].copy(), dialect=dialect).type
    except (SqlglotError, KeyError, ValueError, TypeError, AttributeError):
        return None
    if first is None:
        return None
    if first.this in _INTEGERS:
        return exp.DataType.build("BIGINT")
    if first.this in (T.DATE, T.TIMESTAMP, T.TIMESTAMPNTZ):
        return exp.DataType.build("TIMESTAMP")
    if first.this == T.TIMESTAMPTZ:
        return exp.DataType.build("TIMESTAMPTZ")
    return None


def typed_stand_in(table: exp.Table, dialect: str) -> exp.Subquery | None:
    """A one-row derived table of the row generator ``table``'s alias and columns, each a NULL of the generated
    type: for sqlglot's type annotation only (it does not type a table function's columns), never run."""
    kind = generated_type(table, dialect)
    alias = table.args.get("alias")
    if kind is None or alias is None or not alias.columns:
        return None
    items = [exp.alias_(exp.cast(exp.null(), kind), c.name, quoted=True) for c in alias.columns]
    return exp.select(*items).subquery(exp.to_identifier(alias.name, quoted=True))
