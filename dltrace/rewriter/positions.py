"""Where a construct stands in the query's text, for the one line that refuses it: ``line L, col C (`snippet`)``.

sqlglot records where each name, literal and call name of a parsed query ends (``line``, ``col``) and its offsets
(``start``, ``end``); keywords (SELECT, CAST, EXISTS) and parentheses it does not. The passes before a refusal
decorrelate, alias and move the query's parts, so a subquery's text is marked on it as parsed
(:func:`mark_written_spans`): a refusal quotes the query as written, not dltrace's rewrite of it.
"""

from __future__ import annotations

import re

from sqlglot import exp

from dltrace.rewriter.grammar import WRITTEN_IN, WRITTEN_TEXT, generate

#: the nodes whose text as written a refusal quotes (a subquery is decorrelated, aliased and moved before some are)
_QUERIES = (exp.Query, exp.Subquery, exp.Exists)
WRITTEN_SPAN = "dl_written_span"  # meta of such a node as parsed: (start, end) of its text
#: meta every parsed node may carry that no pass put there (:func:`marked_by_passes`)
_PARSED = frozenset({WRITTEN_SPAN, WRITTEN_IN, WRITTEN_TEXT})


def position(node: exp.Expression) -> str:
    """``line L, col C (`snippet`)`` for ``node``: where its first word the query wrote starts (sqlglot records
    where a word ends: the column pointed past the construct's start), and the snippet -- a query's as the query
    wrote it, another construct's in the dialect the query was written in (Spark's ``LATERAL VIEW`` was quoted as
    DuckDB's ``CROSS JOIN UNNEST``), DuckDB's where the tree no longer says."""
    root = node.root()
    text = root.meta.get(WRITTEN_TEXT)
    snippet = _short(generate(_names_as_written(node, text), root.meta.get(WRITTEN_IN, "duckdb")))
    if text is not None and isinstance(node, _QUERIES):  # (its span as parsed: passes move words into it)
        spanned = next((n for n in node.bfs() if isinstance(n, _QUERIES) and WRITTEN_SPAN in n.meta), None)
        if spanned is not None:
            start, end = spanned.meta[WRITTEN_SPAN]
            return f"{_line_col(text, start)} (`{_short(' '.join(text[start:end].split()))}`)"
    span = _written_span(node, text, len(snippet))
    if span is not None:
        return f"{_line_col(text, span[0])} (`{snippet}`)"
    for n in node.walk():
        meta = n.meta if hasattr(n, "meta") else None
        if meta and "line" in meta:
            return f"line {meta['line']}, col {meta['col']} (`{snippet}`)"
    # a keyword such as CURRENT_DATE has no recorded position: the first one of the nearest expression around it
    parent = node.parent
    while parent is not None:
        found = [(n.meta["line"], n.meta["col"]) for n in parent.walk() if hasattr(n, "meta") and "line" in n.meta]
        if found:
            line, col = min(found)
            return f"line {line}, col {col} (`{snippet}`, in the expression starting there)"
        parent = parent.parent
    return f"`{snippet}`"


def _names_as_written(node: exp.Expression, text: str | None) -> exp.Expression:
    """``node`` with each name the query wrote spelled as it wrote it: qualifying lower-cases DuckDB's names, and
    `o."Order Total"` quoted as `"o"."order total"` was harder to find in the query."""
    if text is None or not any(isinstance(n, exp.Identifier) and "start" in (n._meta or {}) for n in node.walk()):
        return node
    node = node.copy()
    for ident in node.find_all(exp.Identifier):
        meta = ident._meta
        if not meta or "start" not in meta:
            continue
        word = text[meta["start"]: meta["end"] + 1]
        if _spelled_at(ident, word):
            quoted = word[:1] in ('"', "`") and len(word) > 1 and word[-1] == word[0]
            ident.set("this", word[1:-1].replace(word[0] * 2, word[0]) if quoted else word)
    return node


def mark_written_spans(tree: exp.Expression, text: str) -> None:
    """Mark each query, subquery and EXISTS of ``tree`` (just parsed from ``text``) with where its text is: a
    parenthesised one's from its ``(`` to its ``)``, another's from its first keyword (SELECT, WITH, FROM). One walk,
    children before their parents (a walk per query took a UNION ALL of 1,000 branches 10 s: a review)."""
    pairs = _parentheses(text)
    spans: dict[int, tuple[int, int]] = {}
    for node in reversed(list(tree.walk(bfs=False))):
        meta = node._meta  # (reading .meta would give every node a dict)
        own = (meta["start"], meta["end"] + 1) if meta and "start" in meta else None
        inner = _joined([own, *(spans.get(id(c)) for c in node.iter_expressions() if c.arg_key != "alias")])
        whole = _joined([inner, *(spans.get(id(c)) for c in node.iter_expressions() if c.arg_key == "alias")])
        if whole is None:
            continue
        if isinstance(node, _QUERIES) and inner is not None:
            # widened before its parent reads it (a query's first word may be its subquery's: `SELECT (SELECT
            # 1) ...`); a derived table's alias after its parentheses (the alias is in no parenthesis of its own)
            lo, hi = _widened(text, pairs, *inner)
            whole = (lo, max(hi, whole[1]))
            node.meta[WRITTEN_SPAN] = whole
        spans[id(node)] = whole


def _joined(spans: list[tuple[int, int] | None]) -> tuple[int, int] | None:
    """The smallest span holding every one of ``spans`` (None where there is none)."""
    known = [s for s in spans if s is not None]
    return (min(s for s, _ in known), max(e for _, e in known)) if known else None


def marked_by_passes(node: exp.Expression) -> bool:
    """Does ``node`` carry meta a pass put there (a decorrelated subquery, a key list, LINEAGE ON's table), beyond
    what parsing put on every query (its text's span, and on the statement its text and dialect)?"""
    return bool(set(node.meta) - _PARSED)


def _short(snippet: str) -> str:
    return snippet if len(snippet) <= 60 else snippet[:57] + "..."


def _line_col(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"line {line}, col {offset - (text.rfind(chr(10), 0, offset) + 1) + 1}"


def _written_span(node: exp.Expression, text: str | None, generated: int) -> tuple[int, int] | None:
    """(start, end) in ``text`` of the words of ``node`` the query wrote, or None where they are not known: a node
    made by a pass, or one holding a word of another text (each word is checked against the text at its offsets),
    or words moved far apart (more text between them than the node's own SQL would take)."""
    if text is None:
        return None
    spans = []
    for n in node.walk():
        meta = n.meta if hasattr(n, "meta") else None
        if meta and "start" in meta:
            start, end = meta["start"], meta["end"] + 1
            if not _spelled_at(n, text[start:end]):
                return None
            spans.append((start, end))
    if not spans:
        return None
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    return (start, end) if end - start <= 2 * generated + 20 else None


def _spelled_at(n: exp.Expression, word: str) -> bool:
    """Is ``word`` (the text at ``n``'s recorded offsets) what ``n`` reads as?"""
    if isinstance(n, exp.Identifier):
        return word.strip('"`[]').replace('""', '"').replace("``", "`").lower() == n.name.lower()
    if isinstance(n, exp.Literal):
        return n.this in word
    return word.replace("_", "a").isalnum() or word == "*"


def _parentheses(text: str) -> list[tuple[int, int]]:
    """(open, close) offsets of each pair of parentheses of ``text`` outside strings, quoted names and comments."""
    pairs, stack, i, n = [], [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            close = text.find(c, i + 1)
            i = n if close == -1 else close + 1
            continue
        if text.startswith("--", i):
            close = text.find("\n", i)
            i = n if close == -1 else close + 1
            continue
        if text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close == -1 else close + 2
            continue
        if c == "(":
            stack.append(i)
        elif c == ")" and stack:
            pairs.append((stack.pop(), i))
        i += 1
    return pairs


#: the keywords a query's text may begin with before its first recorded word (`SELECT DISTINCT CAST(x ...`)
_QUERY_START = re.compile(r"(?i)\b(?:select|with|from)\b")


def _widened(text: str, pairs: list[tuple[int, int]], lo: int, hi: int) -> tuple[int, int]:
    """(lo, hi), the span of a query's recorded words, widened to its text: to the innermost parentheses around
    all of them where only its keywords stand between (a subquery's ``(SELECT ... )``; a call's parentheses inside
    it hold only some of its words), else back to the keyword it begins with."""
    around = [(o, c) for o, c in pairs if o <= lo and c >= hi - 1 and "," not in text[o + 1:lo]]
    if around:
        o, c = max(around)  # (the innermost: the latest opening)
        return o, c + 1
    heads = [m.start() for m in _QUERY_START.finditer(text, 0, lo) if not re.search(r"[,;]", text[m.end():lo])]
    return (heads[-1], hi) if heads else (lo, hi)
