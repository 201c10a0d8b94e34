"""Names dltrace reserves in the user's SQL and schemas, and how values sort (the foundation layer)."""

from __future__ import annotations

RESERVED_PREFIX = "dl_"  # every name dltrace adds to a query or a table starts with it
RID = "dl_rid"  # the stable dense row id of a registered table: its position in the source


def value_order(values: tuple) -> tuple:
    """A sort key for value tuples that may hold NULLs (None sorts last)."""
    return tuple((v is None, v) for v in values)
