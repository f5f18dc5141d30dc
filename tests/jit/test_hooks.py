"""Forward pre-/post-hooks inside converted programs, on the outer layer, and in jit.save."""

import logging

import numpy as np

from dy2stat import jit, nn
from tests.jit.helpers import copy_weights, tensor


class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(3, 2))

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 100:  # tensor-dependent: the program has a cond
            h = h - 100
        return self.head(h)


def double_input(layer, inputs):
    return (inputs[0] * 2,)


def add_hundred(layer, inputs, outputs):
    return outputs + 100


def pair():
    eager, converted = Net(), Net()
    copy_weights(eager, converted)
    return eager, jit.to_static(converted)


def test_sublayer_hooks_change_the_converted_program_and_stop_after_remove(caplog):
    eager, converted = pair()
    x = tensor([5, 4])
    plain = eager(x).numpy()
    np.testing.assert_allclose(converted(x).numpy(), plain, rtol=1e-5, atol=1e-6)

    jit.set_verbosity(1)
    caplog.set_level(logging.INFO, logger="dy2stat")
    handles = []
    for net in (eager, converted):
        handles.append(net.fc.register_forward_pre_hook(double_input))
        handles.append(net.head[1].register_forward_post_hook(add_hundred))
    hooked = eager(x).numpy()
    assert not np.allclose(hooked, plain)
    np.testing.assert_allclose(converted(x).numpy(), hooked, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(converted(x).numpy(), hooked, rtol=1e-5, atol=1e-5)  # cached
    assert len(converted.forward.program_cache) == 2
    assert any("hooks" in r.getMessage() for r in caplog.records)  # the retrace says why

    for handle in handles:
        handle.remove()
    np.testing.assert_allclose(converted(x).numpy(), plain, rtol=1e-5, atol=1e-6)
    assert len(converted.forward.program_cache) == 2  # the hook-free program again


def test_a_pre_hook_may_return_a_single_value():
    eager, converted = pair()
    for net in (eager, converted):
        net.head[1].register_forward_pre_hook(lambda layer, inputs: inputs[0] * 0)
    x = tensor([3, 4])
    expected = eager(x).numpy()
    np.testing.assert_allclose(expected, np.broadcast_to(eager.head[1].bias.numpy(), (3, 2)))
    np.testing.assert_allclose(converted(x).numpy(), expected, rtol=1e-6)


def test_hooks_on_the_outer_converted_layer():
    eager, converted = pair()
    x = tensor([4, 4])
    plain = eager(x).numpy()
    pre = converted.register_forward_pre_hook(lambda layer, inputs: (inputs[0] + 1,))
    post = converted.register_forward_post_hook(lambda layer, inputs, outputs: outputs * 3)
    np.testing.assert_allclose(converted(x).numpy(), eager(x + 1).numpy() * 3, rtol=1e-5,
                               atol=1e-6)
    pre.remove()
    np.testing.assert_allclose(converted(x).numpy(), plain * 3, rtol=1e-5, atol=1e-6)
    post.remove()
    np.testing.assert_allclose(converted(x).numpy(), plain, rtol=1e-5, atol=1e-6)


def test_hooks_in_a_class_decorated_forward():
    class Decorated(Net):
        @jit.to_static
        def forward(self, x):
            return self.head(self.fc(x))

    net = Decorated()
    x = tensor([2, 4])
    plain = net(x).numpy()
    handle = net.fc.register_forward_post_hook(lambda layer, inputs, outputs: outputs * 0)
    hooked = net(x).numpy()
    np.testing.assert_allclose(hooked, np.broadcast_to(net.head[1].bias.numpy(), (2, 2)),
                               rtol=1e-6)
    handle.remove()
    np.testing.assert_allclose(net(x).numpy(), plain, rtol=1e-6)


def test_jit_save_honours_sublayer_and_outer_hooks(tmp_path):
    from dy2stat.static import InputSpec

    eager, converted = pair()
    for net in (eager, converted):
        net.fc.register_forward_pre_hook(double_input)
        net.register_forward_post_hook(lambda layer, inputs, outputs: outputs - 5)
    x = tensor([3, 4])
    expected = eager(x).numpy()
    np.testing.assert_allclose(converted(x).numpy(), expected, rtol=1e-5, atol=1e-6)
    jit.save(converted, str(tmp_path / "hooked"), input_spec=[InputSpec([None, 4])])
    loaded = jit.load(str(tmp_path / "hooked"))
    np.testing.assert_allclose(loaded(x).numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loaded(x[:1]).numpy(), expected[:1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(converted(x).numpy(), expected, rtol=1e-5, atol=1e-6)
