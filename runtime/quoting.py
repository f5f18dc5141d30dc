"""How messages and views show names and values taken from a program or a feed.

A file may hold any string: a 100 MB variable name, terminal escape codes,
right-to-left overrides. Messages quote such values with :func:`quote`
(``repr``, so control characters are escaped, and at most ``QUOTE_LIMIT``
characters); text views show names with :func:`printable`.
"""

from __future__ import annotations

import reprlib

__all__ = ["QUOTE_LIMIT", "describe_kind", "field_key", "printable", "quote"]

# The most characters of one name or value an error message quotes.
QUOTE_LIMIT = 200


def quote(value, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` in at most about ``limit`` characters (long strings and
    containers are cut, and say how long they were); never builds the full repr."""
    shown = _short_repr(limit).repr(value)
    if len(shown) > limit:  # a repr that reprlib does not shorten (a large object)
        shown = shown[: limit - 3] + "..."
    if isinstance(value, str) and len(value) > limit:
        shown += f" ({len(value):,} characters)"
    return shown


def _short_repr(limit: int) -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxstring = short.maxother = max(limit, 20)
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = 8
    short.maxlevel = 4
    return short


def field_key(key) -> str:
    """A key from a file as one part of a field path (``blocks[0].ops[3].attrs.KEY``):
    as it is when short and plain, else quoted."""
    text = str(key)
    if len(text) <= 60 and text.isprintable() and "." not in text and "[" not in text:
        return text
    return quote(text, 60)


def printable(text: str, limit: int | None = None) -> str:
    """``text`` with every character that is not printable escaped (``\\x1b``,
    ``\\u202e``, ``\\n``), optionally cut to ``limit`` characters."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def describe_kind(value) -> str:
    """How error messages name a JSON-like value's kind: 'a list', 'null', ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"
