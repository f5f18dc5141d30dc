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
declare `nonlocal` -- is what it changes that is live after it or read before being written
in it: for an `if` its branch outputs and what a branch reads first, for a loop its carried
values; from the liveness annotations. An
attribute (`self.h`) is a name of its own; a subscript (`x[0]`) stands for its container.
A state name that may be undefined before the statement is bound to `_jst.Undefined(name)`
at the start of the function or generated body it is a local of (there it has no value yet;
binding it right before the statement would drop the value a path did give it).

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
        nonlocal locals_
        global globals_
        state = values
"""

_IF = """
    def if_true():
        nonlocal locals_
        global globals_
        body
    def if_false():
        nonlocal locals_
        global globals_
        orelse
"""

_IF_WITHOUT_ELSE = """
    def if_true():
        nonlocal locals_
        global globals_
        body
    def if_false():
        pass
"""

_WHILE = """
    def loop_test():
        return test
    def loop_body():
        nonlocal locals_
        global globals_
        body
"""

_FOR = """
    def loop_body(item):
        nonlocal locals_
        global globals_
        target = item
        body
"""


class _ControlFlow(transformer.Base):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.values_name = ctx.namer.new("values")
        self.globals: list[set[str]] = [set()]  # what the enclosing functions declare global
        # The plain names each enclosing function binds (or declares global or nonlocal).
        self.bound: list[set[str] | None] = [None]
        # ... and those of them another scope sees (declared global or nonlocal).
        self.shared: list[set[str]] = [set()]
        self.return_values: list[str | None] = [None]  # their RETURN_VALUE
        self.return_flags: list[str | None] = [None]  # their RETURN_FLAG
        # The loops around the statement in the function: (LOOP_FLAGS, carried names).
        self.loops: list[list[tuple]] = [[]]
        # Per function or generated body: the state names some path leaves unbound.
        self.unbound: list[set[str]] = [set()]
        # The lines of the `try`s (with handlers) around the statement in the function.
        self.trys: list[list[int]] = [[]]

    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.FunctionDef:
        scope = anno.getanno(node, anno.Static.BODY_SCOPE)
        self.globals.append(scope.globals)
        self.bound.append(scope.local_names | scope.globals | scope.nonlocals)
        self.shared.append(scope.globals | scope.nonlocals)
        self.return_values.append(anno.getanno(node, anno.Transform.RETURN_VALUE, None))
        self.return_flags.append(anno.getanno(node, anno.Transform.RETURN_FLAG, None))
        self.loops.append([])
        self.trys.append([])
        node.body = self._visit_body(node.body, ())
        self.trys.pop()
        self.globals.pop()
        self.bound.pop()
        self.shared.pop()
        self.return_values.pop()
        self.return_flags.pop()
        self.loops.pop()
        return node

    def _labels(self, state: list[str]) -> gast.Tuple:
        """What the helpers call the state in messages: its names (the return value's too)."""
        retval = self.return_values[-1]
        labels = [f"the return value ({n})" if n == retval else n for n in state]
        return gast.Tuple([gast.Constant(label, None) for label in labels], gast.Load())

    def _declared(self, state: list[str]) -> dict:
        """The bodies declare the state `global` where the function does, else `nonlocal`."""
        return {"locals_": [n for n in state if n not in self.globals[-1]],
                "globals_": [n for n in state if n in self.globals[-1]]}

    def visit_If(self, node: gast.If) -> list[gast.stmt]:
        # Read the branches' annotations before converting what is inside them.
        state = self._state(set(liveness.branch_outputs(node)) | _read_first(node))
        node.test = self.visit(node.test)
        node.body = self._visit_body(node.body, state)
        node.orelse = self._visit_body(node.orelse, state) if node.orelse else []
        if_true, if_false = self.new_name("if_true"), self.new_name("if_false")
        defs = templates.replace(_IF if node.orelse else _IF_WITHOUT_ELSE, if_true=if_true,
                                 if_false=if_false, body=node.body, orelse=node.orelse,
                                 **self._declared(state))
        get_state, set_state, accessors = self._accessors(state)
        keywords, exits, left = "", self._exits(node, state), self._left(node, state)
        if exits is not None:
            keywords += ", exits=exits"
        guard = anno.getanno(node, anno.Transform.GUARD, None)
        if guard is not None:
            keywords += ", guard=flag"
        if left is not None:
            keywords += ", left=left"
        dead = self._dead(node, state)
        if dead:
            keywords += ", dead=dead"
        if self.trys[-1]:
            keywords += ", caught=caught"
        call = templates.replace(
            "helpers.convert_ifelse(test, if_true, if_false, get_state, set_state, names"
            f"{keywords})", helpers=self.ctx.helpers, test=node.test, if_true=if_true,
            if_false=if_false, get_state=get_state, set_state=set_state,
            names=self._labels(state), exits=exits, flag=gast.Constant(guard, None),
            left=left, dead=gast.Tuple([gast.Constant(n, None) for n in dead], gast.Load()),
            caught=gast.Constant(self.trys[-1][-1] if self.trys[-1] else None, None))
        self._note_undefined(node, state)
        return defs + accessors + call

    def visit_Try(self, node: gast.Try) -> gast.Try:
        """A `try` with handlers: the `if`s of its body learn its line (an error a tensor
        branch raises there is refused: the handlers could not catch it at run time)."""
        if not node.handlers:
            return self.generic_visit(node)
        self.trys[-1].append(node.lineno)
        node.body = self.visit_block(node.body)
        self.trys[-1].pop()
        for handler in node.handlers:
            handler.body = self.visit_block(handler.body)
        node.orelse = self.visit_block(node.orelse)
        node.finalbody = self.visit_block(node.finalbody)
        return node

    def _exits(self, node: gast.If, state: list[str]) -> gast.Dict | None:
        """`{flag: names}` for the jump flags among the state (or the guard's): where a
        branch set the flag, what it leaves unassigned of `names` is never read -- of any
        name (None) for the return flag, of the loop's own (not carried) for its flags."""
        exits = {}
        if self.return_flags[-1] is not None:
            exits[self.return_flags[-1]] = gast.Constant(None, None)
        if self.loops[-1]:
            own = gast.Tuple([gast.Constant(n, None) for n in self._own_names(state)],
                             gast.Load())
            exits.update((flag, own) for flag in self.loops[-1][-1][0])
        guard = anno.getanno(node, anno.Transform.GUARD, None)
        exits = {f: v for f, v in exits.items() if f in state or f == guard}
        if not exits:
            return None
        return gast.Dict([gast.Constant(f, None) for f in exits], list(exits.values()))

    def _dead(self, node: gast.If, state: list[str]) -> list[str]:
        """The function's own plain names in the state that nothing reads after the `if`
        (state because a branch reads them first): no other scope sees them either."""
        live = {str(q) for q in anno.getanno(node, anno.Static.LIVE_VARS_OUT)}
        own = self.bound[-1] or set()
        jumps = {self.return_values[-1], self.return_flags[-1]}
        jumps.update(f for loop in self.loops[-1] for f in loop[0])
        return [n for n in state if n.isidentifier() and n in own and n not in live
                and n not in self.shared[-1] and n not in jumps]

    def _left(self, node: gast.If, state: list[str]) -> gast.Tuple | None:
        """Per branch that always leaves by jumps of more than one kind (LEAVES; with one
        kind, its flag is True where the branch ends), what it leaves unread: everything
        (True) where it leaves the function, else the innermost loop's own names."""
        leaves = anno.getanno(node, anno.Transform.LEAVES, None)
        if leaves is None or all(kinds is None or len(kinds) == 1 for kinds in leaves):
            return None
        leaves = [kinds if kinds is not None and len(kinds) > 1 else None for kinds in leaves]
        own = gast.Tuple([gast.Constant(n, None) for n in self._own_names(state)],
                         gast.Load())
        return gast.Tuple([gast.Constant(None, None) if kinds is None else
                           gast.Constant(True, None) if kinds <= {"return", "raise"} else own
                           for kinds in leaves], gast.Load())

    def _own_names(self, state: list[str]) -> list[str]:
        """The state names the innermost loop neither carries nor flags jumps with."""
        if not self.loops[-1]:
            return []
        flags, carried = self.loops[-1][-1]
        return [n for n in state if n not in carried and n not in flags]

    def _visit_loop_body(self, node: gast.While | gast.For, state: list[str]) -> list:
        carried = anno.getanno(node, anno.Transform.CARRIED, frozenset())
        self.loops[-1].append((anno.getanno(node, anno.Transform.LOOP_FLAGS, ()), carried))
        body = self._visit_body(node.body, state)
        self.loops[-1].pop()
        return body

    def _state(self, qns) -> list[str]:
        """The state names of a statement changing `qns`. A plain name the function never
        binds (a module `d2s` whose `add` is called, a global list appended to) is changed
        in place, not rebound: carrying it would make it a local of the function."""
        bound = self.bound[-1]
        return [n for n in _state_names(qns) if bound is None or "." in n or n in bound]

    def visit_While(self, node: gast.While) -> list[gast.stmt]:
        state = self._state(liveness.loop_carried(node))
        node.test = self.visit(node.test)
        node.body = self._visit_loop_body(node, state)
        loop_test, loop_body = self.new_name("while_test"), self.new_name("while_body")
        defs = templates.replace(_WHILE, loop_test=loop_test, loop_body=loop_body,
                                 test=node.test, body=node.body, **self._declared(state))
        get_state, set_state, accessors = self._accessors(state)
        call = templates.replace(
            "helpers.convert_while_loop(loop_test, loop_body, get_state, set_state, names)",
            helpers=self.ctx.helpers, loop_test=loop_test, loop_body=loop_body,
            get_state=get_state, set_state=set_state, names=self._labels(state))
        self._note_undefined(node, state)
        return defs + accessors + call

    def visit_For(self, node: gast.For) -> list[gast.stmt]:
        state = self._state(liveness.loop_carried(node))
        node.iter = self.visit(node.iter)
        node.body = self._visit_loop_body(node, state)
        loop_body, item = self.new_name("for_body"), self.new_name("item")
        defs = templates.replace(_FOR, loop_body=loop_body, item=item, target=node.target,
                                 body=node.body, **self._declared(state))
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
            names=self._labels(state))
        self._note_undefined(node, state)
        return defs + accessors + call

    def _accessors(self, state: list[str]) -> tuple[str, str, list[gast.stmt]]:
        """The names of get_state/set_state and their defs (None and none without state)."""
        if not state:
            return "None", "None", []
        get_state, set_state = self.new_name("get_state"), self.new_name("set_state")
        defs = templates.replace(_STATE, get_state=get_state, set_state=set_state,
                                 state=state, values=self.values_name,
                                 **self._declared(state))
        return get_state, set_state, defs

    def _visit_body(self, stmts: list, state) -> list:
        """The converted statements of a body that becomes a function declaring `state`
        nonlocal, with its own names that some path leaves unbound bound at its start."""
        self.unbound.append(set())
        stmts = self.visit_block(stmts)
        unbound = self.unbound.pop()
        self.unbound[-1].update(unbound & set(state))  # the enclosing function's names
        return self._bind_undefined(sorted(unbound - set(state))) + stmts

    def _note_undefined(self, node: gast.stmt, state: list[str]) -> None:
        """Remember the plain state names some path to `node` leaves unbound."""
        defined = anno.getanno(node, anno.Static.DEFINED_VARS_IN)
        self.unbound[-1].update(name for name in state
                                if name.isidentifier() and defined.maybe_undefined(name))

    def _bind_undefined(self, names: list[str]) -> list[gast.stmt]:
        """`y = _jst.Undefined('y')` for each of `names`."""
        out = []
        for name in names:
            out += templates.replace("name = helpers.Undefined(text)", name=name,
                                     helpers=self.ctx.helpers, text=gast.Constant(name, None))
        return out


def _read_first(node: gast.If) -> set[QN]:
    """What an `if` changes that a branch reads before writing it (so both branches must
    start from its value before the `if`)."""
    live = anno.getanno(node, anno.Static.LIVE_VARS_OUT)  # an empty branch reads what follows
    for branch in (node.body, node.orelse):
        if branch:
            live = live | anno.getanno(branch[0], anno.Static.LIVE_VARS_IN)
    return {q for q in anno.getanno(node, anno.Static.SCOPE).modified if q in live}


def _state_names(qns) -> list[str]:
    """State names as source text, a subscript standing for its container (`x[0]` -> `x`)."""
    names = set()
    for qn in qns:
        while qn.key is not None:
            qn = qn.parent
        names.add(str(qn))
    return sorted(names)


def transform(node: gast.AST, ctx) -> gast.AST:
    analysis.resolve(node)
    return _ControlFlow(ctx).visit(node)
