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
