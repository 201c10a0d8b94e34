"""Names dltrace reserves in the user's SQL and schemas, how LINEAGE ON values read and how rows compare (the
foundation layer)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

RESERVED_PREFIX = "dl_"  # lineage columns and the row id: every name dltrace adds to a result or a table
# ... and every name the rewriter and backward tracing use inside the SQL they generate (sqlglot's
# decorrelation names its subqueries and columns _u_<n>): a user name with one of these could be captured
RESERVED_PREFIXES = (RESERVED_PREFIX, "_dl_", "_u_")
RID = "dl_rid"  # the stable dense row id of a registered table: its position in the source


def numbered_names(names: Iterable[str]) -> list[str]:
    """``names`` with a repeated one (letter case aside) numbered as DuckDB numbers it in a table it makes: by how many
    of it came before, skipping a number taken (``a, a, a, A, a_1`` -> ``a, a_1, a_2, A_3, a_1_1``)."""
    taken: set[str] = set()
    counts: dict[str, int] = {}
    out = []
    for name in names:
        made = name
        if made.lower() in taken:
            k = counts.get(name.lower(), 0)
            while made.lower() in taken:
                k += 1
                made = f"{name}_{k}"
            counts[name.lower()] = k
        taken.add(made.lower())
        out.append(made)
    return out


def rows_relation(table: str) -> str:
    """The private relation holding ``table``'s rows with their row id ``dl_rid``.

    The user's own ``table`` has only the user's columns, so ``SELECT *``, NATURAL JOIN and USING see exactly
    what the engine would show; only SQL that dltrace generates reads rids, from this relation.
    """
    return f"_dl_rows_{table}"


def reserved_prefix(name: str) -> str | None:
    """The reserved prefix ``name`` starts with (case-insensitive), if any."""
    lower = name.lower()
    return next((p for p in RESERVED_PREFIXES if lower.startswith(p)), None)


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def names_listed(names: Iterable[str]) -> str:
    """``names`` sorted and comma-separated for a message, each name that is not a plain identifier quoted as
    Python writes it (``' t', a, 'b,c'``): a bare list of ``" t"`` and ``t`` read as ``registered:  t, t``."""
    return ", ".join(n if _PLAIN_NAME.fullmatch(n) else repr(n) for n in sorted(names)) or "none"


def unknown_table(name: str, registered: Iterable[str]) -> str:
    """The message for table ``name``, which is not among ``registered``: what there is to read."""
    return f"unknown table {name!r}; registered: {names_listed(registered)}"


def one_zero(values: tuple) -> tuple:
    """``values`` with -0.0 written 0.0: SQL takes the two for one value, so a LINEAGE ON value tuple holding
    either is the same tuple, whichever row an engine read it from (DuckDB's dictionary kept the first one seen,
    Spark normalises to 0.0: the two engines named one group's value apart)."""
    return tuple(0.0 if isinstance(v, float) and v == 0.0 else v for v in values)


def value_tuples(on_values: dict[int, tuple], ids) -> list[tuple]:
    """The LINEAGE ON value tuples of dictionary ``ids``, in value order: the order of their ids, which the engine
    numbered in value order (forward's dictionary, which backward tracing reads too). Python compares no NaN with
    another, no dict, and no list holding a NULL with one holding a value: sorting the tuples themselves repeated
    nothing but could order NaN anywhere, and raised for STRUCT values and LISTs holding NULLs."""
    return [tuple(on_values[i]) for i in sorted(ids)]


# what a NaN and a -0.0 stand for in a row key (objects equal only to themselves)
_NAN, _NEGATIVE_ZERO = object(), object()


def row_key(values: tuple) -> tuple:
    """A row's values (Arrow's Python values) as a dict key that finds the same row in another run of its query.

    A NaN equals a NaN (as SQL groups them; Python's NaN != NaN found no row: "the sources changed"), -0.0 is
    apart from 0.0 (a rerun gives each row its own value again; Python took them for one, which could pair two
    rows' lineage crosswise), and lists, structs and maps are tuples (a list is no key: "unhashable type")."""
    return tuple(_row_value_key(v) for v in values)


def _row_value_key(v: object) -> object:
    if isinstance(v, float):
        if v != v:
            return _NAN
        return _NEGATIVE_ZERO if v == 0.0 and math.copysign(1.0, v) < 0 else v
    if isinstance(v, (list, tuple)):
        return tuple(_row_value_key(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _row_value_key(x)) for k, x in v.items())
    return v
