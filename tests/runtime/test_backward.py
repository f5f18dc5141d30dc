"""Static backward (``runtime/backward.py``): structure, and gradients checked
against central finite differences in float64.

Programs run on two runners: a small reference interpreter written here from
the documented semantics of ``cond`` / ``while`` / ``while_grad``
(``runtime/ops/control_flow.py``), and the real executor
(``runtime/executor.py``) when it exists. They must agree.
"""

from __future__ import annotations

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import static
from dy2stat.dispatch import apply
from dy2stat.runtime import backward, build, executor
from dy2stat.runtime.ir import Program
from dy2stat.runtime.registry import get_op
from dy2stat.static import framework

rng = np.random.default_rng(7)


# ------------------------------------------------------ reference runner


class _Scope:
    def __init__(self, parent=None):
        self.vars = {}
        self.parent = parent

    def __getitem__(self, name):
        scope = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        raise KeyError(name)

    def __setitem__(self, name, value):
        self.vars[name] = value


def _run_block(program, block, scope):
    for op in block.ops:
        if op.type == "cond":
            pred = bool(np.asarray(scope[op.inputs["Cond"][0]]).reshape(()))
            key = "true" if pred else "false"
            child = _Scope(scope)
            _run_block(program, program.blocks[op.attrs[f"{key}_block"]], child)
            for name, src in zip(op.outputs["Out"], op.attrs[f"{key}_outs"]):
                scope[name] = child[src]
        elif op.type == "while":
            a = op.attrs
            carried = [scope[n] for n in op.inputs["X"]]
            stack = []
            while True:
                c = _Scope(scope)
                for n, v in zip(a["cond_args"], carried):
                    c[n] = v
                _run_block(program, program.blocks[a["cond_block"]], c)
                if not bool(np.asarray(c[a["cond_out"]]).reshape(())):
                    break
                stack.append(list(carried))
                b = _Scope(scope)
                for n, v in zip(a["body_args"], carried):
                    b[n] = v
                _run_block(program, program.blocks[a["body_block"]], b)
                carried = [b[n] for n in a["body_outs"]]
            for name, v in zip(op.outputs["Out"], carried):
                scope[name] = v
            for name in op.outputs.get("Carries", []):
                scope[name] = stack
        elif op.type == "while_grad":
            a = op.attrs
            stack = scope[op.inputs["Carries"][0]]
            dcarry = [scope[n] for n in op.inputs["DOut"]]
            caps = [scope[n] for n in op.inputs["Input"]]
            dinput = [np.zeros_like(v) for v in caps if np.asarray(v).dtype.kind == "f"]
            for carried in reversed(stack):
                s = _Scope(scope)
                for n, v in zip(a["body_args"], carried):
                    s[n] = v
                _run_block(program, program.blocks[a["body_block"]], s)
                for n, v in zip(a["grad_args"], dcarry):
                    s[n] = v
                _run_block(program, program.blocks[a["grad_block"]], s)
                dcarry = [s[n] for n in a["grad_outs"]]
                dinput = [d + s[n] for d, n in zip(dinput, a["grad_inputs"])]
            for name, v in zip(op.outputs["DX"], dcarry):
                scope[name] = v
            for name, v in zip(op.outputs["DInput"], dinput):
                scope[name] = v
        else:
            opdef = get_op(op.type)
            args = []
            for slot in opdef.inputs:
                names = op.inputs.get(slot.name, [])
                if slot.variadic:
                    args.append([scope[n] for n in names])
                else:
                    args.append(scope[names[0]] if names else None)
            out = opdef.kernel(np, *args, **{**opdef.attrs, **op.attrs})
            if len(opdef.outputs) == 1:
                out = (out,)
            for slot, value in zip(opdef.outputs, out):
                names = op.outputs.get(slot.name, [])
                if slot.variadic:
                    for n, v in zip(names, value):
                        scope[n] = np.asarray(v)
                elif names:
                    scope[names[0]] = np.asarray(value)


def run_reference(program, feed, fetch):
    scope = _Scope()
    for name, value in feed.items():
        scope[name] = np.asarray(value)
    _run_block(program, program.global_block(), scope)
    return [np.asarray(scope[n]) for n in fetch]


def run_executor(program, feed, fetch):
    exe = executor.Executor(xp=np)
    scope = executor.Scope()
    for name, value in feed.items():
        var = program.global_block().vars.get(name)
        if var is not None and var.persistable:
            scope[name] = np.asarray(value)
    feeds = {n: np.asarray(v) for n, v in feed.items()
             if not program.global_block().vars[n].persistable}
    return [np.asarray(v) for v in exe.run(program, feeds, list(fetch), scope)]


RUNNERS = [pytest.param(run_reference, id="reference"),
           pytest.param(run_executor, id="executor")]


# ------------------------------------------------------------- helpers


def build_program(fn, feeds, params=()):
    """Trace ``fn(**vars)`` into a new program; ``params`` become persistable vars."""
    program = Program()
    with static.program_guard(program, Program()), framework.static_guard(True):
        block = program.global_block()
        vars_ = {}
        for name, value in feeds.items():
            if name in params:
                block.create_var(value.shape, value.dtype, name=name, persistable=True)
                vars_[name] = static.Variable(block, name)
            else:
                vars_[name] = static.data(name, list(value.shape), str(value.dtype))
        out = fn(**vars_)
    return program, vars_, out


def numeric_grad(run, program, feed, loss_name, wrt, eps=1e-6):
    base = {k: np.array(v, dtype=v.dtype) for k, v in feed.items()}
    x = base[wrt]
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        (plus,) = run(program, base, [loss_name])
        flat[i] = old - eps
        (minus,) = run(program, base, [loss_name])
        flat[i] = old
        gflat[i] = (float(np.sum(plus)) - float(np.sum(minus))) / (2 * eps)
    return g


def check_gradients(run, fn, feed, wrt=None, params=(), rtol=1e-5, atol=1e-7):
    """Build ``fn``, take ``gradients(sum(out), wrt)`` and compare with finite differences."""
    if wrt is None:
        wrt = [n for n, v in feed.items() if v.dtype.kind == "f"]
    program, vars_, out = build_program(fn, feed, params)
    grads = static.gradients([out], [vars_[n] for n in wrt])
    fetch = [out.name] + [g.name for g in grads if g is not None]
    results = run(program, feed, fetch)
    got = dict(zip([g.name for g in grads if g is not None], results[1:]))
    for name, g in zip(wrt, grads):
        expected = numeric_grad(run, program, feed, out.name, name)
        actual = np.zeros_like(feed[name]) if g is None else got[g.name]
        assert actual.shape == feed[name].shape, (name, actual.shape)
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {name}")
    return program, results[0]


def randn(*shape):
    return rng.standard_normal(shape)


def scalar(value):
    return np.asarray(value, dtype="float64")


# ---------------------------------------------------------------- emitter


def test_block_emitter_appends_through_build():
    program = Program()
    block = program.global_block()
    x = block.create_var((2, 3), "float32", name="x")
    e = backward.BlockEmitter(block)
    y = e("scale", e("tanh", x), scale=2.0)
    z = e("add", y, 1.0)  # a Python scalar becomes a constant
    assert [op.type for op in block.ops] == ["tanh", "scale", "full", "add"]
    assert z.shape == (2, 3) and z.dtype == np.float32
    parts = e("split", z, num_or_sections=3, axis=1)
    assert len(parts) == 3 and parts[0].shape == (2, 1)


# ------------------------------------------------------ plain structure


def _linear_program():
    program = Program()
    block = program.global_block()
    x = block.create_var((4, 3), "float32", name="x", is_data=True, stop_gradient=True)
    w = block.create_var((3, 2), "float32", name="w", persistable=True)
    b = block.create_var((2,), "float32", name="b", persistable=True)
    frozen = block.create_var((2,), "float32", name="frozen", persistable=True,
                              stop_gradient=True)
    unused = block.create_var((2,), "float32", name="unused", persistable=True)
    h = build.append(block, "add", [build.append(block, "matmul", [x, w], {}), b], {})
    h = build.append(block, "add", [h, frozen], {})
    loss = build.append(block, "mean", [build.append(block, "tanh", [h], {})], {})
    build.append(block, "exp", [unused], {})  # not on the path to the loss
    return program, loss


def test_append_backward_pairs_names_and_pruning():
    program, loss = _linear_program()
    n_forward = len(program.global_block().ops)
    pairs = backward.append_backward(program, loss)
    assert [(p.name, g.name) for p, g in pairs] == [("w", "w@GRAD"), ("b", "b@GRAD")]
    for p, g in pairs:
        assert g.shape == p.shape and g.dtype == p.dtype
    new_ops = program.global_block().ops[n_forward:]
    assert new_ops[0].type == "full_like" and new_ops[0].attrs["value"] == 1.0
    assert not any(op.type == "exp" for op in new_ops)  # the unused branch got no grad ops
    # A second call names its gradients apart.
    again = backward.append_backward(program, loss.name, ["w"])
    assert again[0][1].name.startswith("w@GRAD_")


def test_append_backward_explicit_parameters_and_order():
    program, loss = _linear_program()
    pairs = backward.append_backward(program, loss, ["b", "unused", "w", "frozen"])
    # No path from "unused"; an explicit stop_gradient var is still a source.
    assert [p.name for p, _ in pairs] == ["b", "w", "frozen"]


def test_non_float_targets_and_unknown_names_are_errors():
    program = Program()
    block = program.global_block()
    i = block.create_var((3,), "int64", name="i", is_data=True)
    with pytest.raises(TypeError, match="only float"):
        backward.gradients(program, i, [i])
    with pytest.raises(ValueError, match="nope"):
        backward.gradients(program, "nope", [i])


# ------------------------------------------------- plain ops, numerically


@pytest.mark.parametrize("run", RUNNERS)
def test_mul_matmul_tanh_chain(run):
    feed = {"x": randn(4, 3), "w": randn(3, 5), "b": randn(5), "s": randn(1, 5)}

    def fn(x, w, b, s):
        h = d2s.tanh(d2s.matmul(x, w) + b)  # broadcasting over the batch
        h = h * s * h  # a value used twice
        return d2s.sum(d2s.sigmoid(h) / (1.0 + d2s.exp(h * 0.1)))

    check_gradients(run, fn, feed)


@pytest.mark.parametrize("run", RUNNERS)
def test_reductions_manipulation_and_no_grad_ops(run):
    feed = {"x": randn(2, 3, 4), "y": randn(4)}

    def fn(x, y):
        parts = d2s.split(x, 3, axis=1)
        z = d2s.concat([parts[2], parts[0] * y], axis=1)
        idx = d2s.argmax(z, axis=-1, keepdim=True)  # no gradient through argmax
        zz = z + d2s.cast(idx, "float64")
        return d2s.mean(d2s.reshape(zz, [4, -1]).max(axis=0)) + (x[:, 1] ** 2).sum()

    check_gradients(run, fn, feed)


@pytest.mark.parametrize("run", RUNNERS)
def test_parameters_via_append_backward(run):
    feed = {"x": randn(3, 4), "w": randn(4, 2)}
    program, vars_, loss = build_program(lambda x, w: d2s.mean(d2s.tanh(x @ w)), feed, ["w"])
    pairs = backward.append_backward(program, loss.desc)
    assert [(p.name, g.name) for p, g in pairs] == [("w", "w@GRAD")]
    (gw,) = run(program, feed, ["w@GRAD"])
    np.testing.assert_allclose(gw, numeric_grad(run, program, feed, loss.name, "w"),
                               rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("run", RUNNERS)
def test_target_gradients_seed(run):
    feed = {"x": randn(3), "g": randn(3)}
    program, vars_, _ = build_program(lambda x, g: x, feed)
    with static.program_guard(program), framework.static_guard(True):
        y = d2s.sin(vars_["x"]) * 3.0
    (gx,) = static.gradients([y], [vars_["x"]], [vars_["g"]])
    (value,) = run(program, feed, [gx.name])
    np.testing.assert_allclose(value, 3 * np.cos(feed["x"]) * feed["g"], rtol=1e-12)


# --------------------------------------------------------------- cond


def _branchy(x, w, p):
    def true_fn():
        return {"a": d2s.tanh(x * w), "pair": (x + 1.0, w * w)}

    def false_fn():
        return {"a": x * 3.0, "pair": (d2s.exp(w), x - w)}

    out = static.nn.cond(p.sum() > 0.0, true_fn, false_fn)
    return d2s.sum(out["a"] * out["pair"][0]) + d2s.sum(out["pair"][1] * x)


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true", "false"])
def test_cond_nested_structures_both_branches(run, sign):
    feed = {"x": randn(3), "w": randn(3), "p": scalar(sign)}
    program, _ = check_gradients(run, _branchy, feed, wrt=["x", "w"])
    conds = [op for op in program.global_block().ops if op.type == "cond"]
    assert len(conds) == 2  # the forward cond and its gradient
    fwd, grad = conds
    assert grad.inputs["Cond"] == fwd.inputs["Cond"]
    assert len(grad.outputs["Out"]) == 2  # x and w
    assert len(grad.attrs["true_outs"]) == len(grad.attrs["false_outs"]) == 2


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true", "false"])
def test_cond_branch_not_using_an_input_gives_zeros(run, sign):
    feed = {"x": randn(2, 2), "w": randn(2, 2), "p": scalar(sign)}

    def fn(x, w, p):
        y = static.nn.cond(p > 0.0, lambda: d2s.matmul(x, w), lambda: x * 2.0)
        return d2s.sum(y * y)

    check_gradients(run, fn, feed, wrt=["x", "w"])


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("signs", [(1, 1), (1, -1), (-1, 1), (-1, -1)])
def test_cond_nested_in_cond(run, signs):
    feed = {"x": randn(3), "w": randn(3), "p": scalar(signs[0]), "q": scalar(signs[1])}

    def fn(x, w, p, q):
        def outer_true():
            inner = static.nn.cond(q > 0.0, lambda: d2s.sin(x) * w, lambda: x * x)
            return inner + w

        def outer_false():
            return static.nn.cond(q > 0.0, lambda: w * 2.0, lambda: d2s.tanh(w * x))

        return d2s.sum(static.nn.cond(p > 0.0, outer_true, outer_false) * x)

    check_gradients(run, fn, feed, wrt=["x", "w"])


@pytest.mark.parametrize("run", RUNNERS)
def test_cond_returning_a_captured_value_unchanged(run):
    feed = {"x": randn(3), "p": scalar(1.0)}

    def fn(x, p):
        return d2s.sum(static.nn.cond(p > 0.0, lambda: x, lambda: x * x) * x)

    check_gradients(run, fn, feed, wrt=["x"])
    feed["p"] = scalar(-1.0)
    check_gradients(run, fn, feed, wrt=["x"])


# -------------------------------------------------------------- while


def _power_loop(x, w, n):
    """y = x; repeat n times: y = tanh(y * w) + x (x, w captured)."""
    i0 = d2s.zeros([], "int64")

    def body(i, y):
        return i + 1, d2s.tanh(y * w) + x

    _, y = static.nn.while_loop(lambda i, y: i < n, body, [i0, x])
    return d2s.sum(y * y)


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("trips", [0, 1, 5])
def test_while_zero_one_many_iterations(run, trips):
    feed = {"x": randn(3), "w": randn(3), "n": np.asarray(trips, dtype="int64")}
    program, _ = check_gradients(run, _power_loop, feed, wrt=["x", "w"])
    (loop,) = [op for op in program.global_block().ops if op.type == "while"]
    (grad,) = [op for op in program.global_block().ops if op.type == "while_grad"]
    assert loop.outputs["Carries"] == grad.inputs["Carries"] != []
    assert grad.inputs["Input"] == loop.inputs["Input"]
    assert len(grad.outputs["DX"]) == len(loop.inputs["X"])
    assert program.blocks[grad.attrs["grad_block"]].parent_idx == loop.attrs["body_block"]


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("start", [0.1, 1.0, 30.0], ids=["many", "few", "none"])
def test_data_dependent_while(run, start):
    """``while x.sum() < limit: x = x * 1.5 + w``: the trip count comes from the data."""
    feed = {"x": np.array([start, 0.2, 0.3]), "w": np.array([0.5, -0.1, 0.25]),
            "limit": scalar(20.0)}

    def fn(x, w, limit):
        (y,) = static.nn.while_loop(lambda v: v.sum() < limit, lambda v: [v * 1.5 + w], [x])
        return d2s.sum(y * y)

    check_gradients(run, fn, feed, wrt=["x", "w"], rtol=1e-6)


@pytest.mark.parametrize("run", RUNNERS)
def test_while_nested_structures_and_unused_carry(run):
    feed = {"x": randn(2, 2), "w": randn(2, 2), "n": np.asarray(3, dtype="int64")}

    def fn(x, w, n):
        def body(i, state):
            a, b = state["a"], state["b"]
            return i + 1, {"a": d2s.matmul(a, w) * 0.5, "b": b + d2s.sin(a),
                           "junk": state["junk"] * 2.0}

        _, out = static.nn.while_loop(
            lambda i, s: i < n, body,
            [d2s.zeros([], "int64"), {"a": x, "b": x * 0.0, "junk": w}])
        return d2s.sum(out["b"] * out["a"])  # "junk" never reaches the loss

    check_gradients(run, fn, feed, wrt=["x", "w"])


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("trips", [(0, 2), (2, 0), (3, 2)])
def test_while_nested_in_while(run, trips):
    feed = {"x": randn(3), "w": randn(3) * 0.5, "n": np.asarray(trips[0], dtype="int64"),
            "m": np.asarray(trips[1], dtype="int64")}

    def fn(x, w, n, m):
        def outer_body(i, y):
            def inner_body(j, z):
                return j + 1, d2s.sin(z * w) + y

            _, z = static.nn.while_loop(lambda j, z: j < m, inner_body,
                                        [d2s.zeros([], "int64"), y * 0.5])
            return i + 1, z * w + 0.1

        _, y = static.nn.while_loop(lambda i, y: i < n, outer_body,
                                    [d2s.zeros([], "int64"), x])
        return d2s.sum(y * x)

    check_gradients(run, fn, feed, wrt=["x", "w"])


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("signs", [(-1.0, 0.6), (1.0, -0.4), (0.3, 0.7)])
def test_cond_nested_in_while(run, signs):
    """The branch taken changes from iteration to iteration."""
    feed = {"x": np.asarray(signs), "w": randn(2)}

    def fn(x, w):
        def body(i, y):
            z = static.nn.cond(y.sum() > 0.0, lambda: y * w - 1.0, lambda: d2s.tanh(y) + w * w)
            return i + 1, z

        _, y = static.nn.while_loop(lambda i, y: i < 4, body, [d2s.zeros([], "int64"), x])
        return d2s.sum(y * y)

    check_gradients(run, fn, feed)


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true", "false"])
@pytest.mark.parametrize("trips", [0, 1, 3])
def test_while_nested_in_cond(run, sign, trips):
    feed = {"x": randn(3), "w": randn(3) * 0.5, "p": scalar(sign),
            "n": np.asarray(trips, dtype="int64")}

    def fn(x, w, p, n):
        def looped():
            _, y = static.nn.while_loop(lambda i, y: i < n,
                                        lambda i, y: (i + 1, d2s.tanh(y + w) * x),
                                        [d2s.zeros([], "int64"), x * w])
            return y

        return d2s.sum(static.nn.cond(p > 0.0, looped, lambda: x * w * w) * x)

    check_gradients(run, fn, feed, wrt=["x", "w"])


@pytest.mark.parametrize("run", RUNNERS)
def test_gradient_wrt_parameter_inside_loop_and_branch(run):
    feed = {"x": randn(2, 3), "w": randn(3, 3) * 0.4, "b": randn(3)}

    def fn(x, w, b):
        def body(i, h):
            h = d2s.tanh(d2s.matmul(h, w) + b)
            h = static.nn.cond(h.mean() > 0.0, lambda: h * 2.0, lambda: h - b)
            return i + 1, h

        _, h = static.nn.while_loop(lambda i, h: i < 3, body, [d2s.zeros([], "int64"), x])
        return d2s.mean(h * h)

    program, vars_, loss = build_program(fn, feed, params=["w", "b"])
    pairs = backward.append_backward(program, loss.desc)
    assert [p.name for p, _ in pairs] == ["w", "b"]
    got = run(program, feed, [g.name for _, g in pairs])
    for (p, _), value in zip(pairs, got):
        np.testing.assert_allclose(value, numeric_grad(run, program, feed, loss.name, p.name),
                                   rtol=1e-5, atol=1e-8)


# ------------------------------------------------------ nn ops (MNIST-like)


@pytest.mark.parametrize("run", RUNNERS)
def test_small_convnet_with_batch_norm_and_cross_entropy(run):
    """conv, batch norm (several outputs), pool, reshape, linear, cross entropy."""
    feed = {"x": randn(2, 1, 6, 6), "k": randn(3, 1, 3, 3) * 0.5, "scale": randn(3),
            "w": randn(12, 4) * 0.3, "label": np.asarray([1, 3], dtype="int64"),
            "mean": np.zeros(3), "var": np.ones(3)}

    def fn(x, k, scale, w, label, mean, var):
        h = apply("conv2d", x, k, padding=[1, 1])
        h = apply("batch_norm", h, mean, var, scale, None)[0]
        h = apply("max_pool2d", d2s.relu(h), kernel_size=3)
        logits = d2s.matmul(d2s.reshape(h, [2, 12]), w)
        return apply("cross_entropy", logits, label)

    check_gradients(run, fn, feed, wrt=["x", "k", "scale", "w"], rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------- round trip


def test_backward_program_survives_serialization():
    """A program with cond/while gradients saves and loads (attrs are plain data)."""
    serialize = pytest.importorskip("dy2stat.runtime.serialize")
    feed = {"x": np.asarray([0.3, -0.8]), "w": randn(2), "n": np.asarray(3, dtype="int64")}

    def fn(x, w, n):
        def body(i, y):
            z = static.nn.cond(y.sum() > 0.0, lambda: y * w - 1.0, lambda: d2s.tanh(y) + w)
            return i + 1, z

        _, y = static.nn.while_loop(lambda i, y: i < n, body, [d2s.zeros([], "int64"), x])
        return d2s.sum(y * y)

    program, vars_, out = build_program(fn, feed)
    grads = static.gradients([out], [vars_["x"], vars_["w"]])
    fetch = [g.name for g in grads]
    text = serialize.program_to_json(program, list(feed), fetch)
    loaded, _, _ = serialize.program_from_json(text)
    for a, b in zip(run_reference(program, feed, fetch), run_reference(loaded, feed, fetch)):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------- flow and aliasing


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("trips", [0, 1, 4])
def test_while_swapped_and_unchanged_carries(run, trips):
    """body returns (b, a, c): the gradients of the carries swap every iteration."""
    feed = {"a": randn(3), "b": randn(3), "c": randn(3), "n": np.asarray(trips, dtype="int64")}

    def fn(a, b, c, n):
        def body(i, x, y, z):
            return i + 1, y * z, x, z

        _, x, y, z = static.nn.while_loop(lambda i, *_: i < n, body,
                                          [d2s.zeros([], "int64"), a, b, c])
        return d2s.sum(x * 2.0 + y * y * 3.0 + z)

    check_gradients(run, fn, feed, wrt=["a", "b", "c"])


@pytest.mark.parametrize("run", RUNNERS)
def test_detach_and_unreached_inputs(run):
    feed = {"x": randn(3), "w": randn(3), "v": randn(3)}
    program, vars_, _ = build_program(lambda x, w, v: x, feed)
    x, w, v = vars_["x"], vars_["w"], vars_["v"]
    with static.program_guard(program), framework.static_guard(True):
        out = d2s.sum(x * w + (x * x).detach() * w)
    gx, gw, gv = static.gradients([out], [x, w, v])
    assert gv is None
    got_x, got_w = run(program, feed, [gx.name, gw.name])
    np.testing.assert_allclose(got_x, feed["w"], rtol=1e-12)  # nothing through detach
    np.testing.assert_allclose(got_w, feed["x"] + feed["x"] ** 2, rtol=1e-12)


def test_forward_ops_are_left_alone_and_recompute_is_pruned():
    feed = {"x": randn(3), "p": scalar(1.0)}

    def fn(x, p):
        def true_fn():
            d2s.exp(x) * 5.0  # computed, but the branch does not return it
            return d2s.sin(x) * 2.0

        return d2s.sum(static.nn.cond(p > 0.0, true_fn, lambda: x))

    program, vars_, out = build_program(fn, feed)
    before = [str(op) for op in program.global_block().ops]
    branches = [str(b) for b in program.blocks]
    static.gradients([out], [vars_["x"]])
    assert [str(op) for op in program.global_block().ops][:len(before)] == before
    assert [str(b) for b in program.blocks[1:len(branches)]] == branches[1:]
    fwd, grad = [op for op in program.global_block().ops if op.type == "cond"]
    recomputed = [op.type for op in program.blocks[grad.attrs["true_block"]].ops]
    assert "exp" not in recomputed and "cos" in recomputed
    assert program.blocks[grad.attrs["false_block"]].ops == []  # d x / d x: the seed itself
    assert grad.attrs["false_outs"] == grad.inputs["Input"][-1:]


@pytest.mark.parametrize("run", RUNNERS)
@pytest.mark.parametrize("trips", [0, 1, 3])
def test_while_carry_whose_shape_grows(run, trips):
    """A carried value gets a -1 dim (it grows each iteration); gradients still flow."""
    feed = {"x": randn(2), "w": randn(1), "n": np.asarray(trips, dtype="int64")}

    def fn(x, w, n):
        def body(i, y):
            return i + 1, d2s.concat([y, d2s.tanh(y[-1:]) * w + y[:1]])

        _, y = static.nn.while_loop(lambda i, y: i < n, body, [d2s.zeros([], "int64"), x])
        assert y.shape == [-1]
        return d2s.sum(y * y)

    check_gradients(run, fn, feed)
