"""The CPU target's code generator: a region becomes the source of one Numba function.

``region_source(...)`` walks the region's ops in order and writes plain
Python over NumPy arrays and scalars -- loops, ``if`` and ``while`` -- that
Numba compiles in nopython mode. Each op's code comes from its rule in the
lowering table (``rules``, filled by ``lower.cpu``). What the generated code
looks like:

- a 0-d value is a scalar local (``s3``), typed by an explicit constructor
  (``np.float32(...)``) at every step, so arithmetic happens in the
  program's dtype; an array is a C-contiguous local (``a5``) whose dims are
  ints or locals read from the arrays that have them (``d2``, for -1 dims);
- a chain of elementwise ops is one loop nest over the broadcast shape:
  each op's result is a temporary of the loop body (fusion), written to a
  new array only where something else needs it (a reduction, a control-flow
  op, a value read twice or at another shape, a region output);
- ``cond`` is an ``if`` and ``while`` a ``while True`` loop whose cond block
  ends in ``break``; values a block reads from outside are computed before
  it.

Outputs are new arrays (0-d outputs 0-d arrays); inputs are never written.
The region's arguments are its free values followed by the array constants
it reads (``const_args``: scalar constants are literals in the source).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy

from dy2stat.runtime.lower.rules import rule_for
from dy2stat.runtime.ops.control_flow import attr_names
from dy2stat.runtime.registry import OPS

__all__ = ["LoweringError", "NativeSource", "Node", "region_source"]

TYPES = {"bool": "np.bool_", "int8": "np.int8", "int16": "np.int16", "int32": "np.int32",
         "int64": "np.int64", "uint8": "np.uint8", "float32": "np.float32",
         "float64": "np.float64"}
NUMBA_TYPES = {"bool": "nb.boolean", "int8": "nb.int8", "int16": "nb.int16",
               "int32": "nb.int32", "int64": "nb.int64", "uint8": "nb.uint8",
               "float32": "nb.float32", "float64": "nb.float64"}


class LoweringError(Exception):
    """A region that turned out not to lower (it stays interpreted)."""


@dataclass
class NativeSource:
    """One region's generated module: its text, argument types and the array
    constants appended to its arguments."""

    text: str
    signature: str  # the Numba signature's source (argument types)
    const_args: list = field(default_factory=list)  # namespace values passed after the free ones


@dataclass
class Val:
    """A value in generated code: a scalar or array local, or an elementwise
    result not computed yet (``lazy``: rule, step, operands)."""

    name: str
    dtype: numpy.dtype
    shape: tuple  # ints, or names of locals holding a dim
    ref: str | None = None
    lazy: tuple | None = None
    level: int = 0  # the block nesting depth where it is defined

    @property
    def scalar(self) -> bool:
        return not self.shape


@dataclass
class Node:
    """One op as its rule sees it."""

    op: object
    attrs: dict
    ins: list  # Val per input slot (None for an empty optional slot, a list for variadic)
    out_vars: list
    where: str


@dataclass
class Step:
    """What an elementwise rule reads: the op's attrs and its dtypes."""

    attrs: dict
    in_dtypes: list
    dtype: numpy.dtype


def literal(value, dtype) -> str:
    """Source text of a typed scalar constant (exact: repr of a float round-trips)."""
    dtype = numpy.dtype(dtype)
    ctor = TYPES[dtype.name]
    if dtype.kind == "b":
        return f"{ctor}({bool(value)})"
    if dtype.kind in "iu":
        return f"{ctor}({int(value)})"
    value = float(value)
    if math.isnan(value):
        return f"{ctor}(np.nan)"
    if math.isinf(value):
        return f"{ctor}({'-' if value < 0 else ''}np.inf)"
    return f"{ctor}({value!r})"


class Emitter:
    """Writes one region's function; rules call back into it (see ``lower.cpu``)."""

    def __init__(self, program, rounding: str, constant_of, var_of):
        self.program, self.rounding, self.constant_of = program, rounding, constant_of
        self.var_of = [var_of]  # per nesting level: the variables visible there
        self.lines: list[str] = []
        self.depth = 1
        self.level = 0
        self._ids = itertools.count()
        self.scopes: list[dict] = [{}]
        self.uses: Counter = Counter()
        self.helpers: dict[str, str] = {}
        self.const_args: list = []  # (param name, value)
        self._const_params: dict[int, str] = {}
        # locals bound once to an array this region allocated (not an argument, a
        # constant, or a value a cond or loop merged, which may be either)
        self.owned: set[str] = set()

    # ---------------------------------------------------------------- text
    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def indented(self):
        emitter = self

        class _Indent:
            def __enter__(self):
                emitter.depth += 1

            def __exit__(self, *exc):
                emitter.depth -= 1

        return _Indent()

    def helper(self, name: str, source: str) -> str:
        self.helpers.setdefault(name, source)
        return name

    def check(self, condition: str, message: str) -> None:
        """Raise ``ValueError(message)`` where ``condition`` holds at run time."""
        self.line(f"if {condition}:")
        with self.indented():
            self.line(f"raise ValueError({message!r})")

    # -------------------------------------------------------------- values
    def lookup(self, name: str) -> Val:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        value = self.constant_of(name)
        if value is None:
            raise LoweringError(f"{name!r} is not visible in the region")
        return self.constant(name, value)

    def define(self, name: str, val: Val) -> Val:
        val.level = self.level
        val.name = val.name or name  # what ``uses`` counts it by
        self.scopes[-1][name] = val
        return val

    def constant(self, name: str, value) -> Val:
        """A plan constant read in the region: a literal, or an argument for an array."""
        value = numpy.asarray(value)
        if value.ndim == 0:
            return Val(name, value.dtype, (), ref=literal(value[()], value.dtype))
        param = self._const_params.get(id(value))
        if param is None:
            param = self._const_params[id(value)] = self.fresh("k")
            self.const_args.append((param, value))
        val = Val(name, value.dtype, tuple(value.shape), ref=param)
        return val

    def dims_of(self, var, ref: str) -> tuple:
        """A variable's dims for the array local ``ref``: known ones as ints, -1 ones
        read from the array."""
        dims = []
        for j, d in enumerate(var.shape):
            if d >= 0:
                dims.append(int(d))
            else:
                name = self.fresh("d")
                self.line(f"{name} = {ref}.shape[{j}]")
                dims.append(name)
        return tuple(dims)

    def scalar(self, val: Val) -> str:
        if not val.scalar:
            raise LoweringError(f"{val.name!r} is not a scalar")
        return val.ref

    def array(self, val: Val) -> str:
        """The local holding ``val``'s array (computing a pending elementwise chain)."""
        if val.lazy is not None:
            self.materialize(val)
        return val.ref

    def new_array(self, shape, dtype) -> str:
        ref = self.fresh("a")
        dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
        self.line(f"{ref} = np.empty(({dims}), {TYPES[numpy.dtype(dtype).name]})")
        self.owned.add(ref)
        return ref

    def zero_d(self, val: Val) -> str:
        """``val`` (a scalar) as a new 0-d array: how a region returns a scalar."""
        ref = self.fresh("z")
        self.line(f"{ref} = np.empty((), {TYPES[val.dtype.name]})")
        self.line(f"{ref}[()] = {val.ref}")
        return ref

    # -------------------------------------------------------- elementwise
    def broadcast(self, shapes: list, where: str) -> tuple:
        """The broadcast shape; -1 dims are checked when the code runs."""
        rank = max((len(s) for s in shapes), default=0)
        out = []
        for j in range(rank):
            dims = [s[j - rank + len(s)] for s in shapes if j >= rank - len(s)]
            known = {d for d in dims if isinstance(d, int) and d != 1}
            unknown = list(dict.fromkeys(d for d in dims if isinstance(d, str)))
            if len(known) > 1:
                raise LoweringError(f"{where}: shapes {shapes} do not broadcast")
            message = f"{where}: operands could not be broadcast together"
            if known:
                (size,) = known
                for d in unknown:
                    self.check(f"{d} != {size} and {d} != 1", message)
                out.append(size)
            elif not unknown:
                out.append(1)
            elif len(unknown) == 1:
                out.append(unknown[0])
            else:
                size = self.fresh("d")
                self.line(f"{size} = {unknown[0]}")
                for d in unknown[1:]:
                    self.check(f"{d} != 1 and {size} != 1 and {d} != {size}", message)
                    self.line(f"{size} = {d} if {size} == 1 else {size}")
                out.append(size)
        return tuple(out)

    def elementwise(self, node: Node, rule, out_name: str) -> Val:
        """An elementwise op: a scalar statement, or a pending step of a loop nest."""
        (var,) = node.out_vars
        ins = node.ins
        step = Step(node.attrs, [v.dtype for v in ins], var.dtype)
        shape = self.broadcast([v.shape for v in ins], node.where)
        if not shape:
            ref = self.fresh("s")
            expr = rule.emit([self.scalar(v) for v in ins], step)
            self.line(f"{ref} = {TYPES[var.dtype.name]}({expr})")
            return Val(out_name, var.dtype, (), ref=ref)
        operands = []
        for v in ins:
            if v.lazy is not None and (self.uses[v.name] > 1 or v.shape != shape
                                       or v.level != self.level):
                self.materialize(v)
            operands.append(v)
        return Val(out_name, var.dtype, shape, lazy=(rule, step, operands))

    def materialize(self, val: Val) -> None:
        """Write ``val``'s pending chain as one loop nest into a new array."""
        if val.level < self.level:  # computed in one branch, it would be missing in the other
            raise LoweringError(f"{val.name!r}, pending at block depth {val.level}, is needed "
                                f"first at depth {self.level}")
        shape = val.shape
        out = self._reusable(val) or self.new_array(shape, val.dtype)
        index = [self.fresh("i") for _ in shape]
        flags: dict = {}
        loads: dict = {}
        body: list[str] = []

        def leaf_index(v: Val) -> str:
            parts = []
            for j, d in enumerate(v.shape):
                jo = j + len(shape) - len(v.shape)
                if d == shape[jo]:
                    parts.append(index[jo])
                elif d == 1:
                    parts.append("0")
                else:  # a -1 dim that may be 1 at run time
                    key = (id(v), j)
                    if key not in flags:
                        flags[key] = self.fresh("f")
                        self.line(f"{flags[key]} = 0 if {d} == 1 else 1")
                    parts.append(f"{index[jo]} * {flags[key]}")
            return ", ".join(parts)

        def expr_of(v: Val) -> str:
            if v.lazy is None:
                if v.scalar:
                    return v.ref
                if id(v) not in loads:
                    loads[id(v)] = name = self.fresh("t")
                    body.append(f"{name} = {v.ref}[{leaf_index(v)}]")
                return loads[id(v)]
            rule, step, operands = v.lazy
            args = [expr_of(u) for u in operands]
            name = self.fresh("t")
            body.append(f"{name} = {TYPES[step.dtype.name]}({rule.emit(args, step)})")
            return name

        result = expr_of(val)
        for i, d in zip(index, shape):
            self.line(f"for {i} in range({d}):")
            self.depth += 1
        for text in body:
            self.line(text)
        self.line(f"{out}[{', '.join(index)}] = {result}")
        self.depth -= len(shape)
        val.ref, val.lazy = out, None

    def _reusable(self, val: Val) -> str | None:
        """An array of ``val``'s chain that the chain may overwrite as it goes: one this
        region allocated at this block level, of the chain's shape and dtype, that
        nothing else reads (each element is read before the same element is written)."""
        pending = [val]
        while pending:
            rule, step, operands = pending.pop().lazy
            for v in operands:
                if v.lazy is not None:
                    pending.append(v)
                elif (v.ref in self.owned and self.uses[v.name] == 1 and v.level == self.level
                      and v.shape == val.shape and v.dtype == val.dtype):
                    return v.ref
        return None

    # ---------------------------------------------------------------- ops
    def lower_ops(self, ops) -> None:
        for op in ops:
            self.lower_op(op)

    def lower_op(self, op) -> None:
        rule = rule_for(op.type, "cpu", self.rounding)
        if rule is None:
            raise LoweringError(f"no cpu lowering for {op.type}")
        opdef = OPS[op.type]
        ins = []
        for slot in opdef.inputs:
            names = op.inputs.get(slot.name, [])
            if slot.variadic:
                ins.append([self.lookup(n) for n in names])
            else:
                ins.append(self.lookup(names[0]) if names else None)
        out_vars = [self.var_of[-1](n) for n in op.output_names()]
        where = f"op {op.type} of the native region"
        node = Node(op, opdef.full_attrs(op.attrs), ins, out_vars, where)
        if rule.kind == "elementwise":
            (out,) = op.output_names()
            self.define(out, self.elementwise(node, rule, out))
            return
        results = rule.emit(self, node)
        for name, val in zip(op.output_names(), results):
            self.define(name, val)

    def lower_block(self, block, bindings: dict, yields: list) -> list[Val]:
        """``block``'s ops with ``bindings`` (name -> Val) for its arguments; the
        values named by ``yields``, each computed."""
        self.scopes.append(dict(bindings))
        self.var_of.append(block.find_var)
        self.level += 1
        try:
            self.lower_ops(block.ops)
            vals = [self.lookup(n) for n in yields]
            for v in vals:
                if v.lazy is not None:
                    self.materialize(v)
            return vals
        finally:
            self.level -= 1
            self.var_of.pop()
            self.scopes.pop()

    def ready_for_block(self, program, idx: int, yields=()) -> None:
        """Compute, before a nested block, the pending values it reads from here
        (its ops' inputs, and ``yields``: what it gives back, which may be a value
        of this level passed through)."""
        for name in _reads_below(program, idx) | set(yields):
            for scope in self.scopes:
                v = scope.get(name)
                if v is not None and v.lazy is not None:
                    self.materialize(v)


def _reads_below(program, idx: int) -> set:
    names = set()
    for op in program.blocks[idx].ops:
        names.update(op.input_names())
        names |= attr_names(op)
        for sub in op.sub_blocks():
            names |= _reads_below(program, sub)
    return names


def region_source(program, ops, var_of, params, outs, constant_of, rounding) -> NativeSource:
    """The module of one region: ``ops`` (in order; ``var_of`` describes their
    names) computing ``outs`` from ``params`` ((name, var, host) of each free
    value, in the order the caller passes them); ``constant_of(name)`` gives a
    plan constant's array (None: not a constant)."""
    emitter = Emitter(program, rounding, constant_of, var_of)
    for op in ops:
        _count_uses(program, op, emitter.uses)
    emitter.uses.update(outs)
    names, types = [], []
    for name, var, host in params:
        if var is None or var.dtype.name not in NUMBA_TYPES:
            raise LoweringError(f"{name!r}: no native type")
        ref = emitter.fresh("p")
        names.append(ref)
        if var.shape:
            types.append(f"nb.types.Array({NUMBA_TYPES[var.dtype.name]}, {len(var.shape)}, 'C')")
            emitter.define(name, Val(name, var.dtype, emitter.dims_of(var, ref), ref=ref))
            # The loops index with the program's dims: an argument of another shape
            # runs the interpreted code instead (TypeError: the plan's fallback).
            known = [f"{ref}.shape[{j}] != {d}" for j, d in enumerate(var.shape) if d >= 0]
            if known:
                emitter.line(f"if {' or '.join(known)}:")
                with emitter.indented():
                    emitter.line(f"raise TypeError({name + ': not the shape compiled for'!r})")
        else:
            types.append("nb.int64" if host else NUMBA_TYPES[var.dtype.name])
            emitter.define(name, Val(name, var.dtype, (), ref=ref))
    emitter.lower_ops(ops)
    results, returned = [], set()
    for name in outs:
        val = emitter.lookup(name)
        if val.scalar:
            results.append(emitter.zero_d(val))
            continue
        ref = emitter.array(val)
        # The caller may write into a result: each must be a new array of its own, not
        # an argument, a constant, a value a branch or loop passed through, or another
        # result.
        results.append(ref if ref in emitter.owned and ref not in returned else f"{ref}.copy()")
        returned.add(ref)
    names += [param for param, _ in emitter.const_args]
    types += [f"nb.types.Array({NUMBA_TYPES[v.dtype.name]}, {v.ndim}, 'C')"
              for _, v in emitter.const_args]
    for _, v in emitter.const_args:
        if v.dtype.name not in NUMBA_TYPES:
            raise LoweringError(f"a constant of dtype {v.dtype}: no native type")
    head = ["# A region of a dy2stat plan, compiled by Numba (generated code).",
            "import numpy as np", "import numba as nb", ""]
    for source in emitter.helpers.values():
        head += [source, ""]
    signature = f"({', '.join(types)}{',' if len(types) == 1 else ''})"
    body = [f"SIGNATURE = {signature}", "", f"def region({', '.join(names)}):", *emitter.lines,
            f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})"]
    text = "\n".join(head + body) + "\n"
    return NativeSource(text, signature, [v for _, v in emitter.const_args])


def _count_uses(program, op, uses: Counter) -> None:
    uses.update(op.input_names())
    uses.update(attr_names(op))
    for idx in op.sub_blocks():
        for inner in program.blocks[idx].ops:
            _count_uses(program, inner, uses)
