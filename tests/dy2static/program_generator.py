"""Random control-flow programs of the kind model code has, written as module source text.

`generate(seed, features)` writes a module whose entry point is a function `main(x, y, k, c,
flag)` or a Layer `Model` (its `forward` takes the same arguments), with the helper
functions and sublayers it calls, and the argument sets to call it with (`Program`).

Every program is valid, terminates and never reads a name some path leaves unbound, by
construction:

- a name has one kind for its whole life (`KINDS`);
- a scope holds the names that every path to the current point has assigned, and
  expressions read only those; after an `if` it is what the branches that fall through
  all assigned, after a loop what was assigned before the loop;
- `while` loops count with a counter that the body increments first (so `continue` cannot
  skip it), `range` bounds are small, and a loop never appends to the list it walks;
- Python floats are dyadic (0.25, -1.5, ...): float64 (eager) and float32 (a number the
  converted code made a tensor) compute the same values, and so take the same branches.

A *feature* names a construct; the generator writes only the constructs of the features it
is given (`FEATURES`), and records those it wrote (`Program.features`).
"""

from __future__ import annotations

import dataclasses
import os
import random

import numpy as np

from tests.dy2static.program_expressions import DYADIC, THRESHOLDS, Expr, Expressions

# Kinds of values: T a float32 tensor of the inputs' shape [B, D], S a 0-D float32 tensor,
# I/F/B a Python int/float/bool, L a non-empty Python list of T, M a sublayer (T -> T),
# O a Python float or None (read only by `opt is None or opt > c`).
KINDS = ("T", "S", "I", "F", "B", "L", "M", "O")

FEATURES = {
    "if": "if / else with Python and tensor predicates",
    "elif": "if / elif / else chains",
    "branch_outputs": "names assigned in every branch and read after the if",
    "while": "while loops with a Python counter, Python or tensor tests",
    "while_tensor_counter": "while loops counting with a 0-D tensor",
    "for_range": "for i in range(n), n a Python int",
    "for_range_tensor": "for i in range(n), n an int64 tensor",
    "for_list": "for over Python lists of numbers and of tensors",
    "for_layerlist": "for over a LayerList of sublayers with control flow of their own",
    "enumerate": "for j, t in enumerate(a list)",
    "break": "break under Python and tensor conditions",
    "continue": "continue under Python and tensor conditions",
    "return": "early return in nested branches and loops",
    "logic": "and / or / not, chained comparisons",
    "ifexp": "conditional expressions",
    "augassign": "augmented assignment",
    "lists": "lists appended in Python loops; len, [0], [-1], stack",
    "append_in_tensor_loop": "list.append inside a loop that becomes a while op",
    "append_in_tensor_if": "list.append in a branch of a tensor-dependent if (the branches "
                           "leave the list different lengths)",
    "habits": "eager habits: d2s.add calls, x.clamp, .item() in arithmetic, max/min of 0-D "
              "tensors, and/or giving a value",
    "helpers": "calls of helper functions with control flow",
    "layer": "a Layer entry point: attributes of self, a Linear, sublayers",
    "mixed_scalars": "arithmetic mixing Python numbers and tensors",
    "modulo": "Python and tensor int % int",
    # Constructs that once failed (and the ones in KNOWN_FAILING).
    "no_grad": "with d2s.no_grad(): inside converted code",
    "not_to_static": "a helper marked not_to_static",
    "wraps": "a helper under a functools.wraps decorator",
    "guarded_or": "x.mean() > c or opt is None or opt > c (opt may be None)",
    "try_return_call": "return f(...) inside try / except",
    "int32_counter": "a Python int summing an int32 tensor in a tensor-dependent loop",
    "kwargs_call": "the entry point called with keyword arguments out of order",
    "mutate_attribute": "a Layer attribute the forward reads, changed between calls",
    "batchnorm": "a BatchNorm1D among the sublayers (train mode: running statistics)",
    "repeated_output": "one tensor returned twice (return y, y), or two equal expressions",
    "mixed_jumps": "a branch that always jumps, by jumps of two kinds (if p: return / continue)",
    "append_in_guarded_loop": "list.append in a for over a LayerList that may break or return",
    "layer_call_in_lambda": "blk(...) of `for blk in self.blocks` inside an if-expression or "
                            "and/or, in a tensor-dependent loop",
    "stop_gradient_of_constants": "(a check) an output no input needing a gradient reaches "
                                  "has stop_gradient=True, as in eager",
}

# The constructs that fail today, each with its reason. The CI run leaves them out; remove
# an entry once its fix is in, and the property covers the construct again.
KNOWN_FAILING: dict[str, str] = {}

DEFAULT_FEATURES = frozenset(FEATURES) - frozenset(KNOWN_FAILING)

INDENT = "    "
# How many statements a body holds at most, about (entry point; helpers and sublayers: 10).
ENTRY_BUDGET = int(os.environ.get("DY2STAT_FUZZ_BUDGET", "24"))


@dataclasses.dataclass
class Program:
    source: str  # the module's text
    layer: bool  # entry point: `Model` (a Layer) or `main`
    params: list[str]  # the entry point's parameters (after self)
    inputs: list[tuple]  # argument sets: NumPy float32 arrays for tensors, else Python
    features: set[str]  # the features the source uses
    seed: int


def generate(seed: int, features=DEFAULT_FEATURES) -> Program:
    """A random program, the same for the same seed and features."""
    return _Generator(seed, frozenset(features)).program()


@dataclasses.dataclass
class _Loop:
    jumps: bool  # break / return allowed in the body
    static_jump: bool = False  # a jump under a tensor predicate: the rest of the body is a cond


@dataclasses.dataclass
class _Ctx:
    indent: int
    depth: int = 0
    loop: _Loop | None = None
    loops: int = 0
    cond: bool = False  # inside a branch of a tensor-dependent `if` (a cond op)
    tensor_loop: bool = False  # inside a loop that may become a while op
    guarded: bool = False  # inside a for over layers whose jumps may make it conds
    locked: frozenset = frozenset()  # loop counters, targets, walked lists: never assigned

    def inner(self, **changes) -> _Ctx:
        return dataclasses.replace(self, indent=self.indent + 1, depth=self.depth + 1,
                                   **changes)


@dataclasses.dataclass
class _Helper:
    name: str
    params: tuple[str, ...]  # kinds; the first is T
    returns: str  # T or S
    python_only: bool = False  # not_to_static: call with Python arguments only


class _Generator:
    def __init__(self, seed: int, features: frozenset) -> None:
        self.seed = seed
        self.rnd = random.Random(seed)
        self.features = features
        self.used: set[str] = set()
        self.helpers: list[_Helper] = []
        self.chunks: list[str] = []

    def on(self, feature: str, p: float = 1.0) -> bool:
        """Whether to write `feature` here: allowed, and drawn with probability p."""
        if feature in self.features and self.rnd.random() < p:
            self.used.add(feature)
            return True
        return False

    def program(self) -> Program:
        rnd = self.rnd
        self.dim = rnd.choice((3, 4))
        self.layer = self.on("layer", 0.5)
        self.guarded = self.on("guarded_or", 0.5)
        self.on("kwargs_call", 0.3)
        self.on("stop_gradient_of_constants")
        if self.layer:
            self.on("mutate_attribute", 0.5)
        header = ["import functools", "", "import dy2stat as d2s", "from dy2stat import nn", ""]
        if "wraps" in self.features:
            header += ["", "def traced(fn):", f"{INDENT}@functools.wraps(fn)",
                       f"{INDENT}def wrapper(*args, **kwargs):",
                       f"{INDENT * 2}return fn(*args, **kwargs) * 1.5",  # the wrapper counts
                       f"{INDENT}return wrapper", ""]
        for _ in range(rnd.choice((0, 1, 1, 2))):
            if "helpers" in self.features:
                self._helper()
        params = ["x", "y", "k", "c", "flag"] + (["opt"] if self.guarded else [])
        kinds = {"x": "T", "y": "T", "k": "I", "c": "F", "flag": "B"}
        if self.guarded:
            kinds["opt"] = "O"
        returns = rnd.choice((["T"], ["T"], ["S"], ["T", "S"], ["T", "T"]))
        if self.layer:
            self._model(params, kinds, returns)
        else:
            body = _Body(self, kinds, returns, attrs={}, layers=[], fixed={"k"},
                         budget=ENTRY_BUDGET)
            self.chunks.append(body.function("main", params, size=rnd.randint(3, 6)))
        source = "\n".join(header) + "\n\n" + "\n\n\n".join(self.chunks) + "\n"
        return Program(source, self.layer, params, self._inputs(), self.used, self.seed)

    # ------------------------------------------------------------------ parts
    def _helper(self) -> None:
        rnd = self.rnd
        name = f"helper{len(self.helpers)}"
        second = rnd.choice(("I", "F", "B", "S", "T"))
        returns = rnd.choice(("T", "T", "S"))
        decorator = None
        python_only = False
        if self.on("not_to_static", 0.3):
            decorator, python_only = "@d2s.jit.not_to_static", True
        elif self.on("wraps", 0.3):
            decorator = "@traced"
        body = _Body(self, {"a": "T", "b": second}, [returns], attrs={}, layers=[],
                     fixed={"b"} if second == "I" else set(), python_only=python_only)
        if not python_only:
            body.dyn.add("b")  # a caller may pass a tensor (a number that became one)
        text = body.function(name, ["a", "b"], size=rnd.randint(1, 3))
        self.chunks.append(f"{decorator}\n{text}" if decorator else text)
        self.used.add("helpers")
        self.helpers.append(_Helper(name, ("T", second), returns, python_only))

    def _model(self, params, kinds, returns) -> None:
        rnd, d = self.rnd, self.dim
        block_attrs = {"s": "F", "n": "I"}
        block = _Body(self, {"h": "T"}, ["T"], attrs=block_attrs, layers=["self.linear"],
                      fixed={"self.n"})
        self.chunks.append("\n".join([
            "class Block(nn.Layer):",
            f"{INDENT}def __init__(self, s, n):",
            f"{INDENT * 2}super().__init__()",
            f"{INDENT * 2}self.s = s",
            f"{INDENT * 2}self.n = n",
            f"{INDENT * 2}self.linear = nn.Linear({d}, {d})",
            "",
            _indented(block.function("forward", ["self", "h"], size=rnd.randint(1, 3))),
        ]))
        blocks = [f"Block({rnd.choice(DYADIC)}, {rnd.randint(0, 3)})"
                  for _ in range(rnd.randint(1, 3))]
        if self.on("batchnorm", 0.3):
            blocks.insert(rnd.randint(0, len(blocks)), f"nn.BatchNorm1D({d})")
        self.threshold = rnd.choice(DYADIC)
        attrs = {"threshold": "F", "scale": "I", "use_bias": "B"}
        body = _Body(self, kinds, returns, attrs=attrs, layers=["self.linear"],
                     fixed={"k", "self.scale"}, blocks=True, budget=ENTRY_BUDGET)
        self.chunks.append("\n".join([
            "class Model(nn.Layer):",
            f"{INDENT}def __init__(self):",
            f"{INDENT * 2}super().__init__()",
            f"{INDENT * 2}self.threshold = {self.threshold}",
            f"{INDENT * 2}self.scale = {rnd.randint(0, 3)}",
            f"{INDENT * 2}self.use_bias = {rnd.choice((True, False))}",
            f"{INDENT * 2}self.linear = nn.Linear({d}, {d})",
            f"{INDENT * 2}self.blocks = nn.LayerList([{', '.join(blocks)}])",
            "",
            _indented(body.function("forward", ["self", *params], size=rnd.randint(3, 6))),
        ]))

    def _inputs(self) -> list[tuple]:
        """Argument sets: two or three signatures (batch size, Python values), each called
        with two or three draws of tensor values centred so tensor predicates go both ways."""
        rnd = self.rnd
        np_rnd = np.random.default_rng(self.seed)
        sets = []
        for batch in rnd.sample((1, 2, 3), rnd.choice((2, 3))):
            python = (rnd.randint(0, 3), rnd.choice(DYADIC), rnd.choice((True, False)))
            opt = (rnd.choice((None, 0.5, 1.5)),) if self.guarded else ()
            for _ in range(rnd.choice((2, 3))):
                x, y = (
                    (np_rnd.standard_normal((batch, self.dim)) + np_rnd.uniform(-1.5, 1.5))
                    .astype(np.float32) for _ in range(2))
                sets.append((x, y, *python, *opt))
        return sets


class _Body(Expressions):
    """Writes one function: its scope, the names that may be static, where jumps go."""

    def __init__(self, gen: _Generator, kinds: dict, returns: list, attrs: dict, layers: list,
                 fixed: set, blocks: bool = False, python_only: bool = False,
                 budget: int = 10) -> None:
        self.gen, self.rnd = gen, gen.rnd
        self.budget = budget  # statements left before only simple ones are written
        self.kinds = dict(kinds)  # the parameters' kinds
        self.returns = returns
        self.attrs = {f"self.{n}": k for n, k in attrs.items()}
        self.layers = layers  # sublayers callable on a T (`self.linear`)
        self.fixed = fixed  # names never assigned (small range bounds)
        self.blocks = blocks  # self.blocks is a LayerList
        self.python_only = python_only  # no tensor predicates (not_to_static code)
        self.lines: list[str] = []
        self.dyn: set[str] = set()  # Python names that may be static Variables when converted
        self.tensor_loops = 0  # loops around that may be while ops (they carry Variables)
        self.static_return = False  # a return under a tensor predicate happened before
        # Per open branch in the current loop body: the kinds of jump written in it.
        self.jump_kinds: list[set[str]] = []
        self.count = 0

    def function(self, name: str, params: list[str], size: int) -> str:
        self.lines = [f"def {name}({', '.join(params)}):"]
        scope = dict(self.kinds)
        if not self.block(scope, _Ctx(indent=1), size):
            self.emit(_Ctx(indent=1), self.return_text(scope, _Ctx(indent=1)))
        return "\n".join(self.lines)

    # ---------------------------------------------------------------- helpers
    def emit(self, ctx: _Ctx, text: str) -> None:
        self.lines.extend(INDENT * ctx.indent + line for line in text.split("\n"))

    def fresh(self, kind: str) -> str:
        self.count += 1
        prefix = {"T": "t", "S": "s", "I": "n", "F": "f", "B": "b", "L": "lst", "M": "blk"}
        return f"{prefix[kind]}{self.count}"

    def may_be_static(self, name: str) -> bool:
        """Whether a Python name may hold a static Variable here: it was assigned where
        conversion makes it one, or a while op around may carry it (if assigned later on)."""
        return name in self.dyn or (self.tensor_loops > 0 and not name.startswith("self."))

    def in_cond(self, ctx: _Ctx) -> bool:
        return ctx.cond or self.static_return or bool(ctx.loop and ctx.loop.static_jump)

    def assigned(self, name: str, scope: dict, kind: str, value: Expr, ctx: _Ctx) -> None:
        scope[name] = kind
        if value.static or self.in_cond(ctx) or ctx.tensor_loop:
            self.dyn.add(name)

    def names(self, scope: dict, kind: str, ctx: _Ctx | None = None, writable=False) -> list:
        out = [n for n, k in scope.items() if k == kind]
        if writable:
            out = [n for n in out if n not in ctx.locked and n not in self.fixed]
        return out

    # ------------------------------------------------------------- statements
    def block(self, scope: dict, ctx: _Ctx, size: int) -> bool:
        """Write `size` statements; True when the block always jumps (return/break/...)."""
        return any(self.statement(scope, ctx) for _ in range(size))

    def statement(self, scope: dict, ctx: _Ctx) -> bool:
        gen, rnd = self.gen, self.rnd
        self.budget -= 1
        compound = ctx.depth < 3 and self.budget > 0
        options = [(self.assign, 4), (self.reassign, 3)]
        if compound:
            options += [(self.if_stmt, 3 if "if" in gen.features else 0),
                        (self.while_stmt, 1.5 if "while" in gen.features else 0),
                        (self.for_stmt, 2 if ctx.loops < 2 else 0)]
        if ctx.loop is not None and ctx.loop.jumps:
            options.append((self.guarded_jump, 1.5))
        elif ctx.loop is None or ctx.loop.jumps:
            options.append((self.guarded_return, 0.7 if "return" in gen.features else 0))
        if self.may_append(ctx):
            options.append((self.list_stmt, 1.5 if "lists" in gen.features else 0))
        if "no_grad" in gen.features:
            options.append((self.no_grad_stmt, 0.5))
        if "int32_counter" in gen.features and compound and not self.python_only:
            options.append((self.int32_counter_stmt, 0.5))
        if "try_return_call" in gen.features and gen.helpers and (
                ctx.loop is None or ctx.loop.jumps):
            options.append((self.try_return_stmt, 0.3))
        fns, weights = zip(*options)
        return rnd.choices(fns, weights)[0](scope, ctx)

    def assign(self, scope, ctx) -> bool:
        kind = self.rnd.choice("TTTSSIFB")
        name, value = self.fresh(kind), self.expr(kind, scope)
        self.emit(ctx, f"{name} = {value}")
        self.assigned(name, scope, kind, value, ctx)
        return False

    def reassign(self, scope, ctx) -> bool:
        rnd = self.rnd
        names = [n for n in scope if scope[n] in "TSIFB" and n not in ctx.locked
                 and n not in self.fixed]
        if not names:
            return self.assign(scope, ctx)
        name = rnd.choice(names)
        kind = scope[name]
        if kind != "B" and self.gen.on("augassign", 0.5):
            op = rnd.choice(("+=", "-=", "*=")) if kind in "TSF" else rnd.choice(("+=", "-="))
            value = (self.scalar_literal() if op == "*=" else
                     self.expr(kind if kind != "T" or rnd.random() < 0.5 else "S", scope))
            self.emit(ctx, f"{name} {op} {value}")
        else:
            value = self.expr(kind, scope)
            self.emit(ctx, f"{name} = {value}")
        self.assigned(name, scope, kind, value, ctx)
        return False

    def if_stmt(self, scope, ctx) -> bool:
        gen, rnd = self.gen, self.rnd
        gen.used.add("if")
        arms = 1 + (rnd.random() < 0.6) + (gen.on("elif", 0.3))
        outputs = {}
        if arms > 1 and gen.on("branch_outputs", 0.6):
            outputs = {self.fresh(k): k for k in rnd.sample("TTSIFB", rnd.randint(1, 2))}
        falls, cond = [], self.in_cond(ctx)
        for arm in range(arms):
            last = arm == arms - 1 and arms > 1
            if not last:
                pred = self.predicate(scope)
                cond = cond or pred.static
                self.emit(ctx, f"{'if' if arm == 0 else 'elif'} {pred}:")
            else:
                self.emit(ctx, "else:")
            branch, inner = dict(scope), ctx.inner(cond=cond)
            self.jump_kinds.append(set())
            jumped = self.block(branch, inner, rnd.randint(1, 3))
            if not jumped and rnd.random() < 0.15:
                jumped = self.jump(branch, inner)
            self.jump_kinds.pop()
            if not jumped:
                for name, kind in outputs.items():
                    value = self.expr(kind, branch)
                    self.emit(inner, f"{name} = {value}")
                    self.assigned(name, branch, kind, value, inner)
                falls.append(branch)
        if arms == 1:
            falls.append(scope)
        if not falls:
            return True
        merged = {n: k for n, k in falls[0].items() if all(f.get(n) == k for f in falls)}
        scope.clear()
        scope.update(merged)
        return False

    def jump(self, scope, ctx) -> bool:
        """End a branch with break / continue / return where one may go; True if written."""
        loop = ctx.loop
        choices = []
        if loop is not None and loop.jumps:
            choices += [j for j in ("break", "continue") if j in self.gen.features]
        if (loop is None or loop.jumps) and "return" in self.gen.features:
            choices.append("return")
        kinds = set().union(*self.jump_kinds)
        if kinds and "mixed_jumps" not in self.gen.features:
            choices = [c for c in choices if {c} == kinds]  # one kind per branch
        if not choices:
            return False
        what = self.rnd.choice(choices)
        self.gen.used.add(what)
        if kinds and {what} != kinds:
            self.gen.used.add("mixed_jumps")
        for open_branch in self.jump_kinds:
            open_branch.add(what)
        if what == "return":
            self.emit(ctx, self.return_text(scope, ctx))
            if self.in_cond(ctx) or ctx.tensor_loop:
                self.static_return = True
        else:
            self.emit(ctx, what)
            if self.in_cond(ctx):
                loop.static_jump = True
        return True

    def guarded_jump(self, scope, ctx) -> bool:
        if not any(j in self.gen.features for j in ("break", "continue", "return")):
            return self.assign(scope, ctx)
        pred = self.predicate(scope)
        self.emit(ctx, f"if {pred}:")
        inner = ctx.inner(cond=self.in_cond(ctx) or pred.static)
        self.jump_kinds.append(set())
        if self.rnd.random() < 0.3:
            self.block(dict(scope), inner, 1)
        if not self.jump(scope, inner):
            self.emit(inner, "pass")
        self.jump_kinds.pop()
        return False

    def guarded_return(self, scope, ctx) -> bool:
        pred = self.predicate(scope)
        self.emit(ctx, f"if {pred}:")
        inner = ctx.inner(cond=self.in_cond(ctx) or pred.static)
        self.gen.used.add("return")
        self.emit(inner, self.return_text(scope, inner))
        if inner.cond or ctx.tensor_loop:
            self.static_return = True
        return False

    def return_text(self, scope, ctx) -> str:
        values = [str(self.expr(k, scope)) for k in self.returns]
        if "repeated_output" not in self.gen.features:  # no value twice (nor after CSE)
            values[1:] = [f"({v}) * {1 + 0.25 * i}" for i, v in enumerate(values[1:], 1)]
        elif self.returns[1:2] == self.returns[:1] and self.gen.on("repeated_output", 0.3):
            values[1] = values[0]
        return "return " + ", ".join(values)

    def loop_ctx(self, ctx: _Ctx, static: bool, locked) -> _Ctx:
        jumps = self.rnd.random() < 0.5
        return ctx.inner(loop=_Loop(jumps), loops=ctx.loops + 1, cond=self.in_cond(ctx),
                         tensor_loop=ctx.tensor_loop or static or jumps,
                         locked=ctx.locked | set(locked))

    def loop_body(self, scope, ctx) -> None:
        outer, self.jump_kinds = self.jump_kinds, []  # its jumps are its own
        self.tensor_loops += ctx.tensor_loop
        self.block(scope, ctx, self.rnd.randint(1, 3))
        self.tensor_loops -= ctx.tensor_loop
        self.jump_kinds = outer

    def while_stmt(self, scope, ctx) -> bool:
        gen, rnd = self.gen, self.rnd
        gen.used.add("while")
        bound = rnd.randint(1, 4)
        if gen.on("while_tensor_counter", 0.3) and not self.python_only:
            counter = self.fresh("S")
            self.emit(ctx, f"{counter} = d2s.zeros([])")
            test = Expr(f"{counter} < {bound}", True)
        else:
            counter = self.fresh("I")
            self.emit(ctx, f"{counter} = 0")
            test = Expr(f"{counter} < {bound}", self.may_be_static(counter))
        scope[counter] = "S" if counter.startswith("s") else "I"
        if rnd.random() < 0.7:
            extra = self.predicate(scope)
            joined = f"{test} and {extra}" if rnd.random() < 0.6 else f"{extra} and {test}"
            test = Expr(joined, test.static or extra.static)
        inner = self.loop_ctx(ctx, test.static, [counter])
        if inner.tensor_loop:
            self.dyn.add(counter)
        self.emit(ctx, f"while {test}:")
        self.emit(inner, f"{counter} += 1")
        self.loop_body(dict(scope), inner)
        return False

    def for_stmt(self, scope, ctx) -> bool:
        gen, rnd = self.gen, self.rnd
        forms = [f for f in ("for_range", "for_range_tensor", "for_list") if f in gen.features]
        if self.python_only and "for_range_tensor" in forms:
            forms.remove("for_range_tensor")
        lists = self.names(scope, "L")
        if lists and "lists" in gen.features:
            forms += ["list_var"] * 2 + (["enumerate"] if "enumerate" in gen.features else [])
        if self.blocks and "for_layerlist" in gen.features:
            forms += ["layerlist"] * 2
        if not forms:
            return self.assign(scope, ctx)
        form = rnd.choice(forms)
        body_scope = dict(scope)
        index = None
        if form == "for_range":
            gen.used.add(form)
            bound = self.range_bound(scope)
            target, iterable, static = self.fresh("I"), f"range({bound})", bound.static
            body_scope[target] = "I"
        elif form == "for_range_tensor":
            gen.used.add(form)
            count = self.fresh("T")
            t = self.expr("T", scope, depth=1)
            self.emit(ctx, f"{count} = ({t}[0] > {rnd.choice(THRESHOLDS)})"
                           ".astype('int64').sum()")
            target, iterable, static = self.fresh("I"), f"range({count})", True
            body_scope[target] = "I"
        elif form == "for_list":
            gen.used.add(form)
            if rnd.random() < 0.5:
                items = rnd.sample(DYADIC, rnd.randint(1, 3))
                target, iterable, static = self.fresh("F"), repr(list(items)), False
                body_scope[target] = "F"
            else:
                items = [str(self.expr("T", scope, depth=1)) for _ in range(rnd.randint(1, 3))]
                target, iterable, static = self.fresh("T"), f"[{', '.join(items)}]", False
                body_scope[target] = "T"
        elif form in ("list_var", "enumerate"):
            walked = rnd.choice(lists)
            target, static = self.fresh("T"), self.may_be_static(walked)
            body_scope[target] = "T"
            iterable = walked
            if form == "enumerate":
                gen.used.add(form)
                index = self.fresh("I")
                body_scope[index] = "I"
                iterable = f"enumerate({walked})"
        else:
            gen.used.add("for_layerlist")
            target, iterable, static = self.fresh("M"), "self.blocks", False
            body_scope[target] = "M"
        locked = [target, index] + ([iterable] if form == "list_var" else [])
        if form == "enumerate":
            locked.append(iterable[len("enumerate("):-1])
        inner = self.loop_ctx(ctx, static, [n for n in locked if n])
        if form == "layerlist" and inner.loop.jumps:
            inner = dataclasses.replace(inner, guarded=True)
        if static or inner.tensor_loop:
            self.dyn.update({target, index} - {None})
        header = f"{index}, {target}" if index else target
        self.emit(ctx, f"for {header} in {iterable}:")
        if form == "layerlist":
            value = f"{target}({self.expr('T', body_scope, depth=1)})"
            if self.gen.on("layer_call_in_lambda", 0.3):
                value = f"({value} if {self.predicate(body_scope)} else {value} * 0.5)"
            self.emit(inner, f"{self.rnd.choice(self.names(body_scope, 'T', inner, True))}"
                             f" = {value}")
        self.loop_body(body_scope, inner)
        return False

    def range_bound(self, scope) -> Expr:
        rnd = self.rnd
        small = [n for n in self.names(scope, "I") if n in self.fixed] + \
            [n for n in self.attrs if n in self.fixed]
        r = rnd.random()
        if r < 0.4 or not small:
            if r > 0.8 and "modulo" in self.gen.features and self.names(scope, "I"):
                self.gen.used.add("modulo")
                name = rnd.choice(self.names(scope, "I"))
                return Expr(f"{name} % 3", self.may_be_static(name))
            return Expr(str(rnd.randint(0, 3)), False)
        name = rnd.choice(small)
        return Expr(name if r < 0.7 else f"{name} + 1", self.may_be_static(name))

    def may_append(self, ctx) -> bool:
        if self.in_cond(ctx) and "append_in_tensor_if" not in self.gen.features:
            return False
        if ctx.guarded and "append_in_guarded_loop" not in self.gen.features:
            return False
        return not ctx.tensor_loop or "append_in_tensor_loop" in self.gen.features

    def list_stmt(self, scope, ctx) -> bool:
        lists = [n for n in self.names(scope, "L") if n not in ctx.locked]
        if lists and self.rnd.random() < 0.7:
            name = self.rnd.choice(lists)
            self.emit(ctx, f"{name}.append({self.expr('T', scope, depth=1)})")
            if ctx.tensor_loop:
                self.gen.used.add("append_in_tensor_loop")
                self.dyn.add(name)
        else:
            name = self.fresh("L")
            self.emit(ctx, f"{name} = [{self.expr('T', scope, depth=1)}]")
            scope[name] = "L"
            if ctx.tensor_loop:
                self.dyn.add(name)
        self.gen.used.add("lists")
        if self.in_cond(ctx):
            self.gen.used.add("append_in_tensor_if")
        if ctx.guarded:
            self.gen.used.add("append_in_guarded_loop")
        return False

    def no_grad_stmt(self, scope, ctx) -> bool:
        self.gen.used.add("no_grad")
        name, value = self.fresh("T"), self.expr("T", scope, depth=1)
        self.emit(ctx, f"with d2s.no_grad():\n{INDENT}{name} = {value}")
        self.assigned(name, scope, "T", value, ctx)
        return False

    def int32_counter_stmt(self, scope, ctx) -> bool:
        """total = 0; a tensor-dependent loop adds int32 sums to it; a T reads it."""
        self.gen.used.add("int32_counter")
        total, index = self.fresh("I"), self.fresh("I")
        source, target = self.expr("T", scope, depth=1), self.names(scope, "T", ctx, True)
        if not target:
            return False
        count = self.fresh("T")
        self.emit(ctx, f"{total} = 0\n"
                       f"{count} = ({source}[0] > 0).astype('int64').sum()\n"
                       f"for {index} in range({count}):\n"
                       f"{INDENT}{total} = {total} + ({source} > {self.rnd.choice(THRESHOLDS)})"
                       ".astype('int32').sum()")
        name = self.rnd.choice(target)
        self.emit(ctx, f"{name} = {name} + {total}")
        return False

    def try_return_stmt(self, scope, ctx) -> bool:
        """try: return helper(...), ... except ZeroDivisionError: return ..."""
        call = self.call(scope, depth=1, kind=self.returns[0])
        if call is None:
            return self.assign(scope, ctx)
        self.gen.used.add("try_return_call")
        rest = [str(self.expr(k, scope)) for k in self.returns[1:]]
        inner = ctx.inner()
        self.emit(ctx, "try:")
        self.emit(inner, f"return {', '.join([str(call), *rest])}")
        self.emit(ctx, "except ZeroDivisionError:")
        self.emit(inner, self.return_text(scope, inner))
        return True

def _indented(text: str) -> str:
    return "\n".join(INDENT + line if line else line for line in text.split("\n"))
