"""What the break/continue and return passes share: finding jumps, guarding the statements
after one with `if not flag:`, and marking the `if`s a branch of which always leaves."""

from __future__ import annotations

import gast

from dy2stat.dy2static import anno, templates, transformer

_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)
_LOOPS = (gast.While, gast.For, gast.AsyncFor)
_EXITS = (gast.Return, gast.Break, gast.Continue, gast.Raise)


def contains(node: gast.AST, kind: type, enter_loops: bool) -> bool:
    """Whether `node` (a statement) is or holds a `kind` jump of this function/loop."""
    if isinstance(node, kind):
        return True
    if isinstance(node, _SCOPES) or (not enter_loops and isinstance(node, _LOOPS)):
        return False
    return any(contains(c, kind, enter_loops) for c in gast.iter_child_nodes(node)
               if isinstance(c, (gast.stmt, gast.excepthandler)))


def rewrite(stmts: list, kind: type, flag: str, replace, enter_loops: bool,
            on_guard=None) -> list:
    """`stmts` with each `kind` jump replaced by `replace(jump)` (statements that set
    `flag`), and the statements after anything that may jump wrapped in `if not flag:`
    (each such guard is handed to `on_guard`) -- or, after an `if` one branch of which
    always leaves (by a jump of any kind, or a raise), moved into its other branch (where
    what that branch assigns is read)."""
    out: list = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, kind):
            out.extend(replace(stmt))
            return out  # the rest of the block is unreachable
        if not contains(stmt, kind, enter_loops):
            out.append(stmt)
            continue
        rest = stmts[i + 1:]
        if isinstance(stmt, gast.If) and rest:
            leaves = [always_leaves(branch) for branch in (stmt.body, stmt.orelse)]
            if any(leaves):  # the rest only runs after the other branch: move it there
                if not all(leaves):
                    (stmt.orelse if leaves[0] else stmt.body).extend(rest)
                rest = []
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(stmt, field, None), list):
                setattr(stmt, field, rewrite(getattr(stmt, field), kind, flag, replace,
                                             enter_loops, on_guard))
        for handler in getattr(stmt, "handlers", []):
            handler.body = rewrite(handler.body, kind, flag, replace, enter_loops, on_guard)
        out.append(stmt)
        rest = rewrite(rest, kind, flag, replace, enter_loops, on_guard)
        if rest:
            guard = templates.replace("if not flag:\n    rest", flag=flag, rest=rest)
            transformer.stamp(guard, rest[0])
            if on_guard is not None:
                on_guard(guard[0])
            out.extend(guard)
        return out
    return out


def always_leaves(stmts: list) -> bool:
    """Whether every path through `stmts` ends in a jump (return, break, continue) or a raise:
    what follows them never runs after them (a syntactic check)."""
    return _leaving(stmts) is not None


_KINDS = {gast.Return: "return", gast.Raise: "raise", gast.Break: "break",
          gast.Continue: "continue"}


def mark_leaving(node: gast.AST) -> None:
    """Attach LEAVES to each `if` under `node` a branch of which always leaves (while the
    jumps are still statements): per branch, the kinds of jump its paths leave by, or None."""
    for child in gast.walk(node):
        if isinstance(child, gast.If):
            leaves = (_leaving(child.body), _leaving(child.orelse))
            if leaves != (None, None):
                anno.setanno(child, anno.Transform.LEAVES, leaves)


def _leaving(stmts: list) -> frozenset | None:
    """The kinds of jump that every path through `stmts` ends in one of (None: some path
    goes on after them)."""
    kinds: set[str] = set()
    for stmt in stmts:
        if isinstance(stmt, _EXITS):
            return frozenset(kinds | {_KINDS[type(stmt)]})
        kinds |= _jumps_in(stmt)
        if isinstance(stmt, gast.If):
            ways = [_leaving(stmt.body), _leaving(stmt.orelse)]
        elif isinstance(stmt, gast.Try):  # a finally that leaves: every path does
            finally_ = _leaving(stmt.finalbody)
            ways = [finally_] if finally_ is not None else \
                [_leaving(stmt.body + stmt.orelse), *(_leaving(h.body) for h in stmt.handlers)]
        else:
            continue
        if all(way is not None for way in ways):
            return frozenset(kinds.union(*ways))
    return None


def _jumps_in(stmt: gast.AST, in_loop: bool = False) -> set[str]:
    """The kinds of jump in `stmt` that leave past it: returns and raises, and the breaks and
    continues not of an inner loop."""
    if isinstance(stmt, _EXITS):
        kind = _KINDS[type(stmt)]
        return set() if in_loop and kind in ("break", "continue") else {kind}
    if isinstance(stmt, _SCOPES):
        return set()
    in_loop = in_loop or isinstance(stmt, _LOOPS)
    return set().union(*(_jumps_in(c, in_loop) for c in gast.iter_child_nodes(stmt)
                         if isinstance(c, (gast.stmt, gast.excepthandler))))


def add_loop_test(loop: gast.While | gast.For, flag: str) -> None:
    """Make `loop` stop once `flag` is set: `while not flag and test`, or for a `for` loop
    an EXTRA_TEST checked before each iteration."""
    if isinstance(loop, gast.While):
        loop.test = templates.replace_as_expression("not flag and test", flag=flag,
                                                    test=loop.test)
        transformer.stamp(loop.test, loop)
        return
    extra = anno.getanno(loop, anno.Transform.EXTRA_TEST, None)
    if extra is None:
        test = templates.replace_as_expression("not flag", flag=flag)
    else:
        test = templates.replace_as_expression("not flag and extra", flag=flag, extra=extra)
    transformer.stamp(test, loop)
    anno.setanno(loop, anno.Transform.EXTRA_TEST, test)


def contains_in_body(loop: gast.While | gast.For, kind: type) -> bool:
    """Whether the body of `loop` holds a `kind` jump of its own (not of an inner loop)."""
    return any(contains(stmt, kind, False) for stmt in loop.body)


def contains_in_body_deep(loop: gast.While | gast.For, kind: type) -> bool:
    """Whether the body of `loop` or of a loop inside it holds a `kind` jump (a return)."""
    return any(contains(stmt, kind, True) for stmt in loop.body)
