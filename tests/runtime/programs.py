"""Small hand-built programs and a tiny NumPy interpreter for the runtime tests.

Programs are built directly with ``runtime.ir`` (shape/dtype inference from
the registry), so these tests do not depend on the static-mode frontend.
"""

from __future__ import annotations

import numpy as np

import dy2stat  # noqa: F401  (registers every op)
from dy2stat.runtime import ops as _ops  # noqa: F401
from dy2stat.runtime.ir import Block, Operator, Program
from dy2stat.runtime.registry import get_op


def op(block: Block, type: str, inputs: dict, attrs=None, out: str | None = None, **flags):
    """Append ``type`` reading ``inputs`` (slot -> name or list); return its output name."""
    opdef = get_op(type)
    attrs = dict(attrs or {})
    full = opdef.full_attrs(attrs)
    slots, metas = {}, []
    for slot in opdef.inputs:
        value = inputs.get(slot.name, [] if (slot.variadic or slot.optional) else None)
        names = [value] if isinstance(value, str) else list(value)
        slots[slot.name] = names
        found = [block.var(n) for n in names]
        if slot.variadic:
            metas.append([_meta(v) for v in found])
        else:
            metas.append(_meta(found[0]) if found else None)
    meta = opdef.infer(*metas, **full)
    assert len(opdef.outputs) == 1 and not opdef.outputs[0].variadic
    var = block.create_var(meta.shape, meta.dtype, name=out or block.program.unique_name(type),
                           **flags)
    block.append_op(Operator(type, slots, {opdef.outputs[0].name: [var.name]}, attrs))
    return var.name


def _meta(var):
    from dy2stat.runtime.registry import Meta

    return Meta(tuple(var.shape), var.dtype)


def mlp() -> tuple[Program, dict]:
    """x[-1,4] -> relu(x @ w + b) -> clip(max=6) = y, plus a dead scale op.

    Returns the program and its parameters."""
    p = Program()
    g = p.global_block()
    g.create_var((-1, 4), "float32", name="x", is_data=True)
    g.create_var((4, 3), "float32", name="fc_0.w", persistable=True)
    g.create_var((3,), "float32", name="fc_0.b", persistable=True)
    h = op(g, "matmul", {"X": "x", "Y": "fc_0.w"}, out="h")
    h2 = op(g, "add", {"X": h, "Y": "fc_0.b"}, out="h2")
    r = op(g, "relu", {"X": h2}, out="r")
    op(g, "clip", {"X": r}, {"max": 6.0}, out="y")
    op(g, "scale", {"X": h}, {"scale": 2.0, "bias": float("nan")}, out="dead")
    rng = np.random.default_rng(0)
    params = {
        "fc_0.w": rng.standard_normal((4, 3)).astype(np.float32),
        "fc_0.b": rng.standard_normal(3).astype(np.float32),
    }
    return p, params


def conv_relu(x_shape, w_shape) -> tuple[Program, str, str]:
    """x -> conv2d (padding 1, float64) -> relu; returns the program and the two names."""
    p = Program()
    g = p.global_block()
    g.create_var(x_shape, "float64", name="x", is_data=True)
    g.create_var(w_shape, "float64", name="w", persistable=True)
    c = op(g, "conv2d", {"X": "x", "Filter": "w"}, {"padding": [1, 1]})
    return p, c, op(g, "relu", {"X": c})


def with_cond() -> Program:
    """y = cond(p, relu(x), scale(x)); z = an unused second cond (dead)."""
    p = Program()
    g = p.global_block()
    g.create_var((2,), "float32", name="x", is_data=True)
    g.create_var((), "bool", name="pred", is_data=True)

    def branch(body):
        block = p.create_block(0)
        return block, body(block)

    tb, t = branch(lambda b: op(b, "relu", {"X": "x"}))
    fb, f = branch(lambda b: op(b, "scale", {"X": "x"}, {"scale": 3.0}))
    g.create_var((2,), "float32", name="y")
    g.append_op(Operator("cond", {"Cond": ["pred"], "Input": ["x"]}, {"Out": ["y"]},
                         {"true_block": tb.idx, "false_block": fb.idx,
                          "true_outs": [t], "false_outs": [f]}))
    tb2, t2 = branch(lambda b: op(b, "neg", {"X": "x"}))
    fb2, f2 = branch(lambda b: op(b, "exp", {"X": "x"}))
    g.create_var((2,), "float32", name="z")
    g.append_op(Operator("cond", {"Cond": ["pred"], "Input": ["x"]}, {"Out": ["z"]},
                         {"true_block": tb2.idx, "false_block": fb2.idx,
                          "true_outs": [t2], "false_outs": [f2]}))
    op(g, "add", {"X": "y", "Y": "x"}, out="w")
    return p


def with_while() -> Program:
    """i = 0; while i < n: i = i + step  (step captured); plus a dead op."""
    p = Program()
    g = p.global_block()
    g.create_var((), "int64", name="n", is_data=True)
    g.create_var((), "int64", name="step", persistable=True)
    zero = op(g, "full", {}, {"shape": [], "value": 0.0, "dtype": "int64"}, out="i0")
    cb = p.create_block(0)
    cb.create_var((), "int64", name="ci")
    c = op(cb, "less_than", {"X": "ci", "Y": "n"})
    bb = p.create_block(0)
    bb.create_var((), "int64", name="bi")
    b = op(bb, "add", {"X": "bi", "Y": "step"})
    g.create_var((), "int64", name="i")
    g.append_op(Operator("while", {"X": [zero], "Input": ["n", "step"]},
                         {"Out": ["i"], "Carries": []},
                         {"cond_block": cb.idx, "body_block": bb.idx, "cond_args": ["ci"],
                          "cond_out": c, "body_args": ["bi"], "body_outs": [b]}))
    op(g, "neg", {"X": "n"}, out="dead")
    return p


def run(program: Program, feed: dict, params: dict, fetch: list[str]) -> list[np.ndarray]:
    """Interpret ``program`` with NumPy kernels (cond supported; enough for these tests)."""
    env = dict(params)
    env.update(feed)
    _run_block(program, program.global_block(), env)
    return [env[n] for n in fetch]


def _run_block(program, block, env):
    for o in block.ops:
        if o.type == "cond":
            taken = bool(np.asarray(env[o.inputs["Cond"][0]]))
            key = "true" if taken else "false"
            inner = dict(env)
            _run_block(program, program.blocks[o.attrs[f"{key}_block"]], inner)
            for name, src in zip(o.outputs["Out"], o.attrs[f"{key}_outs"]):
                env[name] = inner[src]
            continue
        if o.type == "while":
            carried = [env[n] for n in o.inputs["X"]]
            while True:
                inner = dict(env, **dict(zip(o.attrs["cond_args"], carried)))
                _run_block(program, program.blocks[o.attrs["cond_block"]], inner)
                if not bool(inner[o.attrs["cond_out"]]):
                    break
                inner = dict(env, **dict(zip(o.attrs["body_args"], carried)))
                _run_block(program, program.blocks[o.attrs["body_block"]], inner)
                carried = [inner[n] for n in o.attrs["body_outs"]]
            env.update(zip(o.outputs["Out"], carried))
            continue
        opdef = get_op(o.type)
        args = []
        for slot in opdef.inputs:
            names = o.inputs.get(slot.name, [])
            if slot.variadic:
                args.append([env[n] for n in names])
            else:
                args.append(env[names[0]] if names else None)
        out = opdef.kernel(np, *args, **opdef.full_attrs(o.attrs))
        (name,) = o.outputs[opdef.outputs[0].name]
        env[name] = np.asarray(out)
