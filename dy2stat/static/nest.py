"""Nested structures (tuples, lists, dicts) of values: flatten and pack back."""

from __future__ import annotations


def flatten(structure) -> list:
    """The leaves of ``structure`` in order (dicts by sorted key)."""
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in flatten(item)]
    if isinstance(structure, dict):
        return [leaf for key in sorted(structure) for leaf in flatten(structure[key])]
    return [structure]


def paths(structure, prefix: str = "") -> list[str]:
    """Where each leaf of ``flatten(structure)`` sits: ``[1]['a']`` ('' for a lone leaf)."""
    if isinstance(structure, (list, tuple)):
        return [p for i, item in enumerate(structure) for p in paths(item, f"{prefix}[{i}]")]
    if isinstance(structure, dict):
        return [p for key in sorted(structure) for p in paths(structure[key],
                                                               f"{prefix}[{key!r}]")]
    return [prefix]


def pack_as(structure, leaves: list):
    """``structure`` with its leaves replaced, in order, by ``leaves``."""
    it = iter(leaves)

    def build(s):
        if isinstance(s, tuple):
            items = [build(v) for v in s]
            return type(s)(*items) if hasattr(s, "_fields") else tuple(items)
        if isinstance(s, list):
            return [build(v) for v in s]
        if isinstance(s, dict):  # leaves in sorted key order, keys in the dict's own
            built = {k: build(s[k]) for k in sorted(s)}
            return {k: built[k] for k in s}
        return next(it)

    return build(structure)


def replace_leaves(structure, selected, values):
    """``structure`` with each leaf for which ``selected(leaf)`` holds replaced by the next
    of ``values`` (an iterator is consumed as far as it is used), the others kept."""
    values = iter(values)
    return pack_as(structure, [next(values) if selected(leaf) else leaf
                               for leaf in flatten(structure)])


def same_structure(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_structure(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(same_structure(a[k], b[k]) for k in a)
    return not isinstance(a, (list, tuple, dict)) and not isinstance(b, (list, tuple, dict))


def describe(structure) -> str:
    """A short description for error messages: 'a tuple of 2', 'a Variable', ..."""
    if isinstance(structure, (list, tuple, dict)):
        return f"a {type(structure).__name__} of {len(structure)}"
    return "None" if structure is None else f"a {type(structure).__name__}"
