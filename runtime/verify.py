"""The IR verifier: is a ``Program`` well formed?

``verify(program)`` returns None or raises :class:`VerifyError`, whose message
names the block, the op (index and type), the slot or attr and the variable,
e.g. ``block 0, op 3 (add), inputs.Y[0]: 'h' is read before any op writes it``.
Names and values are quoted in at most ~200 characters (``runtime/quoting.py``).
``VerifyError.field`` is the same place as a path into the saved document
(``blocks[0].ops[3].inputs.Y[0]``) and ``VerifyError.reason`` the text after
it, so ``serialize`` reports a bad file with the field that is wrong.

The rules, checked in this order (the first broken one is reported):

1. Structure. Every op type is in the registry; slot names are the op's
   slots; a plain slot holds one name, an optional slot zero or one, a
   variadic slot any number; every name is a variable visible from the op's
   block (declared there or in a parent). Attr names are the op's attrs and
   each value has the attr's declared type and range (``OpDef.attr_type``: a
   bool is a bool, a shape a list of ints, a seed ``>= 0``; an axis's range
   against the input's rank is inference's, rule 5). A
   control-flow op carries every ``*_block`` attr of its type, each the index
   of a sub-block (``1 <= idx < len(blocks)``); its name attrs (``<p>_<x>``
   beside ``<p>_block``: ``true_outs``, ``cond_args``, ``grad_inputs`` ...)
   hold variable names (a string, or a list of them, as the registry default
   is) visible from that sub-block, and argument attrs (``cond_args``,
   ``body_args``, ``grad_args``) name variables declared in the sub-block
   itself. The op's slots and name attrs agree in count (one ``Out`` per
   ``true_outs``, one ``body_args`` per carried ``X``, ...).
2. No cycles: following sub-block references never leads back to a block.
3. Nesting: a sub-block is a child of the block of the op that runs it, so
   it sees what that block sees; ``while_grad``'s ``grad_block`` is a child
   of its ``body_block`` (it runs in the scope of the recomputed body) and
   that body a child of the op's block or of a block enclosing it.
4. Use after definition, in op order: an op reads only values defined before
   it runs: persistable and data variables, ``feed_names``, outputs of
   earlier ops of its block or (for a sub-block) of the enclosing blocks
   before the control-flow op, and the sub-block's arguments. The values a
   sub-block yields (``true_outs``, ``cond_out``, ``body_outs``,
   ``grad_outs``, ...) must be defined by its end.
5. Shape/dtype inference is re-run for every op that is not control flow:
   each input has a dtype its slot takes (``OpDef.input_dtypes``: a ``where``
   condition is bool, an index an integer), and the declared output variables
   agree with what inference gives (same dtype and rank, equal dims where both
   are known: -1 agrees with anything), which is what the kernel computes for
   those input dtypes (``tests/ops/test_dtypes.py``). Control-flow
   ops: the predicate is a one-element bool; ``cond``'s outputs agree with
   both branches' outs and ``while``'s carried values (``X``, the arguments,
   ``body_outs``, ``Out``) agree with each other. The inputs an op promotes to
   one dtype (``OpDef.promote``: ``add``'s X and Y ...) already have one dtype,
   as the builder leaves them (it inserts the casts): the kernel computes in
   the inputs' dtypes, so mixed ones would compute another dtype than the one
   inferred. A ``while_grad`` belongs to the ``while`` whose ``Carries`` stack it
   reads: the same ``body_block``, ``body_args`` and ``Input``, ``saved`` a prefix
   of the loop's (the entries it pops), one ``DOut`` per ``Out`` and one ``DX``
   per ``X``, each agreeing with it, and gradient arguments and outs agreeing
   with the values they stand for.
6. Single definition: a non-persistable variable is written by at most one
   op (persistable variables may be written by update ops, any number of
   times); no op writes a data variable, a sub-block argument, or (from a
   sub-block) a non-persistable variable of an enclosing block.
"""

from __future__ import annotations

import functools

import numpy as np

from dy2stat.runtime import dtypes, shapes
from dy2stat.runtime.ir import Block, Operator, Program, Var
from dy2stat.runtime.quoting import describe_kind, field_key, quote
from dy2stat.runtime.registry import OPS, InputDtypeError, Meta, OpDef

__all__ = ["VerifyError", "verify"]


class VerifyError(ValueError):
    """A program that breaks a rule of the IR.

    ``where`` is the readable place (``block 0, op 3 (add), inputs.Y[0]``),
    ``field`` the same place as a document path (``blocks[0].ops[3].inputs.Y[0]``)
    and ``reason`` what is wrong there.
    """

    def __init__(self, where: str, field: str, reason: str):
        self.where, self.field, self.reason = where, field, _cut(reason)
        super().__init__(f"{where}: {self.reason}" if where else self.reason)

    def __reduce__(self):
        return type(self), (self.where, self.field, self.reason)


def verify(program: Program, feed_names=()) -> None:
    """Raise :class:`VerifyError` if ``program`` breaks a rule (see the module doc).

    ``feed_names`` are extra global-block names that count as defined on entry
    (data variables always do).
    """
    _Verifier(program, feed_names).run()


# Ops whose sub-blocks are bound to arguments on entry (name attrs ending in _args).
_ARG_SUFFIX = "_args"


class _Verifier:
    def __init__(self, program: Program, feed_names):
        self.program = program
        self.blocks = program.blocks
        self.feed = {n for n in feed_names if isinstance(n, str)}

    # ------------------------------------------------------------ reporting

    def fail(self, block: Block | None, i: int | None, op: Operator | None, part: str,
             reason: str):
        if block is None:
            raise VerifyError("", "", reason)
        where = f"block {block.idx}"
        field = f"blocks[{block.idx}]"
        if i is not None:
            kind = op.type if op is not None and isinstance(op.type, str) else "?"
            where += f", op {i} ({kind})"
            field += f".ops[{i}]"
        if part:
            where += f", {part}"
            field += f".{part}"
        raise VerifyError(where, field, reason)

    def run(self) -> None:
        if not self.blocks:
            raise VerifyError("", "blocks", "the program has no blocks")
        for block in self.blocks:
            for i, op in enumerate(block.ops):
                self.structure(block, i, op)
        self.cycles()
        for block in self.blocks:
            for i, op in enumerate(block.ops):
                self.nesting(block, i, op)
        try:
            self.walk(self.blocks[0], self.initial_env())
        except RecursionError:
            raise VerifyError("", "blocks", "control flow is nested too deeply") from None
        for block in self.blocks:
            for i, op in enumerate(block.ops):
                if _is_control_flow(OPS[op.type]):
                    self.control_flow_types(block, i, op)
                else:
                    self.infer(block, i, op)
        self.single_definition()

    # ------------------------------------------------------- 1. structure

    def structure(self, block: Block, i: int, op: Operator) -> None:
        opdef = OPS.get(op.type) if isinstance(op.type, str) else None
        if opdef is None:
            self.fail(block, i, op, "type", f"unknown op type {_short(op.type)}")
        for kind, slots, given in (("inputs", opdef.inputs, op.inputs),
                                   ("outputs", opdef.outputs, op.outputs)):
            self.slots(block, i, op, opdef, kind, slots, given)
        self.attrs(block, i, op, opdef)

    def slots(self, block, i, op, opdef: OpDef, kind, slots, given) -> None:
        if not isinstance(given, dict):
            self.fail(block, i, op, kind, f"expected a mapping of slot names to name lists, "
                                          f"got {type(given).__name__}")
        known = {s.name: s for s in slots}
        for key in given:
            if key not in known:
                self.fail(block, i, op, f"{kind}.{field_key(key)}",
                          f"op {op.type!r} has no slot {_short(key)} "
                          f"(slots: {', '.join(known) or 'none'})")
        for slot in slots:
            part = f"{kind}.{slot.name}"
            if slot.name not in given:
                if slot.variadic or slot.optional:
                    continue
                self.fail(block, i, op, part, f"missing (op {op.type!r} requires it)")
            names = given[slot.name]
            if not isinstance(names, (list, tuple)):
                self.fail(block, i, op, part, f"expected a list of names, "
                                              f"got {type(names).__name__}")
            if not slot.variadic and len(names) > 1:
                self.fail(block, i, op, part, f"expected one name, got {len(names)}")
            if not slot.variadic and not slot.optional and len(names) != 1:
                self.fail(block, i, op, part, "expected one name, got none")
            for j, n in enumerate(names):
                if not isinstance(n, str) or not n:
                    self.fail(block, i, op, f"{part}[{j}]",
                              f"expected a variable name, got {_short(n)}")
                if block.find_var(n) is None:
                    self.fail(block, i, op, f"{part}[{j}]",
                              f"variable {quote(n)} is not defined in block {block.idx} "
                              "or its parents")

    def attrs(self, block, i, op, opdef: OpDef) -> None:
        if not isinstance(op.attrs, dict):
            self.fail(block, i, op, "attrs", f"expected a mapping, got {type(op.attrs).__name__}")
        prefixes = _block_prefixes(opdef)
        for key, value in op.attrs.items():
            if not isinstance(key, str) or key not in opdef.attrs:
                self.fail(block, i, op, f"attrs.{field_key(key)}",
                          f"op {op.type!r} has no attr {_short(key)} "
                          f"(attrs: {', '.join(opdef.attrs) or 'none'})")
            if key.endswith("_block"):
                n = len(self.blocks)
                if not _is_int(value) or not 0 < value < n:
                    self.fail(block, i, op, f"attrs.{key}",
                              f"expected a sub-block index (1 to {n - 1}), got {_short(value)}")
            elif key.split("_")[0] not in prefixes:  # (name attrs: checked by name_attr)
                attr_type = opdef.attr_type(key)
                if attr_type is not None and not attr_type.accepts(value):
                    self.fail(block, i, op, f"attrs.{key}",
                              f"expected {attr_type.what}, got {quote(value)}")
        for prefix in prefixes:
            if f"{prefix}_block" not in op.attrs:
                self.fail(block, i, op, f"attrs.{prefix}_block",
                          f"missing (op {op.type!r} needs a sub-block index)")
        for key in opdef.attrs:
            if key.endswith("_block") or key.split("_")[0] not in prefixes:
                continue
            sub = self.blocks[op.attrs[f"{key.split('_')[0]}_block"]]
            self.name_attr(block, i, op, opdef, key, sub)
        if prefixes:
            self.counts(block, i, op)

    def name_attr(self, block, i, op, opdef: OpDef, key: str, sub: Block) -> None:
        """A control-flow attr naming variables of its sub-block ``sub``."""
        default = opdef.attrs[key]
        value = op.attrs.get(key, default)
        part = f"attrs.{key}"
        if isinstance(default, str):
            if not isinstance(value, str):
                self.fail(block, i, op, part,
                          f"expected a variable name, got {describe_kind(value)}")
            names, parts = ([value], [part]) if value else ([], [])
        else:
            if not isinstance(value, list):
                self.fail(block, i, op, part,
                          f"expected a list of variable names, got {describe_kind(value)}")
            names, parts = value, [f"{part}[{j}]" for j in range(len(value))]
        for name, p in zip(names, parts):
            if not isinstance(name, str) or not name:
                self.fail(block, i, op, p,
                          f"expected a variable name, got {describe_kind(name)}")
            if not any(name in b.vars for b in self.blocks):
                self.fail(block, i, op, p,
                          f"variable {quote(name)} is not declared in any block")
            if key.endswith(_ARG_SUFFIX):
                if name not in sub.vars:
                    self.fail(block, i, op, p, f"argument {quote(name)} is not declared in "
                                               f"block {sub.idx} (the sub-block it binds)")
            elif sub.find_var(name) is None:
                self.fail(block, i, op, p, f"variable {quote(name)} is not visible from "
                                           f"block {sub.idx} (declared neither there nor "
                                           "in its parents)")
        if key.endswith(_ARG_SUFFIX) and len(set(names)) != len(names):
            self.fail(block, i, op, part, "an argument is listed twice")

    def counts(self, block, i, op) -> None:
        """Slots and name attrs of a control-flow op agree in length."""
        a, ins, outs = _attrs(op), op.inputs, op.outputs

        def n(mapping, key):
            return len(mapping.get(key, []))

        if op.type == "cond":
            checks = [("outputs.Out", n(outs, "Out")), ("attrs.true_outs", len(a["true_outs"])),
                      ("attrs.false_outs", len(a["false_outs"]))]
        elif op.type == "while":
            if n(outs, "Carries") > 1:
                self.fail(block, i, op, "outputs.Carries",
                          f"expected at most one name, got {n(outs, 'Carries')}")
            checks = [("inputs.X", n(ins, "X")), ("outputs.Out", n(outs, "Out")),
                      ("attrs.cond_args", len(a["cond_args"])),
                      ("attrs.body_args", len(a["body_args"])),
                      ("attrs.body_outs", len(a["body_outs"]))]
            if not a["cond_out"]:
                self.fail(block, i, op, "attrs.cond_out", "missing (the loop's predicate)")
        elif op.type == "while_grad":
            if n(ins, "Carries") != 1:
                self.fail(block, i, op, "inputs.Carries",
                          f"expected one name (the saved carries), got {n(ins, 'Carries')}")
            checks = [("inputs.DOut", n(ins, "DOut")), ("outputs.DX", n(outs, "DX")),
                      ("attrs.body_args", len(a["body_args"])),
                      ("attrs.grad_args", len(a["grad_args"])),
                      ("attrs.grad_outs", len(a["grad_outs"]))]
            if n(outs, "DInput") != len(a["grad_inputs"]):
                self.fail(block, i, op, "attrs.grad_inputs",
                          f"names {len(a['grad_inputs'])} values for "
                          f"{n(outs, 'DInput')} DInput outputs")
        else:
            return
        (first, count), rest = checks[0], checks[1:]
        for part, c in rest:
            if c != count:
                self.fail(block, i, op, part, f"names {c} values but {first} has {count} "
                                              "(they must agree one to one)")

    # ---------------------------------------------------------- 2. cycles

    def cycles(self) -> None:
        """Sub-block references form no cycle (iterative DFS; hostile depth is fine)."""
        edges = {b.idx: [] for b in self.blocks}
        for b in self.blocks:
            for i, op in enumerate(b.ops):
                for key, idx in op.attrs.items():
                    if key.endswith("_block"):
                        edges[b.idx].append((idx, b, i, op, key))
        state: dict[int, int] = {}  # 1: on the current path, 2: done
        for root in edges:
            if root in state:
                continue
            state[root] = 1
            stack = [(root, iter(edges[root]))]
            while stack:
                idx, children = stack[-1]
                for child, b, i, op, key in children:
                    if state.get(child) == 1:
                        self.fail(b, i, op, f"attrs.{key}",
                                  f"block {child} contains (directly or through its "
                                  "sub-blocks) the op that refers to it: a cycle")
                    if child not in state:
                        state[child] = 1
                        stack.append((child, iter(edges[child])))
                        break
                else:
                    state[idx] = 2
                    stack.pop()

    # --------------------------------------------------------- 3. nesting

    def ancestors(self, idx: int) -> list[int]:
        """``idx`` and the blocks above it (parents are listed before children)."""
        chain, seen = [], set()
        while 0 <= idx < len(self.blocks) and idx not in seen:
            chain.append(idx)
            seen.add(idx)
            idx = self.blocks[idx].parent_idx
        return chain

    def nesting(self, block: Block, i: int, op: Operator) -> None:
        for key, idx in op.attrs.items():
            if not key.endswith("_block"):
                continue
            if op.type == "while_grad" and key == "grad_block":
                outer = op.attrs["body_block"]
            elif op.type == "while_grad" and key == "body_block":
                # the forward loop's body: nested in a block that encloses this op
                parent = self.blocks[idx].parent_idx
                if parent not in self.ancestors(block.idx):
                    self.fail(block, i, op, f"attrs.{key}",
                              f"block {idx} (parent {parent}) is not the body of a loop in "
                              f"block {block.idx} or a block enclosing it")
                continue
            else:
                outer = block.idx
            parent = self.blocks[idx].parent_idx
            if parent != outer:
                self.fail(block, i, op, f"attrs.{key}",
                          f"block {idx} is not nested in block {outer} (its parent is "
                          f"block {parent})")

    # -------------------------------------------- 4. use after definition

    def initial_env(self) -> set:
        env = set(self.feed)
        for b in self.blocks:
            env.update(n for n, v in b.vars.items() if v.persistable or v.is_data)
        return env

    def walk(self, block: Block, env: set) -> set:
        """Check the reads of ``block`` given the names defined on entry; return
        the names defined at its end."""
        env = set(env)
        for i, op in enumerate(block.ops):
            for slot, names in op.inputs.items():
                for j, n in enumerate(names):
                    if n not in env:
                        self.fail(block, i, op, f"inputs.{slot}[{j}]",
                                  f"{quote(n)} is read before any op writes it (it is not a "
                                  "parameter, a data variable, a feed or an argument of "
                                  "this block)")
            if op.type in ("cond", "while", "while_grad"):
                self.walk_control_flow(block, i, op, env)
            env.update(op.output_names())
        return env

    def walk_control_flow(self, block, i, op, env) -> None:
        a = _attrs(op)

        def run(key, args=(), entry=None):
            return self.walk(self.blocks[a[key]], (env if entry is None else entry) | set(args))

        def yielded(key, defined, sub_key):
            names = a[key] if isinstance(a[key], list) else [a[key]]
            for j, n in enumerate(names):
                if n not in defined:
                    part = f"attrs.{key}" + (f"[{j}]" if isinstance(a[key], list) else "")
                    self.fail(block, i, op, part,
                              f"{quote(n)} is yielded by block {a[sub_key]} but no op defines it "
                              "there or before")

        if op.type == "cond":
            yielded("true_outs", run("true_block"), "true_block")
            yielded("false_outs", run("false_block"), "false_block")
        elif op.type == "while":
            yielded("cond_out", run("cond_block", a["cond_args"]), "cond_block")
            body = run("body_block", a["body_args"])
            yielded("body_outs", body, "body_block")
            yielded("saved", body, "body_block")
        else:  # while_grad: the body recomputed, then the gradient block in its scope
            body = run("body_block", a["body_args"])
            yielded("saved", body, "body_block")
            grad = run("grad_block", a["grad_args"], entry=body)
            yielded("grad_outs", grad, "grad_block")
            yielded("grad_inputs", grad, "grad_block")

    # ------------------------------------------------------- 5. inference

    def infer(self, block: Block, i: int, op: Operator) -> None:
        opdef = OPS[op.type]
        metas = []
        for slot in opdef.inputs:
            names = op.inputs.get(slot.name, [])
            if slot.variadic:
                metas.append([_meta(block.find_var(n)) for n in names])
            else:
                metas.append(_meta(block.find_var(names[0])) if names else None)
        self.promoted(block, i, op, opdef, metas)
        self.axes_in_range(block, i, op, opdef, metas)
        try:  # (inference checks the inputs' dtypes against the registry first)
            inferred = opdef.infer(*metas, **{**opdef.attrs, **op.attrs})
        except InputDtypeError as e:
            self.fail(block, i, op, f"inputs.{e.slot}[{e.index}]" if e.slot else "",
                      f"op {op.type!r} does not accept its inputs/attrs: {e}")
        except Exception as e:  # noqa: BLE001  (any failure here means a bad op)
            self.fail(block, i, op, "", f"op {op.type!r} does not accept its inputs/attrs: "
                                        f"{_cut(str(e), 500)}")
        if len(opdef.outputs) == 1:
            inferred = (inferred,)
        try:
            inferred = list(inferred)
        except TypeError:
            inferred = None
        if inferred is None or len(inferred) != len(opdef.outputs):
            self.fail(block, i, op, "",
                      f"op {op.type!r}: inference did not give one result per output slot")
        for slot, meta in zip(opdef.outputs, inferred):
            names = op.outputs.get(slot.name, [])
            part = f"outputs.{slot.name}"
            if slot.variadic:
                results = list(meta) if isinstance(meta, (list, tuple)) else None
                if results is None or len(results) != len(names):
                    count = "?" if results is None else len(results)
                    self.fail(block, i, op, part, f"op {op.type!r} produces {count} values "
                                                  f"here, the op lists {len(names)}")
            else:
                results = [] if meta is None else [meta]
                if len(results) != len(names):
                    self.fail(block, i, op, part, f"op {op.type!r} produces {len(results)} "
                                                  f"values here, the op lists {len(names)}")
            for j, (n, m) in enumerate(zip(names, results)):
                try:
                    shape, dtype = tuple(int(d) for d in m[0]), np.dtype(m[1])
                except Exception:  # noqa: BLE001
                    self.fail(block, i, op, f"{part}[{j}]",
                              f"op {op.type!r}: inference gave no shape/dtype")
                self.agree(block, i, op, f"{part}[{j}]", block.find_var(n), shape, dtype,
                           f"op {op.type!r} computes")

    def axes_in_range(self, block, i, op, opdef: OpDef, metas) -> None:
        """Attrs declared as axes of an input are in range of its rank, none twice."""
        slots = {slot.name: meta for slot, meta in zip(opdef.inputs, metas)}
        for key, value in op.attrs.items():
            attr_type = opdef.attr_type(key)
            meta = slots.get(attr_type.axes_of) if attr_type is not None else None
            if not isinstance(meta, Meta) or value is None:
                continue
            rank = len(meta.shape)
            axes = list(value) if isinstance(value, (list, tuple)) else [value]
            normalized = [a % rank if rank and -rank <= a < rank else None for a in axes]
            if None in normalized:
                self.fail(block, i, op, f"attrs.{key}",
                          f"axis {axes[normalized.index(None)]} is out of range for "
                          f"{attr_type.axes_of}, which has {rank} dims")
            if len(set(normalized)) != len(normalized):
                self.fail(block, i, op, f"attrs.{key}", f"names an axis twice: {quote(value)}")

    def promoted(self, block, i, op, opdef: OpDef, metas) -> None:
        """Inputs an op promotes to one dtype but that differ are promoted by its kernel
        as NumPy does; they must be dtypes NumPy and dy2stat promote alike (rule 5)."""
        seen = []
        for k in opdef.promote:
            slot, meta = opdef.inputs[k], metas[k]
            for j, m in enumerate(meta if slot.variadic else [meta]):
                if m is not None:
                    seen.append((f"inputs.{slot.name}[{j}]", m.dtype))
        if len({d for _, d in seen}) < 2:
            return
        ours = functools.reduce(dtypes.promote, (d for _, d in seen))
        theirs = np.result_type(*(d for _, d in seen))
        if ours != theirs:
            part, dtype = next((p, d) for p, d in seen if d != seen[0][1])
            self.fail(block, i, op, part,
                      f"op {op.type!r} reads {seen[0][1]} ({seen[0][0]}) and {dtype} here: "
                      f"dy2stat promotes them to {ours} but the kernel computes {theirs}; "
                      "cast one first (as the builder does)")

    def agree(self, block, i, op, part, var: Var, shape, dtype, what: str) -> None:
        if dtype != var.dtype or not shapes.same(shape, var.shape):
            self.fail(block, i, op, part, f"{quote(var.name)} is declared "
                                          f"{var.dtype}{shapes.fmt(var.shape)} but {what} "
                                          f"{dtype}{shapes.fmt(shape)}")

    def control_flow_types(self, block: Block, i: int, op: Operator) -> None:
        a = _attrs(op)

        def var_in(idx, name):
            return self.blocks[idx].find_var(name)

        def predicate(part, var):
            if var.dtype != dtypes.bool_ or shapes.numel(var.shape) not in (1, -1):
                self.fail(block, i, op, part, f"the predicate {quote(var.name)} must be a bool "
                                              "with one element, got "
                                              f"{var.dtype}{shapes.fmt(var.shape)}")

        if op.type == "cond":
            predicate("inputs.Cond[0]", block.find_var(op.inputs["Cond"][0]))
            for j, out in enumerate(op.outputs.get("Out", [])):
                var = block.find_var(out)
                for key in ("true_outs", "false_outs"):
                    src = var_in(a[key.replace("outs", "block")], a[key][j])
                    self.agree(block, i, op, f"outputs.Out[{j}]", var, src.shape, src.dtype,
                               f"{key}[{j}] {quote(src.name)} is")
        elif op.type == "while":
            predicate("attrs.cond_out", var_in(a["cond_block"], a["cond_out"]))
            for j, x in enumerate(op.inputs.get("X", [])):
                arg = var_in(a["body_block"], a["body_args"][j])
                pairs = [(f"inputs.X[{j}]", block.find_var(x)),
                         (f"attrs.cond_args[{j}]", var_in(a["cond_block"], a["cond_args"][j])),
                         (f"attrs.body_outs[{j}]", var_in(a["body_block"], a["body_outs"][j])),
                         (f"outputs.Out[{j}]", block.find_var(op.outputs["Out"][j]))]
                for part, var in pairs:
                    self.agree(block, i, op, part, var, arg.shape, arg.dtype,
                               f"the loop carries it as body_args[{j}] {quote(arg.name)},")
        elif op.type == "while_grad":
            self.while_grad_matches_its_loop(block, i, op)

    def forward_loop(self, block, i, op):
        """``(block, op)`` of the ``while`` whose saved carries a ``while_grad`` reads;
        None when the carries are fed (a backward run apart from its forward)."""
        stack = block.find_var(op.inputs["Carries"][0])
        for b in self.blocks:
            for other in b.ops:
                if other.type == "while" and any(
                        b.find_var(n) is stack for n in other.outputs.get("Carries", [])):
                    return b, other
        if stack.is_data or stack.name in self.feed:
            return None
        self.fail(block, i, op, "inputs.Carries[0]",
                  f"{quote(stack.name)} is not the saved carries (Carries output) of a while op")

    def while_grad_matches_its_loop(self, block, i, op) -> None:
        found = self.forward_loop(block, i, op)
        if found is None:
            return
        loop_block, loop = found
        a, la = _attrs(op), _attrs(loop)
        for key in ("body_block", "body_args"):
            if a[key] != la[key]:
                self.fail(block, i, op, f"attrs.{key}",
                          f"expected {quote(la[key])}, its while loop's {key}, "
                          f"got {quote(a[key])}")
        if a["saved"] != la["saved"][: len(a["saved"])]:
            self.fail(block, i, op, "attrs.saved",
                      f"expected the start of its while loop's saved list {quote(la['saved'])} "
                      f"(each saved iteration holds those values in that order), "
                      f"got {quote(a['saved'])}")
        if op.inputs.get("Input", []) != loop.inputs.get("Input", []):
            self.fail(block, i, op, "inputs.Input",
                      f"expected {quote(loop.inputs.get('Input', []))}, the values its while "
                      f"loop captures, got {quote(op.inputs.get('Input', []))}")
        grad_block, body = self.blocks[a["grad_block"]], self.blocks[a["body_block"]]
        pairs = []
        for slot, loop_slot, where in (("DOut", "Out", op.inputs), ("DX", "X", op.outputs)):
            names, values = where.get(slot, []), (loop.outputs if slot == "DOut"
                                                   else loop.inputs).get(loop_slot, [])
            part = f"{'inputs' if slot == 'DOut' else 'outputs'}.{slot}"
            if len(names) != len(values):
                self.fail(block, i, op, part, f"names {len(names)} values for the "
                                              f"{len(values)} {loop_slot} of its while loop")
            pairs += [(f"{part}[{j}]", block.find_var(n), loop_block.find_var(v))
                      for j, (n, v) in enumerate(zip(names, values))]
        pairs += [(f"attrs.grad_args[{j}]", grad_block.find_var(g), body.find_var(o))
                  for j, (g, o) in enumerate(zip(a["grad_args"], la["body_outs"]))]
        pairs += [(f"attrs.grad_outs[{j}]", grad_block.find_var(g), body.find_var(x))
                  for j, (g, x) in enumerate(zip(a["grad_outs"], a["body_args"]))]
        for part, var, value in pairs:
            self.agree(block, i, op, part, var, value.shape, value.dtype,
                       f"it is the gradient of {quote(value.name)}, which is")

    # ------------------------------------------------ 6. single definition

    def single_definition(self) -> None:
        defined: dict[int, str] = {}  # id(var) -> where it is defined
        for block in self.blocks:
            for op in block.ops:
                for key, names in op.attrs.items():
                    if key.endswith(_ARG_SUFFIX) and _is_control_flow(OPS[op.type]):
                        sub = self.blocks[op.attrs[key.split("_")[0] + "_block"]]
                        for n in names:
                            defined.setdefault(id(sub.vars[n]),
                                               f"an argument of block {sub.idx}")
        for block in self.blocks:
            for i, op in enumerate(block.ops):
                for slot, names in op.outputs.items():
                    for j, n in enumerate(names):
                        var = block.find_var(n)
                        if var.persistable:
                            continue
                        part = f"outputs.{slot}[{j}]"
                        if var.is_data:
                            self.fail(block, i, op, part, f"writes {quote(n)}, a data variable "
                                                          "(fed by the caller)")
                        if n not in block.vars:
                            owner = next(b.idx for b in _chain(block) if n in b.vars)
                            self.fail(block, i, op, part,
                                      f"writes {quote(n)}, a variable of the enclosing block "
                                      f"{owner}; a sub-block yields values through its "
                                      "op's outs instead")
                        first = defined.get(id(var))
                        if first is not None:
                            self.fail(block, i, op, part,
                                      f"{quote(n)} is defined twice (first by {first}); only "
                                      "persistable variables may be written again")
                        defined[id(var)] = f"block {block.idx}, op {i} ({op.type})"


# ------------------------------------------------------------------ helpers


def _is_control_flow(opdef: OpDef) -> bool:
    return any(k.endswith("_block") for k in opdef.attrs)


def _block_prefixes(opdef: OpDef) -> list[str]:
    return [k[: -len("_block")] for k in opdef.attrs if k.endswith("_block")]


def _attrs(op: Operator) -> dict:
    """The op's attrs over its type's defaults."""
    return {**OPS[op.type].attrs, **op.attrs}


def _chain(block: Block):
    while block is not None:
        yield block
        block = block.parent


def _meta(var: Var) -> Meta:
    return Meta(tuple(var.shape), var.dtype)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value) -> str:
    return quote(value, 60)


def _cut(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[: limit - 30] + f"... ({len(text):,} characters)"
