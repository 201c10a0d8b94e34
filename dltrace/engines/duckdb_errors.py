"""DuckDB's errors as dltrace reports them: the first line of one's message, and a method whose DuckDB errors
reach the user as one of dltrace's errors in that line (the adapter and the registration of sources share them, as
Spark's side shares :mod:`.spark_errors`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb

from dltrace.errors import DltraceError

F = TypeVar("F", bound=Callable[..., Any])


def one_line(e: Exception) -> str:
    """The first line of a DuckDB error's message (its type's name when it has none)."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    return first


def engine_errors(error: type[DltraceError]) -> Callable[[F], F]:
    """A method whose DuckDB errors reach the user as ``error`` in one line (a user's connection closed under
    dltrace, a source file deleted after it was registered, an Arrow type DuckDB cannot read...)."""
    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except duckdb.Error as e:
                raise error(f"DuckDB: {one_line(e)}{_gone_hint(one_line(e))}") from None
        return call  # type: ignore[return-value]
    return wrap


# DuckDB 2.0.1: "Catalog Error: Table with name _dl_rows_sales does not exist!" (a view: "View with name ...")
_GONE = re.compile(r"(?:Table|View) with name (_dl_\w+) does not exist")


def _gone_hint(message: str) -> str:
    """What to do when a relation dltrace made is gone from the user's connection: a transaction that registered
    it was rolled back, or the user dropped it (the engine's message names only dltrace's internal name)."""
    match = _GONE.search(message)
    if match is None:
        return ""
    return (f": {match.group(1)} is dltrace's own relation, gone from the connection (a transaction that made it "
            f"rolled back, or it was dropped); register or adopt the table again")
