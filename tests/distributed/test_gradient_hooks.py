"""Gradient hooks: each watched leaf's hook runs once per backward, as soon as its
gradient is complete (a converted program hands its gradients out as it computes
them), with the same values as without hooks."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import gradient_hooks, nn
from dy2stat.runtime.ops import debug


class MLP(nn.Layer):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(8, 8)
        self.c = nn.Linear(8, 3)

    def forward(self, x):
        return self.c(d2s.tanh(self.b(d2s.tanh(self.a(x)))))


def _make(convert: bool):
    d2s.seed(3)
    net = MLP()
    return d2s.jit.to_static(net) if convert else net


def _loss(net, x):
    return (net(x) ** 2).mean()


def _grads(net, x):
    net.clear_gradients()
    _loss(net, x).backward()
    return {k: p.grad.numpy().copy() for k, p in net.named_parameters()}


class Recorder:
    """Logs (parameter, which parameters have a gradient then, its gradient)."""

    def __init__(self, net):
        self.names = {id(p): k for k, p in net.named_parameters()}
        self.params = net.parameters()
        self.log, self.done = [], 0
        self.handle = gradient_hooks.watch(self.params, self.ready, self.finished)

    def ready(self, p):
        have = {self.names[id(q)] for q in self.params if q.grad is not None}
        self.log.append((self.names[id(p)], have,
                         None if p.grad is None else p.grad.numpy().copy()))

    def finished(self):
        self.done += 1


@pytest.fixture
def x():
    return d2s.to_tensor(np.random.default_rng(0).standard_normal([5, 4]).astype("float32"))


@pytest.mark.parametrize("convert", [False, True], ids=["eager", "converted"])
def test_each_hook_runs_once_when_its_gradient_is_final(convert, x):
    truth = _grads(_make(convert), x)
    net = _make(convert)
    rec = Recorder(net)
    try:
        for _ in range(2):  # the second backward runs the compiled plans again
            rec.log.clear()
            net.clear_gradients()
            _loss(net, x).backward()
            order = [name for name, _, _ in rec.log]
            # Last layer first, each once, while the backward still has the rest to do.
            assert order == ["c.bias", "c.weight", "b.bias", "b.weight", "a.bias", "a.weight"]
            first_name, first_have, _ = rec.log[0]
            assert first_have == {first_name}
            for name, _, grad in rec.log:
                np.testing.assert_array_equal(grad, truth[name])  # hooks change no bit
    finally:
        rec.handle.remove()
    assert rec.done == 2


def test_a_converted_program_hands_out_its_gradients_before_its_backward_ends(x):
    net = _make(convert=True)
    seen = []
    with debug.listening(lambda index, values: seen.append(index)):
        _loss(net, x).backward()  # not watched: no hand_out ops, nothing to hear
    assert seen == []
    rec = Recorder(net)
    try:
        net.clear_gradients()
        _loss(net, x).backward()
    finally:
        rec.handle.remove()
    # One tape node computed all six gradients; the hooks ran in between, not after.
    assert [len(have) for _, have, _ in rec.log] == [1, 2, 3, 4, 5, 6]


def test_a_leaf_read_by_several_nodes_is_ready_after_the_last(x):
    w = d2s.to_tensor(np.ones([4], "float32"), stop_gradient=False)
    grads = []
    handle = gradient_hooks.watch([w], lambda t: grads.append(t.grad.numpy().copy()),
                                  lambda: None)
    try:
        y = (x * w).sum() + (d2s.exp(x * w)).sum() * 0.5 + (w * w).sum()
        y.backward()
    finally:
        handle.remove()
    assert len(grads) == 1
    np.testing.assert_array_equal(grads[0], w.grad.numpy())
    expected = x.numpy().sum(0) + 0.5 * (x.numpy() * np.exp(x.numpy())).sum(0) + 2
    np.testing.assert_allclose(grads[0], expected, rtol=1e-5)


def test_a_parameter_read_by_a_program_and_by_eager_code_is_ready_after_both(x):
    net = _make(convert=True)
    weight = net.c.weight

    def loss():  # the eager node is older: backward reaches it after the program's
        penalty = (weight * weight).sum()
        return penalty + _loss(net, x)

    loss().backward()
    truth = weight.grad.numpy().copy()
    net.clear_gradients()
    got = []
    handle = gradient_hooks.watch([weight], lambda t: got.append(t.grad.numpy().copy()),
                                  lambda: None)
    try:
        loss().backward()
    finally:
        handle.remove()
    assert len(got) == 1
    np.testing.assert_array_equal(got[0], truth)


def test_an_unreached_leaf_is_ready_at_the_start_and_grad_runs_no_hooks(x):
    used = d2s.to_tensor(np.ones([4], "float32"), stop_gradient=False)
    unused = d2s.to_tensor(np.ones([4], "float32"), stop_gradient=False)
    log = []
    handle = gradient_hooks.watch([used, unused], lambda t: log.append(t is used),
                                  lambda: log.append("done"))
    try:
        d2s.grad([(x * used).sum()], [used])  # grad() leaves .grad alone: no hooks
        assert log == []
        (x * used).sum().backward()
        assert log == [False, True, "done"]
        assert unused.grad is None
    finally:
        handle.remove()
    (x * used).sum().backward()
    assert log == [False, True, "done"]  # removed: no more calls


def test_hand_out_passes_its_values_to_the_listener_of_its_thread():
    program = d2s.static.Program()
    with d2s.static.program_guard(program):
        x = d2s.static.data("x", [2], "float32")
        y = x * 2.0
    program.global_block().append_op(
        d2s.runtime.ir.Operator("hand_out", {"X": [y.name]}, {}, {"index": 7}))
    exe = d2s.static.Executor()
    heard = []
    feed = {"x": np.array([1.0, 2.0], "float32")}
    exe.run(program, feed=feed, fetch_list=[y])  # no listener: nothing happens
    with debug.listening(lambda index, values: heard.append((index, values[0].tolist()))):
        exe.run(program, feed=feed, fetch_list=[y])
    assert heard == [(7, [2.0, 4.0])]

