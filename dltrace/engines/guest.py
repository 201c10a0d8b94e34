"""dltrace as a guest on a user's connection or SparkSession: what it creates there, and what it leaves.

The rule: dltrace never replaces, drops or closes what it did not create. So every relation an engine makes gets a
name no object of the user's has (:meth:`Made.fresh`: the catalog is asked first; a name a user reads, such as a
registered table's, is checked by the catalog instead and refused), every one it creates is recorded
(:meth:`Made.add`) and only those are replaced or dropped; the dl_* functions, whose names are public (README), are
refused rather than renamed when the user has one of a name (the engines' ``*_udfs`` modules) and dropped by the last
session that used them (on DuckDB, of every connection of the database: :func:`functions_heir`); a setting changed on
the user's behalf is put back at close.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dltrace.engines.base import claim_relation, holds_relation, made_by_dltrace, release_relation, taken_over
from dltrace.errors import DuplicateTable, SessionClosed
from dltrace.names import rows_relation


class Made:
    """The relations one engine made on ``target`` (a connection or SparkSession), and which relation holds each
    registered table's rows with their ids (its name chosen when it is made: ``_dl_rows_<t>`` unless taken)."""

    def __init__(self, target: Any, engine: Any, exists: Callable[[str], bool],
                 identity: Callable[[str], Any] | None = None, taken: Callable[[str], bool] | None = None) -> None:
        self.target = target
        self.engine = engine
        self._exists = exists  # is there a relation the name reads on the target, whoever made it?
        # is the name any relation's (DuckDB: of any schema; one on the search path later would meet dltrace's)?
        self._taken = taken or exists
        # what tells the relation of a name dltrace made from one the user made in its place since (a user's
        # createOrReplaceTempView / CREATE OR REPLACE over a registered table's view): its catalog id
        self._identity = identity
        self._made_as: dict[str, Any] = {}
        self.names: set[str] = set()
        self.rows: dict[str, str] = {}  # registered table -> its rows relation

    def fresh(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``...: the first name no relation on the target has (a user's object
        of dltrace's internal name is neither replaced nor shadowed: a temp relation would hide a persistent one)."""
        for n in itertools.count():
            name = base if n == 0 else f"{base}_{n}"
            if not self._taken(name):
                return name
        raise AssertionError("unreachable")  # pragma: no cover

    def rows_name(self, table: str) -> str:
        """The relation holding registered ``table``'s rows with ``dl_rid``."""
        return self.rows.get(table) or rows_relation(table)

    def new_rows_name(self, table: str) -> str:
        """The name to (re)make ``table``'s rows relation under: its current one when this engine holds it."""
        current = self.rows.get(table)
        if current is None or not self.holds(current):
            current = self.rows[table] = self.fresh(rows_relation(table))
        return current

    def check_free(self, name: str) -> None:
        """Refuse to create ``name`` over a relation no dltrace session made (the last guard: callers pick fresh
        names, and the catalog refuses a user's name before it gets here)."""
        if self._exists(name) and (not made_by_dltrace(self.target, name) or self.replaced_by_user(name)):
            raise DuplicateTable(f"{name!r} exists on the connection and is not dltrace's: dltrace does not replace "
                                 "it (rename it, or give dltrace another connection)")

    def add(self, name: str) -> None:
        self.names.add(name)
        claim_relation(self.target, name, self.engine)
        if self._identity is not None:
            self._made_as[name] = self._identity(name)

    def replaced_by_user(self, name: str) -> bool:
        """Was ``name`` made again, since this engine made it, by someone other than dltrace (the user)?"""
        if self._identity is None or name not in self._made_as:
            return False
        try:
            return self._identity(name) != self._made_as[name]
        except Exception:  # noqa: BLE001 - a target that cannot say: the name stays as it is
            return True

    def replaced_among(self, names: Iterable[str], identities: Callable[[list[str]], dict] | None = None) -> list[str]:
        """Those of ``names`` this engine made that someone other than dltrace made again since (see
        :meth:`replaced_by_user`); ``identities`` gives the identities of several names in one question."""
        known = [n for n in dict.fromkeys(names) if n in self._made_as]
        if not known or self._identity is None:
            return []
        if identities is None:
            return [n for n in known if self.replaced_by_user(n)]
        try:
            now = identities(known)
        except Exception:  # noqa: BLE001 - a target that cannot say: none is taken as replaced (the queries run as
            return []  # before), where replaced_by_user, which guards a drop, takes the name as the user's
        return [n for n in known if now.get(n) != self._made_as[n]]

    def holds(self, name: str) -> bool:
        """Did this engine make ``name``, and is it still its own (no other dltrace session took it over)?"""
        return name in self.names and holds_relation(self.target, name, self.engine)

    def taken_over(self, name: str) -> bool:
        return taken_over(self.target, name, self.engine)

    def forget(self, name: str) -> bool:
        """Forget ``name``; True when the engine should drop it now (it made it and still holds it)."""
        if name not in self.names:
            return False
        self.names.discard(name)
        for table in [t for t, r in self.rows.items() if r == name]:
            del self.rows[table]
        if not holds_relation(self.target, name, self.engine):
            return False  # another dltrace session on this target took it over: its, not ours, to drop
        if self.replaced_by_user(name):
            self._made_as.pop(name, None)
            release_relation(self.target, name, self.engine)
            return False  # the user made their own relation of this name since: theirs, not ours, to drop
        self._made_as.pop(name, None)
        release_relation(self.target, name, self.engine)
        return True


@dataclass
class _Functions:
    """dltrace's dl_* functions on one connection / SparkSession, shared by every session there."""

    target: Any
    made: dict[str, Any] = field(default_factory=dict)  # name -> the target it was made on, by a session
    users: set[str] = field(default_factory=set)  # made by the user's install(): never dropped
    engines: set[Any] = field(default_factory=set)  # the sessions' engines using them


# id(target) -> its functions. The last session to close drops what sessions made; what the user's own
# dltrace.install made stays theirs.
_FUNCTIONS: dict[int, _Functions] = {}


def _entry(target: Any) -> _Functions:
    entry = _FUNCTIONS.get(id(target))
    if entry is None or entry.target is not target:  # (an id Python gave again to a later object)
        entry = _FUNCTIONS[id(target)] = _Functions(target)
    return entry


def dltrace_functions(target: Any) -> set[str]:
    """The dl_* functions on ``target`` that dltrace made (a session's or the user's ``dltrace.install``)."""
    entry = _FUNCTIONS.get(id(target))
    return set(entry.made) | entry.users if entry is not None and entry.target is target else set()


def use_functions(target: Any, engine: Any, made: set[str]) -> None:
    """``engine`` uses dltrace's functions on ``target``, of which it made ``made`` now."""
    entry = _entry(target)
    entry.made.update(dict.fromkeys(made, target))
    entry.engines.add(engine)


def installed_by_user(target: Any, made: set[str]) -> None:
    """The user's ``dltrace.install(target)``: the functions are theirs now, no session drops them."""
    entry = _entry(target)
    entry.users |= made | set(entry.made)
    entry.made.clear()


def release_functions(target: Any, engine: Any) -> dict[str, Any]:
    """``engine`` closes: the functions sessions made for ``target``, to drop when it was the last using them
    (name -> the target it was made on, which alone may drop it: :func:`hand_over`)."""
    entry = _FUNCTIONS.get(id(target))
    if entry is None or entry.target is not target:
        return {}
    entry.engines.discard(engine)
    if entry.engines:
        return {}
    made = dict(entry.made)
    entry.made.clear()
    if not entry.users:
        del _FUNCTIONS[id(target)]
    return made


def functions_heir(target: Any, shares: Callable[[Any], bool]) -> Any:
    """Another target holding dltrace's functions, a session's in use or the user's install, for which
    ``shares(other)`` says it sees ``target``'s functions (a DuckDB cursor and its connection share one catalog's
    Python functions), or None: the functions ``target``'s last session made must then stay, handed over
    (:func:`hand_over`)."""
    for entry in list(_FUNCTIONS.values()):
        if entry.target is not target and (entry.users or entry.engines) and shares(entry.target):
            return entry.target
    return None


def hand_over(target: Any, made: dict[str, Any]) -> None:
    """``target`` keeps the functions ``made`` (name -> the target they were made on) that another target's
    sessions made: the user's, when they installed dltrace's functions there; else its sessions', dropped (on the
    target they were made on) when the last of them closes."""
    entry = _entry(target)
    if entry.users:
        entry.users |= set(made)
    else:
        entry.made.update(made)


class Settings:
    """Settings dltrace set on a user's connection / SparkSession for them (``threads=``, Spark ``conf``), and
    their values before: put back at close, unless the user changed the setting since."""

    def __init__(self) -> None:
        self.changed: dict[str, tuple[Any, Any]] = {}  # setting -> (the user's value, dltrace's)

    def record(self, key: str, before: Any, ours: Any) -> None:
        self.changed.setdefault(key, (before, ours))

    def restore(self, current: Callable[[str], Any], put: Callable[[str, Any], None]) -> None:
        for key, (before, ours) in self.changed.items():
            if str(current(key)) == str(ours):
                put(key, before)
        self.changed.clear()


class ClosedEngine:
    """What a closed session's catalog holds instead of its engine: every use says the session is closed (not the
    engine's error about a connection it no longer has, nor a stale name)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        raise closed_error()


def closed_error() -> SessionClosed:
    """The error every use of a closed session raises."""
    return SessionClosed("this dltrace session is closed: open a new one with dltrace.connect(...)")
