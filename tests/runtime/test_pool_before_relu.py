"""The pool-before-ReLU rewrite: same outputs and gradients, ReLU on the pooled map."""

from __future__ import annotations

import numpy as np
import pytest

from dy2stat.runtime import backward, executor
from dy2stat.runtime.executor import Scope
from dy2stat.runtime.passes import PASSES, pool_before_relu
from dy2stat.runtime.prune import clone_program
from dy2stat.runtime.verify import verify
from tests.runtime.programs import conv_relu, op

RNG = np.random.default_rng(11)


def conv_relu_pool(pool_attrs, extra_reader=False):
    """x -> conv2d -> relu -> max_pool2d -> sum; returns (program, loss, relu name)."""
    p, _, r = conv_relu((-1, 2, 9, 9), (3, 2, 3, 3))
    g = p.global_block()
    pooled = op(g, "max_pool2d", {"X": r}, pool_attrs)
    loss = op(g, "sum", {"X": pooled}, {"axis": None})
    if extra_reader:
        loss = op(g, "add", {"X": loss, "Y": op(g, "sum", {"X": r}, {"axis": None})})
    return p, loss, r


def loss_and_grads(program, loss, x, w):
    """loss, d loss/dx, d loss/dw, from the program with its backward appended."""
    p = clone_program(program)
    dx, dw = backward.gradients(p, loss, ["x", "w"])
    plan = executor.compile(p, ["x"], [loss, dx.name, dw.name])
    return plan.run({"x": x}, Scope({"w": w}))


@pytest.mark.parametrize("pool_attrs", [
    {"kernel_size": 2},                                   # tiled windows, a row left over
    {"kernel_size": 3, "stride": 2, "padding": 1},        # overlapping, padded
    {"kernel_size": [2, 3], "stride": 3, "ceil_mode": True},
])
def test_same_results_and_gradients_with_relu_after_the_pool(pool_attrs):
    program, loss, _ = conv_relu_pool(pool_attrs)
    moved = pool_before_relu(program, [loss])
    verify(moved)
    assert [o.type for o in moved.global_block().ops] == [
        "conv2d", "max_pool2d", "relu", "sum"]
    w = RNG.standard_normal((3, 2, 3, 3))
    for x in (RNG.standard_normal((4, 2, 9, 9)),
              -np.abs(RNG.standard_normal((4, 2, 9, 9))),  # every window's maximum is <= 0
              np.zeros((4, 2, 9, 9))):                      # ties everywhere
        want = loss_and_grads(program, loss, x, w)
        got = loss_and_grads(moved, loss, x, w)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_relu_read_elsewhere_or_kept_stays_put():
    program, loss, r = conv_relu_pool({"kernel_size": 2}, extra_reader=True)
    assert "relu" in [o.type for o in pool_before_relu(program, [loss]).global_block().ops[:2]]
    program, loss, r = conv_relu_pool({"kernel_size": 2})
    kept = pool_before_relu(program, [loss, r])
    assert [o.type for o in kept.global_block().ops] == ["conv2d", "relu", "max_pool2d", "sum"]


def test_registered_idempotent_and_input_unchanged():
    program, loss, _ = conv_relu_pool({"kernel_size": 2})
    before = str(program)
    once = PASSES["pool_before_relu"](program, [loss])
    assert str(program) == before
    assert str(pool_before_relu(once, [loss])) == str(once)


def test_passes_keep_where_ops_were_built():
    """clone_program (under every pass) keeps each op's origin for run-time errors."""
    program, loss, _ = conv_relu_pool({"kernel_size": 2})
    for i, o in enumerate(program.global_block().ops):
        o.origin = f"model.py:{i}"
    moved = pool_before_relu(program, [loss])
    origins = {o.type: o.origin for o in moved.global_block().ops}
    assert origins == {"conv2d": "model.py:0", "max_pool2d": "model.py:2",
                       "relu": "model.py:1", "sum": "model.py:3"}
