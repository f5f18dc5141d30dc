"""``share_conv_columns``: a convolution and its filter gradient share the columns."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.runtime.ir import Operator
from dy2stat.runtime.passes import share_conv_columns
from tests.runtime.test_fusion import _program, add, randn
from tests.runtime.test_passes import check, types


def _conv_and_filter_grad(x_shape, w_shape, attrs=None, write_between=False):
    p, g, v = _program(w=(w_shape, "float32"))
    x = g.create_var(x_shape, "float32", name="x", persistable=write_between,
                     is_data=not write_between)
    attrs = attrs or {}
    y = add(g, "conv2d", x, v["w"], **attrs)
    dy = add(g, "tanh", y)
    if write_between:  # x (a parameter here) changes between the forward and the gradient
        g.append_op(Operator("assign", {"X": [add(g, "exp", x).name]}, {"Out": ["x"]}, {}))
    dw = add(g, "conv2d_grad_filter", x, dy, v["w"], **attrs)
    return p, [y.name, dw.name]


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((2, 1, 20, 20), (3, 1, 5, 5), {"padding": [2, 2]}),  # rows of 20: batch-major columns
    ((3, 4, 7, 6), (4, 2, 3, 3), {"groups": 2}),  # short rows: batch-minor columns
    ((2, 2, 9, 9), (2, 2, 3, 3), {"stride": [2, 2], "dilation": [1, 1]}),
])
def test_the_pair_shares_columns_and_keeps_its_bits(x_shape, w_shape, attrs):
    program, fetch = _conv_and_filter_grad(x_shape, w_shape, attrs)
    feeds = [{"x": randn(*x_shape), "w": randn(*w_shape)}]
    out = check(share_conv_columns, program, fetch, feeds)
    assert types(out) == ["conv2d_keeping_columns", "tanh", "conv2d_grad_filter_from_columns"]


def test_an_input_written_in_between_or_a_1x1_filter_is_left_alone():
    program, fetch = _conv_and_filter_grad((2, 2, 6, 6), (3, 2, 3, 3), write_between=True)
    out = check(share_conv_columns, program, fetch, [{"w": randn(3, 2, 3, 3)}],
                {"x": randn(2, 2, 6, 6)})
    assert "conv2d_keeping_columns" not in types(out)
    program, fetch = _conv_and_filter_grad((2, 2, 6, 6), (3, 2, 1, 1))
    assert "conv2d_keeping_columns" not in types(share_conv_columns(program, fetch))


def test_an_unknown_batch_dim_shares_too():
    program, fetch = _conv_and_filter_grad((-1, 1, 20, 20), (3, 1, 5, 5))
    out = check(share_conv_columns, program, fetch, [{"x": randn(n, 1, 20, 20),
                                                      "w": randn(3, 1, 5, 5)} for n in (1, 3)])
    assert types(out)[0] == "conv2d_keeping_columns"


def test_a_converted_training_step_does_not_share_its_columns_by_default():
    """Whole LeNet steps stay eager's bit for bit; their plans copy the columns again in
    the filter gradients (kept from the forward, they were slower: see the pass's use
    in ``jit.program_runner``)."""
    rng = np.random.default_rng(0)
    x = d2s.to_tensor(rng.standard_normal((4, 1, 28, 28)).astype("float32"))
    y = d2s.to_tensor(rng.integers(0, 10, (4, 1)))
    results = []
    for convert in (False, True):
        d2s.seed(0)
        net = nn.Sequential(nn.Conv2D(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2D(2, 2),
                            nn.Conv2D(6, 16, 5), nn.ReLU(), nn.MaxPool2D(2, 2), nn.Flatten(),
                            nn.Linear(400, 10))
        step = _training_step(net, d2s.optimizer.Adam(parameters=net.parameters()))
        if convert:
            step = jit.to_static(step)
        results.append(([float(step(x, y)) for _ in range(3)],
                        [p.numpy() for p in net.parameters()]))
        if convert:
            plan = next(iter(step.concrete_program.runner._forward_plans.values()))
            assert plan.source.count("conv2d_keeping_columns(") == 0
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)


def _training_step(net, opt):
    def step(x, y):
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    return step
