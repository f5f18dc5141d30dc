"""Batch splitting: a converted Layer whose program treats batch rows
independently runs two halves of a large batch at once (``runtime.batch_split``).

Checked against the same program run whole (the flag off) and against eager
gradients; the analysis is checked on programs it must refuse.
"""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.nn import functional as F
from dy2stat.runtime import batch_split, codegen, executor
from dy2stat.runtime.ir import Program
from dy2stat.runtime.passes import layout
from dy2stat.vision.models import LeNet
from tests.jit.helpers import copy_weights, tensor
from tests.runtime import programs


@pytest.fixture
def split_small_batches(monkeypatch):
    """Split every batch of 4 rows or more, and count the split runs."""
    monkeypatch.setattr(batch_split, "MIN_ROWS", 4)
    monkeypatch.setattr(batch_split, "MIN_WORK", 0)
    monkeypatch.setattr(batch_split.settings, "enabled", True)
    calls = []
    run = batch_split.run_halves

    def counted(plan, first, second, scope):
        calls.append(plan)
        return run(plan, first, second, scope)

    monkeypatch.setattr(batch_split, "run_halves", counted)
    return calls


def assert_close(got, want, rtol):
    """Equal up to float32 rounding of sums: the tolerance scales with the largest value."""
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


def runner_of(net):
    return net.forward.concrete_program.runner


def grads_of(net, x, split: bool, loss=lambda out: (out ** 2).sum()):
    """Outputs, input gradient and parameter gradients of one call."""
    batch_split.settings.enabled = split
    net.clear_gradients()
    x = d2s.to_tensor(x.numpy(), stop_gradient=False)
    out = net(x)
    loss(out).backward()
    return [out.numpy(), x.grad.numpy()] + [p.grad.numpy() for p in net.parameters()]


@pytest.mark.parametrize("batch", [8, 9])  # an odd batch: halves of 4 and 5 rows
def test_lenet_split_matches_the_whole_run_and_eager(split_small_batches, batch):
    d2s.seed(4)
    eager, net = LeNet(), LeNet()
    copy_weights(eager, net)
    jit.to_static(net)
    x = tensor([batch, 1, 28, 28], seed=5)
    whole = grads_of(net, x, split=False)
    assert not split_small_batches
    split = grads_of(net, x, split=True)
    assert len(split_small_batches) == 2  # the forward and the backward
    assert_close(split, whole, 1e-5)
    assert_close(split, grads_of(eager, x, split=True), 1e-5)


def test_the_kinds_of_lenet_values(split_small_batches):
    net = jit.to_static(LeNet())
    net(tensor([8, 1, 28, 28])).sum().backward()
    (plans,) = runner_of(net)._backward.values()
    split = plans.split
    assert split.fetch_kinds == [batch_split.ROWS]
    assert set(split.grad_kinds) == {batch_split.PARTIAL}  # every weight gradient
    assert all(split.kinds[n] == batch_split.SHARED for n in plans.trainable)


def test_the_forward_only_call_splits_too(split_small_batches):
    net = jit.to_static(LeNet())
    x = tensor([8, 1, 28, 28], seed=6)
    with d2s.no_grad():
        batch_split.settings.enabled = False
        whole = net(x).numpy()
        batch_split.settings.enabled = True
        split = net(x).numpy()
    assert len(split_small_batches) == 1
    assert_close([split], [whole], 1e-5)


def test_small_batches_and_the_flag_run_whole(monkeypatch):
    calls = []
    monkeypatch.setattr(batch_split, "run_halves", lambda *a: calls.append(a))
    net = jit.to_static(LeNet())
    net(tensor([128, 1, 28, 28])).sum().backward()  # off by default
    d2s.set_flags({"batch_parallelism": True})
    net(tensor([2, 1, 28, 28])).sum().backward()  # under MIN_ROWS
    d2s.set_flags({"batch_parallelism": False})
    net(tensor([128, 1, 28, 28])).sum().backward()
    assert not calls


class SumLoss(nn.Layer):
    """The loss (a sum over the batch) inside the program: a PARTIAL output."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        return (F.relu(self.fc(x)) ** 2).sum()


def test_a_sum_over_the_batch_adds_up_the_halves(split_small_batches):
    d2s.seed(7)
    eager, net = SumLoss(), SumLoss()
    copy_weights(eager, net)
    jit.to_static(net)
    x = tensor([10, 6], seed=8)
    split = grads_of(net, x, split=True, loss=lambda out: out * 3.0)
    assert len(split_small_batches) == 2
    (plans,) = runner_of(net)._backward.values()
    assert plans.split.fetch_kinds == [batch_split.PARTIAL]
    assert_close(split, grads_of(eager, x, split=True, loss=lambda out: out * 3.0), 1e-5)


class Refused(nn.Layer):
    """One way of mixing batch rows per ``kind``: the program must run whole."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(4, 4)
        self.rows = self.create_parameter([8, 4])  # a parameter with 8 rows of its own
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        h = self.fc(x)
        if self.kind == "reshape names the batch":
            return h.reshape([8, 4])
        if self.kind == "softmax over the batch":
            return F.softmax(h, axis=0)
        if self.kind == "mean over the batch":
            return h.mean(axis=0)
        if self.kind == "rows of a parameter":
            return h + self.rows
        if self.kind == "dropout":
            return self.drop(h)
        if self.kind == "rows times rows":
            return h @ h.T
        return F.softmax(h, axis=1) + self.rows[:1]  # the control: splits


@pytest.mark.parametrize("kind", ["reshape names the batch", "softmax over the batch",
                                  "mean over the batch", "rows of a parameter", "dropout",
                                  "rows times rows"])
def test_programs_that_mix_rows_run_whole(split_small_batches, kind):
    d2s.seed(9)
    eager, net = Refused(kind), Refused(kind)
    copy_weights(eager, net)
    jit.to_static(net)
    eager.eval(), net.eval()  # dropout off, so both give the same numbers
    if kind == "dropout":
        eager.train(), net.train()
    x = tensor([8, 4], seed=10)
    out = net(x)
    out.sum().backward()
    assert all(plans.split is None for plans in runner_of(net)._backward.values())
    assert not split_small_batches
    if kind != "dropout":
        np.testing.assert_allclose(out.numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6)


def test_the_control_splits(split_small_batches):
    net = jit.to_static(Refused("control"))
    net(tensor([8, 4])).sum().backward()
    assert len(split_small_batches) == 2


def test_a_tensor_without_a_batch_axis_runs_whole(split_small_batches):
    class Scaled(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x, scale):
            return self.fc(x) * scale

    net = jit.to_static(Scaled())
    net(tensor([8, 4]), d2s.to_tensor(np.float32(2.0))).sum().backward()
    assert not split_small_batches


@pytest.mark.parametrize("bad", [0, 1])
def test_an_error_in_either_half_reaches_the_caller(bad):
    program = Program()
    block = program.global_block()
    block.create_var((-1, 16), "float32", name="x", is_data=True)
    out = programs.op(block, "relu", {"X": "x"})
    plan = executor.compile(program, ["x"], [out])
    feeds = [{"x": np.ones((4, 16), "float32")} for _ in range(2)]
    feeds[bad]["x"] = np.ones((4, 15), "float32")
    with pytest.raises(ValueError, match="feed 'x': expected shape"):
        batch_split.run_halves(plan, *feeds, {})
    first, second = batch_split.run_halves(plan, feeds[1 - bad], feeds[1 - bad], {})
    assert first[0].shape == second[0].shape == (4, 16)  # the worker is free again


def _kind_of(type, attrs, x_shape=(-1, 4, 4), extra=None):
    """The kind ``infer_kinds`` gives one op on a ROWS input ``x``."""
    program = Program()
    block = program.global_block()
    block.create_var(x_shape, "float32", name="x", is_data=True)
    inputs = {"X": "x"}
    if extra is not None:
        block.create_var(extra, "float32", name="p", persistable=True)
        inputs["Y"] = "p"
    out = programs.op(block, type, inputs, attrs)
    kinds = {"x": batch_split.ROWS}
    return kinds[out] if batch_split.infer_kinds(block, block.ops, kinds) else None


@pytest.mark.parametrize("type, attrs, want", [
    ("reshape", {"shape": [-1, 16]}, batch_split.ROWS),
    ("reshape", {"shape": [0, 2, 8]}, batch_split.ROWS),
    ("reshape", {"shape": [-1, 8]}, None),  # two output rows per batch row
    ("reshape", {"shape": [8, 2, 4]}, None),  # names a batch size
    ("transpose", {"perm": [0, 2, 1]}, batch_split.ROWS),
    ("transpose", {"perm": [1, 0, 2]}, None),
    ("flatten", {"start_axis": 1}, batch_split.ROWS),
    ("flatten", {"start_axis": 0}, None),
    ("sum", {"axis": [1, 2]}, batch_split.ROWS),
    ("sum", {"axis": [0]}, batch_split.PARTIAL),
    ("sum", {}, batch_split.PARTIAL),
    ("mean", {}, None),
    ("softmax", {"axis": -1}, batch_split.ROWS),
    ("softmax", {"axis": 0}, None),
])
def test_the_rule_of_one_op(type, attrs, want):
    assert _kind_of(type, attrs) == want


@pytest.mark.parametrize("shared, want", [
    ((4,), batch_split.ROWS), ((4, 4), batch_split.ROWS), ((1, 4, 4), batch_split.ROWS),
    ((4, 4, 4), None), ((-1, 4, 4), None),  # rows of its own (or maybe): no split
])
def test_a_parameter_broadcasts_along_the_rows_or_the_program_runs_whole(shared, want):
    assert _kind_of("add", {}, extra=shared) == want


@pytest.mark.parametrize("blas_threads", [1, 2])  # overlap on the worker, and run here
def test_with_the_flags_off_a_large_batch_trains_as_eager_bit_for_bit(monkeypatch,
                                                                      blas_threads):
    """Unsplit and in NCHW, a converted step runs eager's kernels on the same
    values: the losses of a few Adam steps at batch 64 are equal, not just close.
    Overlap keeps that: its products run on the worker only while BLAS runs on
    one thread anyway (a product split over two BLAS threads rounds otherwise)."""
    monkeypatch.setattr(batch_split.settings, "enabled", False)
    monkeypatch.setattr(layout.settings, "enabled", False)
    monkeypatch.setattr(codegen.overlap, "enabled", True)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((64, 1, 28, 28)).astype("float32")
    y = rng.integers(0, 10, (64, 1)).astype("int64")
    losses = {}
    for convert in (False, True):
        d2s.seed(14)
        net = LeNet()
        if convert:
            jit.to_static(net)
        opt = d2s.optimizer.Adam(parameters=net.parameters(), learning_rate=1e-2)
        loss_fn, losses[convert] = nn.CrossEntropyLoss(), []
        with threadpool_limits(limits=blas_threads, user_api="blas"):
            for _ in range(4):
                loss = loss_fn(net(d2s.to_tensor(x)), d2s.to_tensor(y))
                loss.backward()
                opt.step()
                opt.clear_grad()
                losses[convert].append(float(loss))
    assert losses[True] == losses[False]


class ConvMix(nn.Layer):
    """Strided, dilated and grouped convolutions, average pooling, a transpose that
    keeps the batch axis; fed float64 into float32 parameters (the bias gradients
    are cast back: a cast of a partial sum)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2D(3, 4, 3, stride=2, padding=1)
        self.c2 = nn.Conv2D(4, 4, 3, padding=2, dilation=2, groups=2)
        self.pool = nn.AvgPool2D(2)

    def forward(self, x):
        h = self.pool(self.c2(F.relu(self.c1(x))))
        return h.transpose([0, 2, 3, 1]).flatten(1)


def test_more_conv_geometries_and_a_mixed_precision_feed_split(split_small_batches):
    d2s.seed(15)
    eager, net = ConvMix(), ConvMix()
    copy_weights(eager, net)
    jit.to_static(net)
    x = d2s.to_tensor(np.random.default_rng(16).standard_normal((9, 3, 12, 12)))
    split = grads_of(net, x, split=True)
    assert len(split_small_batches) == 2
    assert_close(split, grads_of(eager, x, split=True), 1e-5)
