"""Spark's ``IDENTIFIER('t')`` in FROM written as the table it names.

``SELECT * FROM IDENTIFIER('cust')`` reads the table ``cust`` (Spark parses the string as an identifier; a query
builder passes the name as a parameter so). sqlglot reads it as a call, which was refused as a table function
without row ids -- naming a table the session had registered. Valid for a string literal holding one plain name
(letters, digits and underscores, not starting with a digit), which Spark reads unquoted: case-insensitive, as the
name written bare. Another argument (a qualified name, a quoted or odd one, a parameter) is left to that refusal.
Applied before the checks, on an engine that has the clause (``LineageFunctions.identifier_clause``: Spark).
"""

from __future__ import annotations

import re

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifier_tables(expression: exp.Expression, context: PassContext | None = None,
                      copy: bool = True) -> exp.Expression:
    if context is not None and not context.fns.identifier_clause:
        return expression  # (DuckDB has no such clause: its error for the call stands)
    if not any(_named(table) for table in expression.find_all(exp.Table)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for table in list(tree.find_all(exp.Table)):
        name = _named(table)
        if name is not None:
            table.set("this", exp.to_identifier(name))
    return tree


def _named(table: exp.Table) -> str | None:
    """The plain name ``IDENTIFIER('name')`` reads as a table, or None."""
    call = table.this
    if not isinstance(call, exp.Anonymous) or call.name.upper() != "IDENTIFIER" or len(call.expressions) != 1:
        return None
    arg = call.expressions[0]
    if not (isinstance(arg, exp.Literal) and arg.is_string and _PLAIN.fullmatch(arg.this)):
        return None
    return arg.this
