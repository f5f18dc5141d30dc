"""A cached converted call: the values it reads now, whichever path the call takes."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.runtime import batch_split
from dy2stat.static import InputSpec


def forward_numpy(net, x):
    return x @ net.weight.numpy() + net.bias.numpy()


def test_a_parameter_given_a_new_array_is_read_by_the_next_call():
    net = nn.Linear(3, 2)
    static = d2s.jit.to_static(nn.Linear(3, 2))
    static.set_state_dict(net.state_dict())
    x = d2s.randn([4, 3])
    with d2s.no_grad():
        for _ in range(3):
            np.testing.assert_allclose(static(x).numpy(), forward_numpy(static, x.numpy()),
                                       rtol=1e-5, atol=1e-6)
            static.weight._data = static.weight._data * 2  # a new array, as a loader gives
            static.bias.set_value(static.bias.numpy() + 1)  # the same array, new values


def test_a_large_batch_after_small_ones_is_split_with_the_same_values(monkeypatch):
    monkeypatch.setattr(batch_split, "MIN_WORK", 0)
    d2s.set_flags({"batch_parallelism": True})
    try:
        static = d2s.jit.to_static(nn.Linear(6, 5), input_spec=[InputSpec([None, 6])])
        with d2s.no_grad():
            for rows in (1, 2, 64, 1, 64):
                x = d2s.randn([rows, 6])
                np.testing.assert_allclose(static(x).numpy(), forward_numpy(static, x.numpy()),
                                           rtol=1e-5, atol=1e-6)
        assert len(static.forward.program_cache) == 1  # one program for every batch
    finally:
        d2s.set_flags({"batch_parallelism": False})


def test_a_plan_fed_the_wrong_number_of_arrays_says_so():
    @d2s.jit.to_static
    def f(x, y):
        return x + y

    with d2s.no_grad():
        f(d2s.ones([2]), d2s.ones([2]))
    (plan,) = f.concrete_program.runner._plans.values()
    with pytest.raises(ValueError, match="takes 2 feeds"):
        plan.run_in_order([np.ones(2, "float32")], (), {})


class _Scaled(nn.Layer):
    """A Linear, a dropout and a Python attribute the trace reads."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.drop = nn.Dropout(0.5)
        self.scale = 2.0

    def forward(self, x):
        return self.drop(self.linear(x)) * self.scale


def _scaled_numpy(net, x):
    return forward_numpy(net.linear, x.numpy()) * net.scale


def test_repeated_calls_follow_shapes_dtypes_modes_attributes_and_parameters():
    """Calls repeating the last one's shapes run its plan directly; every change of what
    the program depends on still gives what the layer computes now."""
    d2s.seed(0)
    net = _Scaled()
    net.eval()
    static = d2s.jit.to_static(net)
    x, wide, other = d2s.randn([2, 4]), d2s.randn([5, 4]), d2s.randn([2, 4], "float64")
    with d2s.no_grad():
        for _ in range(3):
            np.testing.assert_allclose(static(x).numpy(), _scaled_numpy(net, x), rtol=1e-5)
        assert static.forward.program_cache.repeat is not None  # the path is taken
        np.testing.assert_allclose(static(wide).numpy(), _scaled_numpy(net, wide), rtol=1e-5)
        np.testing.assert_allclose(static(x).numpy(), _scaled_numpy(net, x), rtol=1e-5)
        got = static(other).numpy()
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, _scaled_numpy(net, other), rtol=1e-5)
        for _ in range(2):
            net.scale = 3.0  # a value the trace read
            np.testing.assert_allclose(static(x).numpy(), _scaled_numpy(net, x), rtol=1e-5)
        net.linear.weight.set_value(net.linear.weight.numpy() - 1.0)
        np.testing.assert_allclose(static(x).numpy(), _scaled_numpy(net, x), rtol=1e-5)
        net.train()  # dropout now drops half the values and doubles the rest
        dropped = static(d2s.ones([64, 4])).numpy()
        kept = _scaled_numpy(net, d2s.ones([64, 4]))
        assert (dropped == 0).any()
        np.testing.assert_allclose(dropped[dropped != 0], 2 * kept[dropped != 0], rtol=1e-5)
        net.eval()
        for _ in range(2):
            np.testing.assert_allclose(static(x).numpy(), _scaled_numpy(net, x), rtol=1e-5)
        np.testing.assert_allclose(static(x.numpy()).numpy(), _scaled_numpy(net, x),
                                   rtol=1e-5)  # an array, not a Tensor
    y = static(x)  # recording gradients: the program's tape node
    assert not y.stop_gradient
    y.sum().backward()
    bias_grad = np.full(3, 2 * 3.0)  # 2 rows, scale 3
    np.testing.assert_allclose(net.linear.bias.grad.numpy(), bias_grad, rtol=1e-6)


def test_a_cleared_cache_forgets_the_repeated_program():
    static = d2s.jit.to_static(nn.Linear(3, 2))
    x = d2s.randn([1, 3])
    with d2s.no_grad():
        static(x), static(x)
        cache = static.forward.program_cache
        assert cache.repeat is not None
        cache.clear()
        assert cache.repeat is None
        np.testing.assert_allclose(static(x).numpy(), forward_numpy(static, x.numpy()),
                                   rtol=1e-5, atol=1e-6)


def test_repeated_calls_with_an_input_spec_defaults_and_star_args():
    """The repeat path for calls bound through the signature: an input_spec, a default
    left out, ``*args``; any other call still binds, checks and keys."""
    static = d2s.jit.to_static(nn.Linear(3, 2), input_spec=[InputSpec([None, 3], "float32")])

    @d2s.jit.to_static
    def scaled(x, scale=2.0):
        return x * scale

    @d2s.jit.to_static
    def total(*xs):
        return sum(xs)

    a, b = d2s.randn([4, 3]), d2s.randn([4, 3])
    with d2s.no_grad():
        for x in (a, b, a, d2s.randn([7, 3]), a):
            np.testing.assert_allclose(static(x).numpy(), forward_numpy(static, x.numpy()),
                                       rtol=1e-5, atol=1e-6)
        assert static.forward.program_cache.repeat is not None
        assert len(static.forward.program_cache) == 1  # one program for every batch
        with pytest.raises(ValueError, match="input_spec"):
            static(d2s.randn([4, 5]))
        for _ in range(2):
            np.testing.assert_allclose(scaled(a).numpy(), a.numpy() * 2, rtol=1e-6)
        np.testing.assert_allclose(scaled(a, 3.0).numpy(), a.numpy() * 3, rtol=1e-6)
        np.testing.assert_allclose(scaled(a, scale=4.0).numpy(), a.numpy() * 4, rtol=1e-6)
        np.testing.assert_allclose(scaled(a).numpy(), a.numpy() * 2, rtol=1e-6)
        for args in ((a, b), (b, a), (a,), (a, b, b), (b, a)):
            np.testing.assert_allclose(total(*args).numpy(),
                                       sum(t.numpy() for t in args), rtol=1e-6)
