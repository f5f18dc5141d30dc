"""Python values read while tracing are guarded: change one and the converted call
traces again (and says why) instead of running a program built on the old value."""

import dataclasses
import logging

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from tests.jit.helpers import tensor

SCALE = 2.0
ACTIVATION = None
OPTIONS = {"shift": 1.0}


class Thresholded(nn.Layer):
    def __init__(self):
        super().__init__()
        self.threshold = 0.5
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        y = self.fc(x)
        if y.mean() > self.threshold:  # a tensor predicate against a Python attribute
            return y * 2
        return y - self.threshold


def both(make, *calls):
    """The eager and the converted twin of ``make()`` (same weights), called in step:
    ``calls`` are (change, input) pairs; the results of every call are compared."""
    d2s.seed(0)
    eager = make()
    converted = make()
    converted.set_state_dict(eager.state_dict())
    jit.to_static(converted)
    for change, x in calls:
        for net in (eager, converted):
            change(net)
        np.testing.assert_allclose(converted(x).numpy(), eager(x).numpy(), rtol=1e-5)
    return converted


def test_a_changed_layer_attribute_retraces_and_the_log_names_it(caplog):
    x = tensor([2, 3])
    jit.set_verbosity(1)
    caplog.set_level(logging.INFO, logger="dy2stat")

    def keep(net):
        pass

    def low(net):
        net.threshold = -100.0

    def high(net):
        net.threshold = 100.0

    converted = both(Thresholded, (keep, x), (low, x), (high, x), (keep, x))
    assert len(converted.forward.program_cache) == 3
    messages = [r.getMessage() for r in caplog.records if "retracing" in r.getMessage()]
    assert "retracing forward: self.threshold changed from 0.5 to -100.0" in messages
    assert "retracing forward: self.threshold changed from 0.5 to 100.0" in messages


def test_setting_an_attribute_back_reuses_the_first_program():
    x = tensor([2, 3])
    net = jit.to_static(Thresholded())
    first = net(x).numpy()
    net.threshold = 3.0
    net(x)
    net.threshold = 0.5
    np.testing.assert_allclose(net(x).numpy(), first)
    assert len(net.forward.program_cache) == 2


class Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.alpha = 1.0
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x) * self.alpha


class Outer(nn.Layer):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.norm = nn.LayerNorm(3)
        self.use_norm = True

    def forward(self, x):
        h = self.block(x)
        if self.use_norm:
            h = self.norm(h)
        return h


def test_attributes_of_sublayers_and_framework_layers_are_guarded(caplog):
    x = tensor([2, 3], seed=1)
    jit.set_verbosity(1)
    caplog.set_level(logging.INFO, logger="dy2stat")

    def same(net):
        pass

    def alpha(net):
        net.block.alpha = -3.0

    def no_norm(net):
        net.use_norm = False

    def epsilon(net):  # read by LayerNorm's own (unconverted) forward
        net.use_norm = True
        net.norm.epsilon = 10.0

    both(Outer, (same, x), (alpha, x), (no_norm, x), (epsilon, x))
    messages = " | ".join(r.getMessage() for r in caplog.records)
    assert "self.block.alpha changed from 1.0 to -3.0" in messages
    assert "self.use_norm changed from True to False" in messages
    assert "self.norm.epsilon changed from 1e-05 to 10.0" in messages


def test_replacing_a_sublayer_or_a_parameter_retraces():
    x = tensor([2, 3], seed=2)

    def same(net):
        pass

    def new_fc(net):
        d2s.seed(5)
        net.block.fc = nn.Linear(3, 3)

    def new_weight(net):
        fc = net.block.fc
        fc.weight = fc.create_parameter([3, 3])
        fc.weight.set_value(np.eye(3, dtype="float32"))

    both(Outer, (same, x), (new_fc, x), (new_weight, x))


def test_sublayer_hooks_are_guarded():
    x = tensor([2, 3], seed=3)
    net = jit.to_static(Outer())
    plain = net(x).numpy()
    handle = net.block.register_forward_post_hook(lambda layer, inputs, out: out * 0)
    np.testing.assert_allclose(net(x).numpy(), net.norm(net.block(x) * 0).numpy(), atol=1e-6)
    handle.remove()
    np.testing.assert_allclose(net(x).numpy(), plain, rtol=1e-6)
    assert len(net.forward.program_cache) == 2


def test_module_globals_read_while_tracing_are_guarded(caplog):
    global SCALE, ACTIVATION

    @jit.to_static
    def scaled(x):
        y = x * SCALE
        if ACTIVATION is not None:
            y = ACTIVATION(y)
        return y

    x = tensor([4], seed=4)
    jit.set_verbosity(1)
    caplog.set_level(logging.INFO, logger="dy2stat")
    try:
        np.testing.assert_allclose(scaled(x).numpy(), x.numpy() * 2, rtol=1e-6)
        SCALE = 3.0
        np.testing.assert_allclose(scaled(x).numpy(), x.numpy() * 3, rtol=1e-6)
        ACTIVATION = d2s.nn.functional.relu
        np.testing.assert_allclose(scaled(x).numpy(), np.maximum(x.numpy() * 3, 0), rtol=1e-6)
    finally:
        SCALE, ACTIVATION = 2.0, None
    messages = " | ".join(r.getMessage() for r in caplog.records)
    assert "retracing scaled: SCALE changed from 2.0 to 3.0" in messages
    assert "ACTIVATION changed from None to" in messages


def test_a_global_dict_changed_in_place_is_seen():
    @jit.to_static
    def shifted(x):
        return x + OPTIONS["shift"]

    x = tensor([3], seed=5)
    try:
        np.testing.assert_allclose(shifted(x).numpy(), x.numpy() + 1, rtol=1e-6)
        OPTIONS["shift"] = 5.0  # a small dict of numbers is compared by value
        np.testing.assert_allclose(shifted(x).numpy(), x.numpy() + 5, rtol=1e-6)
    finally:
        OPTIONS["shift"] = 1.0


def test_closure_variables_are_guarded():
    def make(k):
        @jit.to_static
        def times(x):
            return x * k

        def set_k(value):
            nonlocal k
            k = value

        return times, set_k

    times, set_k = make(2.0)
    x = tensor([3], seed=6)
    np.testing.assert_allclose(times(x).numpy(), x.numpy() * 2, rtol=1e-6)
    set_k(7.0)
    np.testing.assert_allclose(times(x).numpy(), x.numpy() * 7, rtol=1e-6)


@dataclasses.dataclass
class Config:
    scale: float = 1.0
    depth: int = 2


class Configured(nn.Layer):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        for _ in range(self.cfg.depth):
            x = self.fc(x)
        return x * self.cfg.scale


def test_attributes_of_plain_objects_held_by_a_layer_are_guarded():
    x = tensor([2, 3], seed=7)

    def same(net):
        pass

    def scale(net):
        net.cfg.scale = 4.0

    def depth(net):
        net.cfg.depth = 3

    both(lambda: Configured(Config()), (same, x), (scale, x), (depth, x))


def test_an_object_argument_is_guarded_by_identity_and_its_attributes():
    @jit.to_static
    def apply_config(x, cfg):
        return x * cfg.scale + cfg.depth

    x = tensor([3], seed=8)
    a, b = Config(2.0, 1), Config(3.0, 0)
    for cfg in (a, b, a):
        np.testing.assert_allclose(apply_config(x, cfg).numpy(),
                                   x.numpy() * cfg.scale + cfg.depth, rtol=1e-6)
    a.scale = -1.0
    np.testing.assert_allclose(apply_config(x, a).numpy(), x.numpy() * -1.0 + 1, rtol=1e-6)
    assert len(apply_config.program_cache) == 3


def test_class_attributes_read_through_self_are_guarded():
    class Scaled(nn.Layer):
        factor = 2.0

        def forward(self, x):
            return x * self.factor

    x = tensor([3], seed=9)
    net = jit.to_static(Scaled())
    np.testing.assert_allclose(net(x).numpy(), x.numpy() * 2, rtol=1e-6)
    Scaled.factor = 5.0
    np.testing.assert_allclose(net(x).numpy(), x.numpy() * 5, rtol=1e-6)


def test_private_attributes_and_methods_are_mangled_as_in_the_class():
    class Private(nn.Layer):
        def __init__(self):
            super().__init__()
            self.__scale = 3.0

        def __helper(self, x):
            return x * self.__scale

        def forward(self, x):
            if x.sum() > 0:
                return self.__helper(x)
            return -x

    x = tensor([3], seed=10)
    net = Private()
    expected = net(x).numpy()
    np.testing.assert_allclose(jit.to_static(net)(x).numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("value", [1, 1.0, True, np.float32(1.0), (1, 2), "a", None])
def test_python_arguments_of_different_types_do_not_share_a_program(value):
    @jit.to_static
    def combine(x, v):
        return x * 2 if v is None or isinstance(v, (str, tuple)) else x * v

    x = d2s.to_tensor(np.array([1, 2], "int32"))
    for v in (value, 1, 1.0, True):
        eager = combine.dygraph_function(x, v)
        converted = combine(x, v)
        assert converted.dtype == eager.dtype, v
        np.testing.assert_array_equal(converted.numpy(), eager.numpy())


def test_a_trace_that_asks_whether_gradients_are_on_is_guarded_on_it():
    @jit.to_static
    def maybe_noisy(x):
        if d2s.is_grad_enabled():
            return x * 2
        return x * 3

    x = tensor([3], seed=11)
    np.testing.assert_allclose(maybe_noisy(x).numpy(), x.numpy() * 2, rtol=1e-6)
    with d2s.no_grad():
        np.testing.assert_allclose(maybe_noisy(x).numpy(), x.numpy() * 3, rtol=1e-6)
    np.testing.assert_allclose(maybe_noisy(x).numpy(), x.numpy() * 2, rtol=1e-6)
    assert len(maybe_noisy.program_cache) == 2
