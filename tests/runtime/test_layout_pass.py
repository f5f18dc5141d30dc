"""The batch-minor layout pass: image ops on [C, H, W, N] arrays, same results.

Each program is run as built and after the pass (forward and backward, float64
so that only summation order differs); the rewritten program must keep every
fetched name with its NCHW value.
"""

from __future__ import annotations

import numpy as np
import pytest

from dy2stat.runtime import backward, executor
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.ir import Program
from dy2stat.runtime.passes import PASSES, batch_minor_layout
from dy2stat.runtime.prune import clone_program
from dy2stat.runtime.verify import verify
from tests.runtime.programs import conv_relu, op

RNG = np.random.default_rng(21)


def conv_net(conv_attrs, pool_attrs, vector=None):
    """x -> conv2d + bias -> max_pool2d -> relu (-> + a lower-rank ``vector``)
    -> conv2d -> sum; returns (program, loss, the fetched intermediates)."""
    p = Program()
    g = p.global_block()
    g.create_var((-1, 4, 10, 10), "float64", name="x", is_data=True)
    g.create_var((4, 4 // conv_attrs.get("groups", 1), 3, 3), "float64", name="w1",
                 persistable=True)
    g.create_var((1, 4, 1, 1), "float64", name="b1", persistable=True)
    g.create_var((3, 4, 2, 2), "float64", name="w2", persistable=True)
    c = op(g, "conv2d", {"X": "x", "Filter": "w1"}, conv_attrs)
    biased = op(g, "add", {"X": c, "Y": "b1"})
    pooled = op(g, "max_pool2d", {"X": biased}, pool_attrs)
    act = op(g, "relu", {"X": pooled})
    if vector is not None:
        g.create_var(vector, "float64", name="v", persistable=True)
        act = op(g, "add", {"X": act, "Y": "v"})
    c2 = op(g, "conv2d", {"X": act, "Filter": "w2"})
    loss = op(g, "sum", {"X": op(g, "multiply", {"X": c2, "Y": c2})}, {"axis": None})
    return p, loss, [biased, act]


def params(vector=None, groups=1):
    values = {"w1": RNG.standard_normal((4, 4 // groups, 3, 3)),
              "b1": RNG.standard_normal((1, 4, 1, 1)),
              "w2": RNG.standard_normal((3, 4, 2, 2))}
    if vector is not None:
        values["v"] = RNG.standard_normal(vector)
    return values


def run(program, loss, fetched, x, values, layout):
    """The loss, the fetched values and the gradients w.r.t. x and the parameters."""
    p = clone_program(program)
    grads = backward.gradients(p, loss, ["x", *values])
    fetches = [loss, *fetched, *(g.name for g in grads)]
    if layout:
        p = batch_minor_layout(p, fetches)
        verify(p)
    plan = executor.compile(p, ["x"], fetches, overlap=False)
    return p, plan.run({"x": x}, Scope(dict(values)))


CASES = [
    ({"padding": [1, 1]}, {"kernel_size": 2}, None),  # tiled pooling
    ({"stride": [2, 1], "dilation": [1, 2], "groups": 2},
     {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, None),
    ({"padding": [1, 1]}, {"kernel_size": 2}, (1, 4, 1, 1)),  # a per-channel operand
    ({"padding": [1, 1]}, {"kernel_size": 2}, (5,)),  # a row vector: stays NCHW
]


@pytest.mark.parametrize("conv_attrs, pool_attrs, vector", CASES)
def test_same_values_and_gradients_in_the_batch_minor_layout(conv_attrs, pool_attrs, vector):
    program, loss, fetched = conv_net(conv_attrs, pool_attrs, vector)
    values = params(vector, conv_attrs.get("groups", 1))
    x = RNG.standard_normal((3, 4, 10, 10))
    _, want = run(program, loss, fetched, x, values, layout=False)
    rewritten, got = run(program, loss, fetched, x, values, layout=True)
    types = [o.type for o in rewritten.global_block().ops]
    assert {"conv2d_chwn", "max_pool2d_chwn", "max_pool2d_grad_chwn", "conv2d_grad_input_chwn",
            "conv2d_grad_filter_chwn"} <= set(types)
    assert "conv2d" not in types and "max_pool2d" not in types
    for a, b in zip(got, want):
        assert a.shape == b.shape  # fetched under their own names, NCHW
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_an_operand_of_lower_rank_keeps_its_op_in_nchw():
    program, loss, _ = conv_net({"padding": [1, 1]}, {"kernel_size": 2}, vector=(5,))
    rewritten = batch_minor_layout(program, [loss])
    adds = [o for o in rewritten.global_block().ops if o.type == "add"]
    vector_add = next(o for o in adds if "v" in o.input_names())
    assert not any(n.endswith("@chwn") for n in vector_add.input_names())
    bias_add = next(o for o in adds if "v" not in o.input_names())
    assert all(n.endswith("@chwn") for n in bias_add.input_names())


def test_a_fetched_value_is_not_written_over_by_the_ops_after_it():
    # relu may run in place; the fetched input of it must keep its own values
    p, c, r = conv_relu((-1, 2, 6, 6), (2, 2, 3, 3))
    x, w = RNG.standard_normal((2, 2, 6, 6)), RNG.standard_normal((2, 2, 3, 3))
    want = executor.compile(p, ["x"], [c, r]).run({"x": x}, Scope({"w": w}))
    got = executor.compile(batch_minor_layout(p, [c, r]), ["x"], [c, r]).run(
        {"x": x}, Scope({"w": w}))
    assert (want[0] < 0).any()
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_the_input_program_is_not_changed_and_sub_blocks_leave_it_alone():
    program, loss, _ = conv_net({"padding": [1, 1]}, {"kernel_size": 2})
    before = [o.type for o in program.global_block().ops]
    batch_minor_layout(program, [loss])
    assert [o.type for o in program.global_block().ops] == before
    with_sub = clone_program(program)
    with_sub.create_block(0)
    same = batch_minor_layout(with_sub, [loss])
    assert [o.type for o in same.global_block().ops] == before
    assert PASSES["batch_minor_layout"] is batch_minor_layout


def test_converted_layers_use_it_on_numpy_unless_the_flag_is_off():
    import dy2stat as d2s
    from dy2stat import jit
    from dy2stat.vision.models import LeNet

    x = d2s.to_tensor(RNG.standard_normal((2, 1, 28, 28)).astype("float32"))
    sources = {}
    for flag in (True, False):
        d2s.set_flags({"batch_minor_layout": flag})
        try:
            net = jit.to_static(LeNet())
            net(x).sum().backward()
        finally:
            d2s.set_flags({"batch_minor_layout": True})
        runner = net.forward.concrete_program.runner
        sources[flag] = "".join(p.source for p in runner._plans.values())
    assert "conv2d_chwn" in sources[True] and "max_pool2d_grad_chwn" in sources[True]
    assert "_chwn" not in sources[False]


def test_a_gradient_through_the_rewritten_ops_is_an_error_and_bad_ranks_are_named():
    from dy2stat.runtime.registry import OPS, Meta

    p, _, r = conv_relu((-1, 2, 6, 6), (2, 2, 3, 3))
    loss = op(p.global_block(), "sum", {"X": r}, {"axis": None})
    with pytest.raises(ValueError, match="conv2d_chwn has no gradient rule: build the backward"):
        backward.gradients(batch_minor_layout(p, [loss]), loss, ["w"])
    f32 = np.dtype("float32")
    with pytest.raises(ValueError, match=r"conv2d_chwn: X must be 4-D \[C, H, W, N\], got"):
        OPS["conv2d_chwn"].infer(Meta((2, 3, 4), f32), Meta((2, 2, 3, 3), f32))
