"""Parsing and up-front checks: one query statement, no reserved ``dl_`` names, no unsupported constructs."""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from dltrace.errors import ParseError, ReservedName, UnsupportedQuery
from dltrace.names import RESERVED_PREFIXES, RID, reserved_prefix
from dltrace.rewriter.grammar import LineageOn
from dltrace.rewriter.grammar import parse as grammar_parse
from dltrace.rewriter.grammar import dialect as grammar_dialect
from dltrace.rewriter.positions import WRITTEN_SPAN, mark_written_spans, marked_by_passes, position  # noqa: F401
from dltrace.rewriter.shape import is_paren, is_pivot_statement, is_unpivot_statement, item_names


def parse_error_text(e: sqlglot.errors.ParseError) -> str:
    """sqlglot's first parse error as one readable line: in SQL's words rather than sqlglot's class names (without
    its token dump), where, and the text just before that point."""
    if not e.errors:
        return str(e).splitlines()[0]
    err = e.errors[0]
    desc = str(err.get("description", "")).split(". Line")[0]
    desc = _REQUIRED.sub(lambda m: _incomplete(m.group(2).rsplit(".", 1)[-1], m.group(1)), desc)
    desc = desc.split(" but got <Token")[0]
    near = " ".join((str(err.get("start_context") or "") + str(err.get("highlight") or "")).split())[-40:]
    return f"{desc} at line {err.get('line')}, col {err.get('col')}" + (f" (near `{near}`)" if near else "")


#: sqlglot's "an expression lacks a part" error, which names the part and the expression's Python class
_REQUIRED = re.compile(r"Required keyword: '(\w+)' missing for <class '([\w.]+)'>")


def _incomplete(class_name: str, part: str) -> str:
    """``Mul``, ``expression`` -> "`*` without its right operand"; ``Where``, ``this`` -> "WHERE with nothing after
    it"."""
    cls = getattr(exp, class_name, None)
    if isinstance(cls, type) and issubclass(cls, exp.Binary):
        operator = _operator(cls)
        side = "right" if part == "expression" else "left"
        return f"`{operator}` without its {side} operand" if operator else f"an operator without its {side} operand"
    if isinstance(cls, type) and issubclass(cls, exp.Func):
        # (a call: `substr()` was "SUBSTRING with nothing after it"; its names as sqlglot knows them)
        names = " / ".join(cls.sql_names()[:3])
        return f"a call of {names} without its {'first argument' if part == 'this' else part + ' argument'}"
    words = _CLAUSES.get(class_name) or re.sub(r"(?<=[a-z])(?=[A-Z])", " ", class_name).upper()
    return f"{words} with nothing after it" if part in ("this", "expressions") else f"{words} without its {part}"


#: sqlglot's classes of clauses whose keyword is not their name
_CLAUSES = {"Order": "ORDER BY", "Group": "GROUP BY", "Cluster": "CLUSTER BY", "Distribute": "DISTRIBUTE BY",
            "Sort": "SORT BY", "Qualify": "QUALIFY"}


def _operator(cls: type) -> str | None:
    """A binary expression class's operator as SQL writes it (``Mul`` -> ``*``), or None."""
    try:
        text = cls(this=exp.column("a"), expression=exp.column("b")).sql()
    except Exception:  # noqa: BLE001 - only a nicer message is at stake
        return None
    return text[2:-2] if text.startswith("a ") and text.endswith(" b") else None


def parse_query(sql: str, dialect: str) -> exp.Expression:
    """Parse exactly one query (SELECT / set operation, with optional WITH, or DuckDB's PIVOT / UNPIVOT statement)
    in ``dialect``."""
    try:
        statements = [s for s in grammar_parse(sql, dialect) if s is not None]
    except sqlglot.errors.ParseError as e:
        first = _first_word(sql)
        if first is not None:
            raise ParseError(f"SQL does not parse: {first}") from None
        raise ParseError(f"SQL does not parse: {parse_error_text(e)}") from None
    except sqlglot.errors.TokenError as e:
        raise ParseError(f"SQL does not tokenize: {_unclosed(sql) or str(e).splitlines()[0]}") from None
    if len(statements) != 1:
        raise ParseError(f"expected one SQL statement, got {len(statements)}")
    tree = statements[0]
    mark_written_spans(tree, sql)
    if not isinstance(tree, exp.Query) and not is_pivot_statement(tree) and not is_unpivot_statement(tree):
        # (passes/pivots.py, passes/unpivots.py: a grouped query, a UNION ALL)
        raise not_a_query(tree, sql, dialect)
    if isinstance(tree, exp.Subquery) and isinstance(tree.unnest(), exp.Values):
        raise not_a_query(tree.unnest(), sql, dialect)  # ((VALUES ...)) ORDER BY 1: a VALUES statement all the same
    return tree


#: the words a statement may begin with (a query's, and the others', which are refused by name once parsed)
_STARTS = frozenset({"select", "with", "from", "values", "table", "pivot", "unpivot", "explain", "create", "insert",
                     "update", "delete", "drop", "alter", "describe", "show", "summarize", "pragma", "call", "set",
                     "copy", "attach", "detach", "use", "install", "load", "export", "import", "checkpoint", "begin",
                     "commit", "rollback", "merge", "truncate", "cache", "uncache", "refresh", "analyze", "vacuum",
                     "reset", "add", "msck", "replace", "upsert", "comment", "grant", "revoke", "map", "reduce",
                     "transform"})


def without_leading_comments(sql: str) -> str:
    """``sql`` from its first word: white space (a byte-order mark too) and comments before it dropped."""
    return re.sub(r"^(\s|\ufeff|--[^\n]*(\n|$)|/\*.*?\*/)*", "", sql, flags=re.S)


def _first_word(sql: str) -> str | None:
    """"`SELEC` at line 1, col 1 begins no SQL statement" where the text's first word is no statement's (sqlglot
    reads `SELEC id FROM t` as an aliased expression and reports the FROM), else None."""
    text = without_leading_comments(sql)
    word = re.match(r"[A-Za-z_]\w*", text)
    if word is None or word.group(0).lower() in _STARTS:
        return None
    before = sql[:len(sql) - len(text)]
    line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    return f"`{word.group(0)}` at line {line}, col {col} begins no SQL statement (a query begins with SELECT or WITH)"


def _unclosed(sql: str) -> str | None:
    """"a string opened at line L, col C is never closed" (or a quoted name, or a comment), where one is, else
    None (sqlglot's token error names no place)."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`" or sql.startswith("/*", i):
            end = sql.find("*/", i + 2) if c == "/" else i + 1
            if c != "/":
                while True:  # (a doubled quote is one quote inside)
                    end = sql.find(c, end)
                    if end == -1 or not sql.startswith(c * 2, end):
                        break
                    end += 2
            if end == -1:
                what = {"'": "a string", "/": "a comment"}.get(c, "a quoted name")
                line, col = sql.count("\n", 0, i) + 1, i - (sql.rfind("\n", 0, i) + 1) + 1
                return f"{what} opened at line {line}, col {col} is never closed (near `{sql[i:i + 30]}`)"
            i = end + (2 if c == "/" else 1)
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end + 1
        else:
            i += 1
    return None


def not_a_query(tree: exp.Expression, sql: str, dialect: str) -> Exception:
    """The error for ``tree``, parsed from ``sql``, that is not a query: naming the statement, or where ``sql``
    does not parse."""
    if isinstance(tree, exp.Command):  # what sqlglot could not parse, kept as text
        if tree.name.upper() == "CREATE":  # CREATE ... AS <query>: most likely the query does not parse
            return _create_error(sql, dialect)
        return UnsupportedQuery(f"{tree.name.upper()} is not a query dltrace traces: only queries (SELECT, set "
                                f"operations) have lineage" + ("; trace the query itself, without EXPLAIN"
                                                               if tree.name.upper() == "EXPLAIN" else ""))
    for cls, name in _UNSUPPORTED.items():  # DuckDB's PIVOT ... statement: the same refusal as inside FROM
        if isinstance(tree, cls):
            return UnsupportedQuery(f"{name} is not supported, at {position(tree)}")
    if isinstance(tree, exp.Values):  # DuckDB runs it; it reads no table, so there is no lineage to trace
        return UnsupportedQuery("a VALUES statement is not a query dltrace traces (it reads no table); select from "
                                "it if it is part of one: SELECT ... FROM (VALUES ...) AS v(c, ...)")
    body = tree.expression.unnest() if isinstance(tree, exp.Create) and tree.expression is not None else None
    if isinstance(body, exp.Values):  # (a CTAS's query is one)
        return UnsupportedQuery("CREATE ... AS VALUES is not a query dltrace traces (VALUES reads no table); write "
                                "its query as one: CREATE ... AS SELECT ... FROM (VALUES ...) AS v(c, ...)")
    if isinstance(tree, exp.Create) and tree.expression is not None and tree.expression.find(LineageOn):
        return UnsupportedQuery("a CREATE ... AS query cannot hold LINEAGE ON: a result whose lineage is values "
                                "rather than rows cannot be a source of the next step; run the query alone with it")
    if isinstance(tree, exp.Create) and isinstance(tree.expression, exp.Query) and tree.kind in ("TABLE", "VIEW"):
        # (run takes it, and rewrite and trace said "not a CREATE statement" of the file run had just run)
        return UnsupportedQuery(f"CREATE {tree.kind} ... AS <query> makes a pipeline step: run (s.run, dltrace run) "
                                f"runs it and registers its result with lineage; rewrite and trace take the query")
    if not isinstance(tree, _STATEMENTS) and (isinstance(tree, (exp.Condition, exp.Alias)) or not tree.key.isalpha()):
        # (`SELEC x` parses as an expression with an alias; ATTACH, DETACH, INSTALL, TRUNCATE parse as statements
        # of their own, named below: ATTACH said it did not parse)
        return ParseError(f"SQL does not parse as a statement: {sql.strip()[:60]!r}")
    word = statement_word(tree)
    article = "an" if word[0] in "AEIOU" else "a"
    return UnsupportedQuery(f"only queries (SELECT, set operations) have lineage, not {article} {word} statement")


def statement_word(tree: exp.Expression) -> str:
    """The statement's keyword as SQL spells it (``INSERT``, ``TRUNCATE``; a statement sqlglot keeps as text by
    its first word)."""
    if isinstance(tree, exp.Command):
        return tree.name.upper()
    return tree.key.upper().replace("TRUNCATETABLE", "TRUNCATE")


def create_as_body(sql: str, dialect: str) -> tuple[str, str] | None:
    """``CREATE ... AS <body>`` split at its AS (outside parentheses): the text up to the AS and the body with that
    text blanked (newlines kept, so a position in it is the statement's own); None without such an AS."""
    depth, start = 0, None
    for token in grammar_dialect(dialect).tokenize(sql):
        depth += token.token_type == TokenType.L_PAREN
        depth -= token.token_type == TokenType.R_PAREN
        if token.token_type == TokenType.ALIAS and depth == 0:
            start = token.end + 1
            break
    if start is None:
        return None
    return sql[:start], "".join(c if c == "\n" else " " for c in sql[:start]) + sql[start:]


def _create_error(sql: str, dialect: str) -> Exception:
    """Where a ``CREATE ... AS <query>`` sqlglot took for a Command does not parse: its query parsed alone, the
    text before it blanked (newlines kept), so the error's line and column are the statement's own."""
    split = create_as_body(sql, dialect)
    if split is not None:
        body = split[1]
        first = _first_word(body)
        if first is not None:
            return ParseError(f"SQL does not parse: {first}")
        try:
            grammar_parse(body, dialect)
        except sqlglot.errors.ParseError as e:
            return ParseError(f"SQL does not parse: {parse_error_text(e)}")
        except sqlglot.errors.TokenError as e:
            return ParseError(f"SQL does not tokenize: {str(e).splitlines()[0]}")
    return ParseError(f"a CREATE statement that does not parse as CREATE [OR REPLACE] TABLE|VIEW name AS query: "
                      f"{' '.join(sql.split())[:60]!r}")


_STATEMENTS = (exp.Create, exp.Drop, exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Command, exp.Alter,
               exp.Set, exp.Use, exp.Describe, exp.Summarize, exp.Transaction, exp.Commit, exp.Rollback, exp.Copy,
               exp.Pragma, exp.Cache, exp.Uncache, exp.Show)

_UNSUPPORTED = {
    exp.Pivot: "PIVOT/UNPIVOT",
    exp.TableSample: "TABLESAMPLE",
    exp.Into: "SELECT ... INTO",
    exp.Connect: "CONNECT BY",
    exp.MatchRecognize: "MATCH_RECOGNIZE",
    exp.Columns: "COLUMNS(...) (a SELECT item of several columns: name them)",
}


# generators a LATERAL VIEW may call, by class or by name (sqlglot reads json_tuple as a plain call)
_VIEW_GENERATORS = (exp.Explode, exp.Inline, exp.Stack)
_VIEW_GENERATOR_NAMES = ("json_tuple",)


def check_lateral_view(view: exp.Lateral) -> None:
    """Refuse a Spark LATERAL VIEW that :mod:`.passes.lateral_views` does not write as a derived table."""
    where = position(view)
    alias = view.args.get("alias")
    if alias is None or not alias.columns:
        raise UnsupportedQuery(f"a LATERAL VIEW without column names is not supported: name them (LATERAL VIEW "
                               f"explode(x) t AS c), at {where}")
    generator = view.this
    named = isinstance(generator, exp.Anonymous) and generator.name.lower() in _VIEW_GENERATOR_NAMES
    if not isinstance(generator, _VIEW_GENERATORS) and not named:
        raise UnsupportedQuery(f"a LATERAL VIEW over {generator.sql('spark')[:40]} is not supported (explode, "
                               f"posexplode, inline, stack and json_tuple are), at {where}")
    if view.args.get("outer") and not isinstance(generator, exp.Explode):
        raise UnsupportedQuery(f"LATERAL VIEW OUTER over {type(generator).__name__.lower()} is not supported "
                               f"(explode and posexplode are), at {where}")


# where a query may sit inside another one (every other position hides it from the lineage rules)
_QUERY_HOLDERS = (exp.Subquery, exp.Exists, exp.All, exp.Any, exp.SetOperation, exp.CTE, exp.In)


def check_query(tree: exp.Expression) -> None:
    """Refuse reserved names and constructs without a lineage rule, naming the construct and position."""
    for node in tree.find_all(exp.Table, exp.Subquery):
        # what carries joins but a parenthesised join's first item (passes/parenthesised_joins.py) hides FROM items
        # from every rule
        if node.args.get("joins") and not is_paren(node.parent):
            raise UnsupportedQuery(f"joins hung on a FROM item are not supported here (join the tables left to right, "
                                   f"or name the inner join as a subquery), at {position(node)}")
    for node in tree.walk():
        for cls, name in _UNSUPPORTED.items():
            if isinstance(node, cls):
                raise UnsupportedQuery(f"{name} is not supported, at {position(node)}")
        if isinstance(node, exp.Lateral) and node.args.get("view") and node.arg_key == "laterals" \
                and isinstance(node.parent, exp.Select):
            check_lateral_view(node)  # (passes/lateral_views.py writes it as a derived table)
        elif isinstance(node, exp.Lateral) and (node.args.get("view") or not isinstance(node.this, exp.Subquery)
                                                or not isinstance(node.parent, exp.Join)):
            # (a LATERAL subquery joined after the items it reads is a join: passes/lateral_joins.py)
            what = "LATERAL VIEW" if node.args.get("view") else "LATERAL over anything but a joined subquery"
            raise UnsupportedQuery(f"{what} is not supported, at {position(node)}")
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise UnsupportedQuery(f"recursive CTEs are not supported, at {position(node)}")
        if isinstance(node, exp.Select):
            _check_comma_before_outer_join(node)
            _check_repeated_names(node)
        if isinstance(node, (exp.Posexplode, exp.Inline, exp.Stack)) and isinstance(node.parent, exp.Select) \
                and node.arg_key == "expressions":
            # a generator of several columns needs their names: qualification would give it one (_col_1)
            raise UnsupportedQuery(f"{node.key.upper()}(...) in the SELECT list without AS (name, ...) is not "
                                   f"supported: name its columns, at {position(node)}")
        if isinstance(node, exp.Star) and node.args.get("replace"):
            _check_star_replace(node)
        if isinstance(node, exp.Star):
            _check_star_argument(node)
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star) and _star_over_a_column(node):
            # `st.*` over a struct column: one SELECT item, several columns (the engine's expansion, not ours)
            raise UnsupportedQuery(f"a star over a struct column ({node.sql()}) is not supported: name its fields "
                                   f"({node.table}.a, {node.table}.b, ...), at {position(node)}")
        if isinstance(node, exp.Subquery) and isinstance(node.parent, (exp.Order, exp.Limit, exp.Offset)) \
                and node.arg_key == "this" and not _under_exists(node):
            # sqlglot 30.30 reads `x > ALL ((q) ORDER BY ... LIMIT n)` as a function ALL(...) of a LIMIT
            raise UnsupportedQuery(f"ORDER BY / LIMIT after a parenthesised query inside a function or ALL (...) "
                                   f"is not supported, at {position(node)}")
        count = node.args.get("expression") if isinstance(node, (exp.Limit, exp.Offset, exp.Fetch)) else None
        if isinstance(count, exp.Expression) and count.find(exp.Query) is not None and count.find(exp.Table):
            # the rows it reads decide how many rows are kept: no lineage rule gives them to the rows (they were in
            # none); one reading no table (LIMIT (SELECT 2)) has no rows to give
            what = {"limit": "LIMIT", "offset": "OFFSET", "fetch": "FETCH"}[node.key]
            raise UnsupportedQuery(f"a subquery in {what} is not supported, at {position(count)}")
        if isinstance(node, (exp.Select, exp.SetOperation)) and node is not tree \
                and not isinstance(node.parent, _QUERY_HOLDERS):
            # e.g. DuckDB's ALL ((SELECT ...) UNION ...) parses as a function call: lineage would miss it
            parent = node.parent
            inside = parent.name.upper() if isinstance(parent, exp.Anonymous) else parent.key.upper()
            raise UnsupportedQuery(f"a subquery inside {inside}(...) has no lineage rule, at {position(node)}")
        _check_reserved(node)


def _check_star_argument(star: exp.Star) -> None:
    """A ``*`` (or ``t.*``) as a function's argument, other than ``COUNT(*)``'s, is refused: Spark reads
    ``hash(*)``, ``struct(t.*)``, ``count(t.*)`` over every column of the relations the rewrite reads, ``dl_rid``
    and lineage columns too (values and counts changed); DuckDB refuses most ("STAR expression is only allowed as
    the root element") and counts rows with ``count(t.*)``, which Spark does not."""
    holder = star.parent if isinstance(star.parent, exp.Column) and star.arg_key == "this" else star
    parent = holder.parent
    if parent is None or isinstance(parent, exp.Select) and holder.arg_key == "expressions" \
            or isinstance(parent, exp.Count) and holder is star and star.arg_key == "this":
        return  # (a SELECT item, expanded by qualification; COUNT(*) counts rows)
    while isinstance(parent, exp.Distinct) and parent.parent is not None:  # count(DISTINCT *)
        parent = parent.parent
    if isinstance(parent, (exp.Like, exp.ILike, exp.SimilarTo, exp.RegexpLike)) and holder is parent.this \
            and isinstance(parent.parent, exp.Select):
        # DuckDB's `SELECT * LIKE 'p%'` (the columns whose names match), which sqlglot reads as a LIKE of a star
        word = {"similarto": "SIMILAR TO", "regexplike": "~"}.get(parent.key, parent.key.upper())
        raise UnsupportedQuery(f"{holder.sql()} {word} ... (a star over the columns whose names "
                               f"match) is not supported (list the columns), at {position(holder)}")
    inside = parent.name if isinstance(parent, exp.Anonymous) else parent.key.upper()
    raise UnsupportedQuery(f"{holder.sql()} inside {inside}(...) is not supported (list the columns), at "
                           f"{position(holder)}")


def _check_star_replace(star: exp.Star) -> None:
    """``* REPLACE (e AS c)`` where sqlglot's expansion reads it otherwise than the engine (wrong rows, found by a
    new user's review): over a USING / NATURAL join (the join key was expanded as the key itself, the replacement
    dropped), or with an ORDER BY or DISTINCT ON naming a replaced column (DuckDB reads the replacement there, the
    expansion the input column)."""
    select = star.find_ancestor(exp.Select)
    if select is None:
        return
    replaced = {alias.alias.lower() for alias in star.args["replace"] if isinstance(alias, exp.Alias)}
    for join in select.args.get("joins") or []:
        if join.args.get("using") or (join.args.get("method") or "").upper() == "NATURAL":
            raise UnsupportedQuery(f"* REPLACE over a USING or NATURAL join is not supported (write the columns), "
                                   f"at {position(star)}")
    distinct = select.args.get("distinct")
    for clause, name in ((select.args.get("order"), "ORDER BY"), (distinct and distinct.args.get("on"), "DISTINCT ON")):
        for column in clause.find_all(exp.Column) if clause is not None else ():
            if not column.table and column.name.lower() in replaced:
                raise UnsupportedQuery(f"{name} naming a column * REPLACE replaces ({column.name}) is not supported "
                                       f"(write the columns, or order by position), at {position(column)}")


def _star_over_a_column(star: exp.Column) -> bool:
    """Is ``x.*`` (or ``t.x.*``) a star over something other than a FROM item of its SELECT (a struct column)?
    Names compared without case: a quoted name that differs only in case counts as a FROM item (and is then
    resolved, or refused, by qualification)."""
    if star.args.get("db") is not None:
        return True
    select = star.find_ancestor(exp.Select)
    while select is not None:  # its own SELECT's, or (correlated) an enclosing one's
        if star.table.lower() in item_names(select):  # (a table inside a parenthesised join too)
            return False
        select = select.find_ancestor(exp.Select)
    return True


def _under_exists(node: exp.Expression) -> bool:
    """Is ``node`` the parenthesis of ``EXISTS ((q) ORDER BY ... LIMIT ...)`` (modifier nodes up to an EXISTS)?"""
    parent = node.parent
    while isinstance(parent, (exp.Order, exp.Limit, exp.Offset)):
        parent = parent.parent
    return isinstance(parent, exp.Exists)


def compared_with_a_subquery(node: exp.Tuple) -> bool:
    """Is ``node`` a row value compared with a subquery (``(a, b) IN (SELECT ...)``, ``= ANY``, ``= (SELECT ...)``)?
    ``passes/row_in_subqueries.py`` reads those it can and refuses the others."""
    parent = node.parent
    if isinstance(parent, exp.In):
        return node is parent.this and parent.args.get("query") is not None
    if isinstance(parent, exp.Binary) and not isinstance(parent, (exp.And, exp.Or)):
        other = parent.expression if node is parent.this else parent.this
        return isinstance(other, (exp.Any, exp.All, exp.Subquery))
    return False


def _check_repeated_names(select: exp.Select) -> None:
    """Two FROM items of one SELECT under one name (``FROM x AS u, t JOIN (u JOIN w ON u.k = w.k) ON ...``), the
    name read by a column: the engine binds it by the scope of each join (the parenthesis's own ``u`` inside it),
    qualification to the first item of the name; refused (DuckDB raises for most such reads)."""
    names = item_names(select, repeated=True)
    repeated = {n for n in names if names.count(n) > 1}
    if not repeated:
        return
    read = next((c for c in select.find_all(exp.Column) if c.table.lower() in repeated), None)
    if read is not None:
        raise UnsupportedQuery(f"two FROM items are named {read.table!r}, which {read.sql()} reads: give one of them "
                               f"another alias, at {position(read)}")


def _check_comma_before_outer_join(select: exp.Select) -> None:
    """``FROM e, a RIGHT JOIN d ON ...`` is ``e`` times ``(a RIGHT JOIN d ...)`` (a comma binds looser than JOIN),
    but sqlglot lists both joins flat, which the lineage rules (and the rewriting of commas into CROSS JOINs)
    read left-deep as ``(e, a) RIGHT JOIN d``: d's unmatched rows would lose their pairing with e's. Refused for
    a RIGHT/FULL join (an inner or LEFT join after a comma means the same either way)."""
    comma = False
    for join in select.args.get("joins") or []:
        if not any(join.args.get(k) for k in ("kind", "side", "on", "using", "method")):
            comma = True
        elif comma and (join.side or "").upper() in ("RIGHT", "FULL"):
            raise UnsupportedQuery(f"a {join.side.upper()} JOIN after a comma-separated FROM item is not supported "
                                   f"(write the comma as CROSS JOIN after the outer join), at {position(join)}")


def _check_reserved(node: exp.Expression) -> None:
    """Names dltrace gives its own columns, relations and lambda variables start with a reserved prefix, so a
    user name with one could be captured by them: refused (the row id ``dl_rid`` can be read)."""
    names = []
    if isinstance(node, exp.Alias):
        names.append(node.alias)
    elif isinstance(node, exp.TableAlias):
        names += [node.name, *(c.name for c in node.columns)]
    elif isinstance(node, exp.CTE):
        names.append(node.alias)
    elif isinstance(node, exp.Table):
        names.append(node.name)
    elif isinstance(node, exp.Column) and node.name.lower() != RID:
        names.append(node.name)
    elif isinstance(node, exp.Lambda):
        names += [v.name for v in node.expressions]
    for name in names:
        prefix = reserved_prefix(name)
        if prefix:
            raise ReservedName(f"name {name!r} starts with {prefix!r}, a prefix dltrace reserves for its own names "
                               f"({', '.join(RESERVED_PREFIXES)}); choose another name, at {position(node)}")


def mentions_rid(tree: exp.Expression) -> bool:
    """Does the query read the row id ``dl_rid`` (which only a table's rows relation carries)?"""
    return any(c.name.lower() == RID for c in tree.find_all(exp.Column))
