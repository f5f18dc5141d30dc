"""Early `return` -> one exit at the end of the function.

    def f(x):                       def f(x):
        if c:                           do_return_0 = False
            return a                    retval_0 = _jst.UndefinedReturnValue()
        b                  ->           if c:
        return d                            retval_0 = a
                                            do_return_0 = True
                                        if not do_return_0:
                                            b
                                            retval_0 = d
                                            do_return_0 = True
                                        return retval_0

A loop that holds a `return` also stops on the flag. Where the end of the function may be
reached without a `return`, `retval_0 = None` is set there (what Python returns). Functions
whose only `return` is their last statement are left as they are. Attaches RETURN_VALUE
(the name of retval_0) and RETURN_FLAG (do_return_0) to the function, and GUARD to each
`if not do_return_0:` it makes. (Where the function has returned -- a branch that set the
flag, the false branch of a guard -- a name left unassigned is never read.)
Requires: nothing; runs after break_continue.
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import anno, templates, transformer
from dy2stat.dy2static.passes import jumps

_LOOPS = (gast.While, gast.For)


class _Returns(transformer.Base):
    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.FunctionDef:
        self.generic_visit(node)  # nested functions first: their returns are theirs
        returns = [n for n in _own(node.body) if isinstance(n, gast.Return)]
        if not returns or returns == node.body[-1:]:
            return node
        do_return, retval = self.new_name("do_return"), self.new_name("retval")
        for loop in _own(node.body):
            if isinstance(loop, _LOOPS) and jumps.contains_in_body_deep(loop, gast.Return):
                jumps.add_loop_test(loop, do_return)
        falls_off = not _always_returns(node.body)

        def replace(ret: gast.Return) -> list:
            value = ret.value if ret.value is not None else gast.Constant(None, None)
            # The value first: a `return f()` whose f raises has not returned (an
            # enclosing `try` may catch the error and go on).
            new = templates.replace("retval = value\ndo_return = True", do_return=do_return,
                                    retval=retval, value=value)
            transformer.stamp(new, ret)
            return new

        body = jumps.rewrite(node.body, gast.Return, do_return, replace, True,
                             lambda guard: anno.setanno(guard, anno.Transform.GUARD,
                                                        do_return))
        prologue = templates.replace(
            "do_return = False\nretval = helpers.UndefinedReturnValue()",
            do_return=do_return, retval=retval, helpers=self.ctx.helpers)
        epilogue = templates.replace("if not do_return:\n    retval = None",
                                     do_return=do_return, retval=retval) if falls_off else []
        exit_ = templates.replace("return retval", retval=retval)
        transformer.stamp(prologue, node.body[0])
        transformer.stamp(epilogue + exit_, node.body[-1])
        node.body = prologue + body + epilogue + exit_
        anno.setanno(node, anno.Transform.RETURN_VALUE, retval)
        anno.setanno(node, anno.Transform.RETURN_FLAG, do_return)
        return node


def _own(stmts: list):
    """Statements of a body, nested blocks included, not entering nested defs or classes."""
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _own(getattr(stmt, field, []))
        for handler in getattr(stmt, "handlers", []):
            yield from _own(handler.body)


def _always_returns(stmts: list) -> bool:
    """Whether every path through `stmts` ends in a return or raise (a syntactic check)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (gast.Return, gast.Raise)):
        return True
    if isinstance(last, gast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    if isinstance(last, gast.With):
        return _always_returns(last.body)
    if isinstance(last, gast.Try):
        if last.finalbody and _always_returns(last.finalbody):
            return True
        return _always_returns(last.body + last.orelse) and all(
            _always_returns(h.body) for h in last.handlers)
    return False


def transform(node: gast.AST, ctx) -> gast.AST:
    return _Returns(ctx).visit(node)
