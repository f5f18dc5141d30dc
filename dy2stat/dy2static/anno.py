"""Annotations on AST nodes: one module, documented keys, kept across the toolkit's copies.

Annotations live in a dict stored on the node under `ANNO_ATTR`. Setting one replaces the
dict (copy on write), so a `copy.copy` of a node never shares later changes with the original.
"""

from __future__ import annotations

import copy as _copy
import enum
from typing import Any

import gast

ANNO_ATTR = "__anno"


class Basic(enum.Enum):
    """Keys set by the toolkit; each value is the key's documentation."""

    SKIP = "Transformers return this node unchanged and do not visit its children."
    ORIGIN = "OriginInfo: the user's file, line and source that this node came from."
    QN = "QN: the qualified name of a Name, Attribute or Subscript node (set by activity)."


class Static(enum.Enum):
    """Keys set by the static analyses (see dy2static/analysis); values are documentation."""

    SCOPE = "Scope: what this statement (its whole body included) or expression reads and writes."
    BODY_SCOPE = "Scope of the body of an if/while/for/with/try/function/lambda (locals, for defs)."
    ORELSE_SCOPE = "Scope of the else clause of an if/while/for/try."
    FINALLY_SCOPE = "Scope of the finally clause of a try."
    COND_SCOPE = "Scope of the test of an if/while (what the predicate reads)."
    HEADER_SCOPE = "Scope of the header of a for (iter, target), with, except or match."
    ARGS_SCOPE = "Scope of a function's parameters (all written at entry)."
    LIVE_VARS_IN = "frozenset[QN]: names live just before this statement."
    LIVE_VARS_OUT = "frozenset[QN]: names live just after this statement (whole compound)."
    DEFINED_VARS_IN = "Definitions: names defined on every path (must) / some path (may) before."


class Transform(enum.Enum):
    """Keys a pass sets for a later pass (see dy2static/passes); values are documentation."""

    EXTRA_TEST = "gast.expr: what a `for` loop checks before each iteration (break/return flags)."
    RETURN_VALUE = "str: on a function, the variable the return pass keeps its return value in."
    RETURN_FLAG = "str: on a function, the flag the return pass sets where the function returns."
    LOOP_FLAGS = "tuple[str, ...]: on a loop, the flags the break/continue pass made for it."
    CARRIED = ("frozenset[str]: on a loop with jumps, the names it carries as written (before "
               "its jumps became flags, whose guards make more names look carried).")
    GUARD = ("str: on an `if not flag:` a jump pass made, the flag (its false branch runs only "
             "where the flag is set).")
    CALLED_AT_ONCE = ("bool: on a lambda a pass made, that the helper it is given to calls it "
                      "before returning (its reads are reads where it stands, not a closure's).")
    CONDITION = ("bool: on an and/or expression, that only its truth is used (the test of an "
                 "if, while, assert or if-expression).")
    LEAVES = ("tuple[frozenset[str] | None, ...]: on an if of the user's, per branch, the kinds "
              "of jump (return, raise, break, continue) every path through it ends in one of; "
              "None where a path goes on.")


Key = Basic | Static | Transform

_MISSING = object()


def _annos(node: gast.AST) -> dict:
    return getattr(node, ANNO_ATTR, {})


def hasanno(node: gast.AST, key: Key) -> bool:
    """Whether `node` carries annotation `key`."""
    return key in _annos(node)


def getanno(node: gast.AST, key: Key, default: Any = _MISSING) -> Any:
    """The annotation `key` of `node`; `default` if absent (KeyError if no default)."""
    value = _annos(node).get(key, default)
    if value is _MISSING:
        raise KeyError(f"{type(node).__name__} node has no annotation {key}")
    return value


def setanno(node: gast.AST, key: Key, value: Any) -> None:
    """Set annotation `key` of `node` to `value`."""
    annos = dict(_annos(node))
    annos[key] = value
    setattr(node, ANNO_ATTR, annos)


def delanno(node: gast.AST, key: Key) -> None:
    """Remove annotation `key` from `node` (no error if absent)."""
    annos = dict(_annos(node))
    annos.pop(key, None)
    setattr(node, ANNO_ATTR, annos)


def copyanno(source: gast.AST, target: gast.AST, key: Key) -> None:
    """Copy annotation `key` from `source` to `target`, if `source` has it."""
    if hasanno(source, key):
        setanno(target, key, getanno(source, key))


def keys(node: gast.AST) -> list[Key]:
    """The annotation keys present on `node`."""
    return list(_annos(node))


def deepcopy(node: Any) -> Any:
    """Deep-copy an AST (or a list of them); copies keep their annotations (values shared)."""
    if isinstance(node, list):
        return [deepcopy(n) for n in node]
    if not isinstance(node, gast.AST):
        return _copy.copy(node)
    new = type(node)()
    for name, value in vars(node).items():
        if name == ANNO_ATTR:
            value = dict(value)
        elif isinstance(value, (gast.AST, list)):
            value = deepcopy(value)
        setattr(new, name, value)
    return new
