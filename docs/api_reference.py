"""Writes docs/api.md, the API reference, from the public names and their docstrings.

    python docs/api_reference.py           # rewrite docs/api.md
    python docs/api_reference.py --check   # exit 1 when docs/api.md is out of date

The public names are those of the namespaces in NAMESPACES: a module's ``__all__``,
or, where a module has none, its names that do not start with ``_`` (submodules
aside). An object reachable from several namespaces is documented once, in the
namespace nearest to where it is defined (``to_static`` under ``dy2stat.jit``), and
listed as an alias elsewhere. A class lists the public methods and properties it
defines itself or takes from a base that is not documented here (members of a
documented base are documented there). tests/examples/test_api_doc.py regenerates
the page and compares, and checks that every public name has a docstring.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "api.md"

# (namespace, its public names: None for __all__ or the module's own public names)
NAMESPACES = [
    ("dy2stat", None),
    ("dy2stat.autograd", ["PyLayer", "PyLayerContext", "backward", "enable_grad", "grad",
                          "is_grad_enabled", "no_grad"]),
    ("dy2stat.nn", None),
    ("dy2stat.nn.functional", None),
    ("dy2stat.nn.initializer", None),
    ("dy2stat.optimizer", None),
    ("dy2stat.optimizer.lr", None),
    ("dy2stat.regularizer", None),
    ("dy2stat.jit", None),
    ("dy2stat.onnx", None),
    ("dy2stat.static", None),
    ("dy2stat.static.nn", None),
    ("dy2stat.io", None),
    ("dy2stat.distributed", None),
    ("dy2stat.metric", None),
    ("dy2stat.hapi", None),
    ("dy2stat.hapi.callbacks", None),
    ("dy2stat.vision", None),
    ("dy2stat.vision.datasets", None),
    ("dy2stat.vision.models", None),
    ("dy2stat.vision.transforms", None),
]

HEADER = """\
# API reference

Every public name of dy2stat, with its signature and docstring. This page is
generated: `python docs/api_reference.py` rewrites it from the code, and a test
fails when it is out of date (or when a public name has no docstring). The
guides say how the pieces fit: [getting-started.md](getting-started.md),
[ops.md](ops.md), [layers.md](layers.md), [conversion.md](conversion.md),
[syntax.md](syntax.md).

Names are given with the namespace they are documented in; `d2s` is `dy2stat`
(`import dy2stat as d2s`). Tensor methods that are the functions of `dy2stat`
with the tensor first (`x.sum(axis=1)` is `d2s.sum(x, axis=1)`) carry those
functions' docstrings.
"""


def public_names(module, names) -> list[str]:
    if names is None:
        names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return sorted(n for n in names if not inspect.ismodule(getattr(module, n)))


def home(obj, namespaces: list[str]) -> str:
    """The namespace that documents ``obj``: the one whose path is the longest prefix of
    the module that defines it (the first that holds it, for values)."""
    defined_in = getattr(obj, "__module__", None) or ""
    prefixes = [ns for ns in namespaces if defined_in == ns or defined_in.startswith(ns + ".")]
    return max(prefixes, key=len) if prefixes else namespaces[0]


def is_documented_value(obj) -> bool:
    """Functions and classes carry docstrings; plain values (dtypes) are shown as values."""
    return inspect.isclass(obj) or callable(obj)


def _default(value) -> str:
    if inspect.isclass(value) or inspect.isfunction(value):
        return value.__qualname__
    text = repr(value)
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def signature(obj) -> str:
    """``(a, b=1, *args)`` without annotations, with stable reprs of defaults."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    parts, star_done = [], False
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star_done:
                parts.append("*")
                star_done = True
            parts.append(p.name if p.default is p.empty else f"{p.name}={_default(p.default)}")
    return "(" + ", ".join(parts) + ")"


def method_signature(cls, name: str) -> str:
    """A method's signature as called on an instance (without ``self``)."""
    raw = inspect.getattr_static(cls, name)
    text = signature(getattr(cls, name))
    if isinstance(raw, (staticmethod, classmethod)):
        return text
    return re.sub(r"^\(\w+(, )?", "(", text)


def _doc(obj) -> str:
    """The docstring of ``obj``; a class's own (``inspect.getdoc`` would give a base's)."""
    if inspect.isclass(obj):
        return inspect.cleandoc(vars(obj).get("__doc__") or "")
    return inspect.getdoc(obj) or ""


def _summary(doc: str) -> str:
    return " ".join(doc.split("\n\n", 1)[0].split())


def members(cls, documented_classes: set) -> list[tuple[str, object, str]]:
    """(name, attribute, kind) of the public members ``cls`` shows: its own and those of
    bases that are not documented classes (dy2stat's only)."""
    out = []
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is None or not owner.__module__.startswith("dy2stat"):
            continue
        if owner is not cls and owner in documented_classes:
            continue
        raw = vars(owner)[name]
        if isinstance(raw, property):
            out.append((name, raw, "property"))
        elif isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw):
            out.append((name, getattr(cls, name), "method"))
        elif inspect.isclass(raw):
            out.append((name, raw, "class"))
    return out


def member_doc(cls, name: str, attr, kind: str) -> str:
    if kind == "property":
        return inspect.getdoc(attr) or ""
    return inspect.getdoc(getattr(cls, name)) or ""


def collect():
    """{namespace: [(name, obj)]}, {id(obj): (home namespace, name there)}, and the
    documented classes."""
    listing = {}
    for ns, names in NAMESPACES:
        module = importlib.import_module(ns)
        listing[ns] = [(n, getattr(module, n)) for n in public_names(module, names)]
    places = {}  # id(obj) -> [(namespace, name)], in namespace order
    for ns, entries in listing.items():
        for n, obj in entries:
            places.setdefault(id(obj), []).append((ns, n))
    homes = {}
    for entries in listing.values():
        for _, obj in entries:
            where = places[id(obj)]
            if id(obj) not in homes:
                ns_home = (home(obj, [w for w, _ in where]) if is_documented_value(obj)
                           else where[0][0])
                there = [place for place in where if place[0] == ns_home]
                # an alias (``assign = clone``) is listed under the object's own name
                own = [place for place in there if place[1] == getattr(obj, "__name__", None)]
                homes[id(obj)] = (own or there)[0]
    classes = {obj for entries in listing.values() for _, obj in entries if inspect.isclass(obj)}
    return listing, homes, classes


def missing_docstrings() -> list[str]:
    """Public names (and the members their classes show) without a docstring."""
    listing, homes, classes = collect()
    missing = []
    for ns, entries in listing.items():
        for n, obj in entries:
            if homes[id(obj)] != (ns, n) or not is_documented_value(obj):
                continue
            if not _doc(obj):
                missing.append(f"{ns}.{n}")
            if inspect.isclass(obj):
                for name, attr, kind in members(obj, classes):
                    if not member_doc(obj, name, attr, kind):
                        missing.append(f"{ns}.{n}.{name}")
    return missing


def render() -> str:
    listing, homes, classes = collect()
    lines = [HEADER, "## Namespaces\n"]
    for ns, _ in NAMESPACES:
        count = sum(1 for n, obj in listing[ns] if homes[id(obj)] == (ns, n))
        lines.append(f"- [`{ns}`](#{ns.replace('.', '')}): {count} name{'' if count == 1 else 's'}")
    lines.append("")
    for ns, _ in NAMESPACES:
        module = importlib.import_module(ns)
        lines += [f"## {ns}", "", _summary(_doc(module)), ""]
        aliases = []
        for n, obj in listing[ns]:
            where, name = homes[id(obj)]
            if (where, name) != (ns, n):
                aliases.append(f"`{n}` (`{where}.{name}`)")
                continue
            lines += entry(ns, n, obj, classes)
        if aliases:
            lines += ["Also here: " + ", ".join(aliases) + ".", ""]
    return "\n".join(lines).rstrip() + "\n"


def entry(ns: str, name: str, obj, classes: set) -> list[str]:
    if not is_documented_value(obj):
        return [f"### `{ns}.{name}`", "", f"`{_default(obj)}`", ""]
    kind = "class " if inspect.isclass(obj) else ""
    out = [f"### {kind}`{ns}.{name}{signature(obj)}`", "", _doc(obj), ""]
    if inspect.isclass(obj):
        bases = [b for b in obj.__mro__[1:] if b in classes]
        if bases:
            out += [f"Inherits the members of `{bases[0].__qualname__}`.", ""]
        for member, attr, member_kind in members(obj, classes):
            text = _summary(member_doc(obj, member, attr, member_kind))
            if member_kind == "property":
                out.append(f"- `.{member}` (property): {text}")
            elif member_kind == "class":
                out.append(f"- `.{member}` (class): {text}")
            else:
                out.append(f"- `.{member}{method_signature(obj, member)}`: {text}")
        out.append("")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check docs/api.md")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if PAGE.read_text() != text:
            print("docs/api.md is out of date: run python docs/api_reference.py")
            return 1
        return 0
    PAGE.write_text(text)
    missing = missing_docstrings()
    if missing:
        print(f"{len(missing)} public names have no docstring:", *missing, sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
