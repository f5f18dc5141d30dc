"""`if`, `while` and `for` -> helper calls with the bodies as closures.

    if x > 0:                       def if_true_0():
        y = x                           nonlocal y
    else:                  ->           y = x
        y = -x                      def if_false_0():
                                        nonlocal y
                                        y = -x
                                    def get_state_0():
                                        return (y,)
                                    def set_state_0(values_0):
                                        nonlocal y
                                        (y,) = values_0
                                    _jst.convert_ifelse(x > 0, if_true_0, if_false_0,
                                                        get_state_0, set_state_0, ('y',))

The *state* of a statement -- what get_state/set_state read and assign, and what the bodies
declare `nonlocal` -- is the names it changes that are live before or after it (for an `if`
the branch outputs, for a loop the carried values), from the liveness annotations. An
attribute (`self.h`) is a name of its own; a subscript (`x[0]`) stands for its container.
A state name that may be undefined before the statement is bound to `_jst.Undefined(name)`.

Requires: the analyses (run here), and break_continue (no `break`, `continue` or `else` on
loops are left; a `for` may carry an EXTRA_TEST).
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import analysis, anno, templates, transformer
from dy2stat.dy2static.analysis import liveness
from dy2stat.dy2static.analysis.qual_names import QN

_STATE = """
    def get_state():
        return state
    def set_state(values):
        nonlocal state
        state = values
"""

_IF = """
    def if_true():
        nonlocal state
        body
    def if_false():
        nonlocal state
        orelse
"""

_IF_WITHOUT_ELSE = """
    def if_true():
        nonlocal state
        body
    def if_false():
        pass
"""

_WHILE = """
    def loop_test():
        return test
    def loop_body():
        nonlocal state
        body
"""

_FOR = """
    def loop_body(item):
        nonlocal state
        target = item
        body
"""


class _ControlFlow(transformer.Base):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.values_name = ctx.namer.new("values")

    def visit_If(self, node: gast.If) -> list[gast.stmt]:
        self.generic_visit(node)
        live = anno.getanno(node, anno.Static.LIVE_VARS_IN)
        state = _state_names(set(liveness.branch_outputs(node)) | _changed(node, live))
        if_true, if_false = self.new_name("if_true"), self.new_name("if_false")
        defs = templates.replace(_IF if node.orelse else _IF_WITHOUT_ELSE, if_true=if_true,
                                 if_false=if_false, state=state, body=node.body,
                                 orelse=node.orelse)
        get_state, set_state, accessors = self._accessors(state)
        call = templates.replace(
            "helpers.convert_ifelse(test, if_true, if_false, get_state, set_state, names)",
            helpers=self.ctx.helpers, test=node.test, if_true=if_true, if_false=if_false,
            get_state=get_state, set_state=set_state, names=_constants(state))
        return self._undefined(node, state) + defs + accessors + call

    def visit_While(self, node: gast.While) -> list[gast.stmt]:
        self.generic_visit(node)
        state = _state_names(liveness.loop_carried(node))
        loop_test, loop_body = self.new_name("while_test"), self.new_name("while_body")
        defs = templates.replace(_WHILE, loop_test=loop_test, loop_body=loop_body,
                                 test=node.test, state=state, body=node.body)
        get_state, set_state, accessors = self._accessors(state)
        call = templates.replace(
            "helpers.convert_while_loop(loop_test, loop_body, get_state, set_state, names)",
            helpers=self.ctx.helpers, loop_test=loop_test, loop_body=loop_body,
            get_state=get_state, set_state=set_state, names=_constants(state))
        return self._undefined(node, state) + defs + accessors + call

    def visit_For(self, node: gast.For) -> list[gast.stmt]:
        self.generic_visit(node)
        state = _state_names(liveness.loop_carried(node))
        loop_body, item = self.new_name("for_body"), self.new_name("item")
        defs = templates.replace(_FOR, loop_body=loop_body, item=item, target=node.target,
                                 state=state, body=node.body)
        extra = anno.getanno(node, anno.Transform.EXTRA_TEST, None)
        extra_test = "None"
        if extra is not None:
            extra_test = self.new_name("extra_test")
            defs += templates.replace("def extra_test():\n    return test",
                                      extra_test=extra_test, test=extra)
        get_state, set_state, accessors = self._accessors(state)
        call = templates.replace(
            "helpers.convert_for_loop(iterable, extra_test, loop_body, get_state, set_state, "
            "names)", helpers=self.ctx.helpers, iterable=node.iter, extra_test=extra_test,
            loop_body=loop_body, get_state=get_state, set_state=set_state,
            names=_constants(state))
        return self._undefined(node, state) + defs + accessors + call

    def _accessors(self, state: list[str]) -> tuple[str, str, list[gast.stmt]]:
        """The names of get_state/set_state and their defs (None and none without state)."""
        if not state:
            return "None", "None", []
        get_state, set_state = self.new_name("get_state"), self.new_name("set_state")
        defs = templates.replace(_STATE, get_state=get_state, set_state=set_state,
                                 state=state, values=self.values_name)
        return get_state, set_state, defs

    def _undefined(self, node: gast.stmt, state: list[str]) -> list[gast.stmt]:
        """`y = _jst.Undefined('y')` for the plain state names some path leaves unbound."""
        defined = anno.getanno(node, anno.Static.DEFINED_VARS_IN)
        out = []
        for name in state:
            if name.isidentifier() and defined.maybe_undefined(name):
                out += templates.replace("name = helpers.Undefined(text)", name=name,
                                         helpers=self.ctx.helpers,
                                         text=gast.Constant(name, None))
        return out


def _changed(node: gast.stmt, live: frozenset) -> set[QN]:
    """What `node` changes that is live before it (read before it is written)."""
    return {q for q in anno.getanno(node, anno.Static.SCOPE).modified if q in live}


def _state_names(qns) -> list[str]:
    """State names as source text, a subscript standing for its container (`x[0]` -> `x`)."""
    names = set()
    for qn in qns:
        while qn.key is not None:
            qn = qn.parent
        names.add(str(qn))
    return sorted(names)


def _constants(names: list[str]) -> gast.Tuple:
    return gast.Tuple([gast.Constant(n, None) for n in names], gast.Load())


def transform(node: gast.AST, ctx) -> gast.AST:
    analysis.resolve(node)
    return _ControlFlow(ctx).visit(node)
