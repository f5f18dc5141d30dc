"""The GPU executor runs programs, not ops (``gpu``-marked: a GPU, or the test double).

A converted function's results equal eager mode's on the GPU; a straight-line
plan is captured as a CUDA graph and replayed (a few launches a call, nothing
read back); a loop whose body lowers is one kernel; ``cond`` reads its
predicate once per call; a loop that does not lower reads its predicate once
per iteration. With the test double, launches and host reads are counted
(``fake_cupy.counting``); kernels can also run from their CUDA source
(``fake_cupy.running_sources``, compiled for the host by g++).
"""

import shutil

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import flags, jit, nn, optimizer
from dy2stat.kernels import backend, cuda_kernels
from dy2stat.runtime.executor import GpuPlan

pytestmark = pytest.mark.gpu
FAKE = backend.has_cupy() and backend.cupy.__version__.endswith("+fake")
if FAKE:
    from tests.gpu import fake_cupy
needs_fake = pytest.mark.skipif(not FAKE, reason="counts launches on the test double")


@pytest.fixture(autouse=True)
def gpu():
    d2s.set_device("gpu")
    yield
    d2s.set_device("cpu")


def plans_of(fn) -> list[GpuPlan]:
    runner = fn.concrete_program.runner
    found = [p for p in runner._forward_plans.values() if isinstance(p, GpuPlan)]
    found += [p for p in runner._plans.values() if isinstance(p, GpuPlan)]
    return list({id(p): p for p in found}.values())


def counted(call):
    with fake_cupy.counting() as n:
        call()
    return n


# ------------------------------------------------------------------- W2


def w2(x):
    i = 0
    while x.sum() < 1000 and i < 100:
        if x.mean() > 20:
            x = x * 1.1 + 1
        else:
            x = x + 3
        i += 1
    return x


def w2_numpy(x):
    i = 0
    while x.sum() < 1000 and i < 100:
        if x.mean() > 20:
            x = x * np.float32(1.1) + np.float32(1)
        else:
            x = x + np.float32(3)
        i += 1
    return x


LOOPS = {
    "W2": (w2, w2_numpy),
    "max and a counter": (
        lambda x: _while_max(x), lambda x: _while_max(x, np)),
    "two carried arrays swapped": (
        lambda x: _swap(x), lambda x: _swap(x, np)),
    "nested while": (lambda x: _nested(x), lambda x: _nested(x, np)),
}


def _while_max(x, xp=None):
    n = 0
    while x.max() < 50.0:
        x = x * 2.0 if xp is None else x * np.float32(2)
        n += 1
    return x + n if xp is None else x + np.float32(n)


def _swap(x, xp=None):
    y = x * 0.5 if xp is None else x * np.float32(0.5)
    while y.max() < 100.0:
        x, y = y, x + y
    return x - y


def _nested(x, xp=None):
    one, two = (1.0, 2.0) if xp is None else (np.float32(1), np.float32(2))
    while x.sum() < 500.0:
        top = x.max()
        while x.min() < top:
            x = x + one
        x = x * two
    return x


@pytest.mark.parametrize("name", list(LOOPS))
def test_a_loop_that_lowers_is_one_kernel_and_matches_eager(name):
    fn, reference = LOOPS[name]
    converted = jit.to_static(fn)
    host = np.linspace(1.0, 2.0, 16).astype("float32")
    x = d2s.to_tensor(host)
    with d2s.no_grad():
        want = fn(x).numpy()  # eager, on the GPU
        for _ in range(3):  # uncaptured, captured, replayed
            got = converted(x)
            assert got.place == "gpu:0"
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(want, reference(host), rtol=1e-5)
    (plan,) = plans_of(converted)
    assert plan.loop_kernels and "while (true)" in plan.loop_kernels[0].source
    assert plan.not_captured is None and plan.graphs  # the whole call is one graph


@needs_fake
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("name", list(LOOPS))
def test_the_loop_kernels_cuda_source_computes_the_loop(name):
    """The generated CUDA C itself (compiled for the host, one thread) gives the loop's
    results: the reductions, the branches, the carried updates."""
    fn, reference = LOOPS[name]
    converted = jit.to_static(fn)
    host = np.linspace(1.0, 2.0, 16).astype("float32")
    with d2s.no_grad(), fake_cupy.running_sources():
        got = converted(d2s.to_tensor(host)).numpy()
    np.testing.assert_allclose(got, reference(host), rtol=1e-5)


@needs_fake
def test_w2_runs_as_three_launches_and_reads_nothing_back():
    converted = jit.to_static(w2)
    x = d2s.to_tensor(np.ones(16, "float32"))
    with d2s.no_grad():
        converted(x)
        converted(x)  # captured here
        n = counted(lambda: converted(x))
    assert n.transfers == 0
    assert n.launches == 3, n.ops  # the feed copied in, the graph, the results copied out


@needs_fake
def test_with_the_flags_off_the_loop_runs_op_by_op():
    flags.set_flags({"gpu_loop_kernels": False, "cuda_graphs": False})
    converted = jit.to_static(w2)
    x = d2s.to_tensor(np.ones(16, "float32"))
    with d2s.no_grad():
        want = w2_numpy(np.ones(16, "float32"))
        np.testing.assert_allclose(converted(x).numpy(), want, rtol=1e-5)
        n = counted(lambda: converted(x))
    (plan,) = plans_of(converted)
    assert not plan.loop_kernels and plan.not_captured == "the cuda_graphs flag is off"
    iterations = 16  # the mean goes 1, 4, ..., 22 (+3), then 25.2, ..., 65.5 (*1.1 + 1)
    assert n.transfers == 2 * iterations + 1  # the loop's predicate and the if's, each turn
    assert n.launches > 5 * iterations


# --------------------------------------------------------------- cond, loops


@needs_fake
def test_cond_reads_its_predicate_once_per_call():
    @jit.to_static
    def f(x):
        if x.sum() > 0:
            y = x * 2.0
        else:
            y = x - 1.0
        return y + 1.0

    x = d2s.to_tensor(np.ones((4, 4), "float32"))
    with d2s.no_grad():
        f(x)
        n = counted(lambda: f(x))
        np.testing.assert_allclose(f(x).numpy(), np.full((4, 4), 3.0))
    assert n.transfers == 1
    (plan,) = plans_of(f)
    assert "cond op on the host" in plan.not_captured


def matmul_loop(x, w):
    i = 0
    while x.sum() < 1000.0:
        x = d2s.matmul(x, w) + 1.0  # no CUDA lowering: the loop stays on the host
        i += 1
    return x, i


def matmul_loop_numpy(x, w):
    i = 0
    while x.sum() < 1000.0:
        x = x @ w + np.float32(1)
        i += 1
    return x, i


@pytest.mark.parametrize("start", [1.0, 100.0], ids=["five turns", "no turn"])
def test_a_loop_that_does_not_lower_replays_its_body_as_a_graph(start):
    converted = jit.to_static(matmul_loop)
    w_host = np.eye(4, dtype="float32") * 2
    w = d2s.to_tensor(w_host)
    host = np.full((4, 4), start, "float32")
    x = d2s.to_tensor(host)
    want_x, want_i = matmul_loop_numpy(host, w_host)
    with d2s.no_grad():
        for _ in range(3):  # the first call captures the second iteration; then replays
            got_x, got_i = converted(x, w)
            assert got_x.place == "gpu:0"
            np.testing.assert_allclose(got_x.numpy(), want_x, rtol=1e-6)
            assert got_i.item() == want_i
    (plan,) = plans_of(converted)
    assert not plan.loop_kernels and "while op on the host" in plan.not_captured
    (loop,) = plan.loop_graphs
    assert loop.not_captured is None and bool(loop.graphs) == (want_i > 1)


@needs_fake
def test_a_replayed_loop_is_one_launch_and_one_read_per_iteration():
    converted = jit.to_static(matmul_loop)
    x, w = d2s.ones([4, 4]), d2s.to_tensor(np.eye(4, dtype="float32") * 2)
    with d2s.no_grad():
        converted(x, w)
        n = counted(lambda: converted(x, w))
    turns = 5  # the sum goes 16, 48, 112, 240, 496, 1008
    assert n.transfers == turns + 1  # the predicate: before the loop, then once a turn
    assert n.ops.count("graph of 7 ops") == turns, n.ops
    assert n.launches <= turns + 12, n.ops  # the rest: the first test, copies in and out


@needs_fake
def test_with_the_cuda_graphs_flag_off_the_loop_runs_op_by_op():
    flags.set_flags({"cuda_graphs": False})
    converted = jit.to_static(matmul_loop)
    x, w = d2s.ones([4, 4]), d2s.to_tensor(np.eye(4, dtype="float32") * 2)
    with d2s.no_grad():
        converted(x, w)
        n = counted(lambda: converted(x, w))
    (plan,) = plans_of(converted)
    assert not plan.loop_graphs and n.transfers == 5 + 1 and n.launches > 5 * 3


@needs_fake
def test_a_loop_on_the_host_keeps_its_counter_there_and_its_invariants_outside():
    """A branch in the body: neither a loop kernel nor a replay. The counter's test and
    step are Python ints (one device compare per test, the tensor's), and ``w * 2.0``
    is computed once per call, before the loop."""

    @jit.to_static
    def f(x, w):
        i = 0
        while x.sum() < 1000.0 and i < 50:
            v = w * 2.0
            if x.mean() > 5.0:
                x = d2s.matmul(x, v)
            else:
                x = x + 1.0
            i += 1
        return x, i

    x, w = d2s.ones([4, 4]), d2s.to_tensor(np.eye(4, dtype="float32"))
    with d2s.no_grad():
        f(x, w)
        n = counted(lambda: f(x, w))
        got_x, got_i = f(x, w)
    turns = 9  # +1 five times (mean 1 -> 6), then *2 four times (sum 96 -> 1536)
    assert got_i.item() == turns and got_x.numpy()[0, 0] == 96.0
    assert n.ops.count("multiply") == 1 and n.ops.count("less") == turns + 1, n.ops
    assert n.transfers == (turns + 1) + turns  # the loop's test, the branch's
    (plan,) = plans_of(f)
    assert not plan.loop_kernels and not plan.loop_graphs


def test_a_replayed_loop_reads_the_values_of_each_call():
    """New inputs, a new outer value, results kept from earlier calls: nothing stale."""
    converted = jit.to_static(matmul_loop)
    rng = np.random.default_rng(0)
    cases = [(rng.random((4, 4)).astype("float32"),
              (np.eye(4) * scale).astype("float32")) for scale in (2, 3, 2, 1.5)]
    with d2s.no_grad():
        results = [converted(d2s.to_tensor(x), d2s.to_tensor(w)) for x, w in cases]
    for (x, w), (got_x, got_i) in zip(cases, results):
        want_x, want_i = matmul_loop_numpy(x, w)
        np.testing.assert_allclose(got_x.numpy(), want_x, rtol=1e-5)
        assert got_i.item() == want_i


def _swap_with_a_product(x, y, w):
    s = d2s.zeros(x.shape)
    while s.sum() < 100.0:
        s = s + d2s.matmul(x, w)
        x, y = y, x  # the new carried values are the old ones, swapped
    return s, x, y


def _transposed(x, w):
    s = d2s.zeros(x.shape)
    while s.sum() < 100.0:
        s = s + d2s.matmul(x, w)
        x = d2s.transpose(x, [1, 0])  # a view of the carried value itself
    return s, x


@pytest.mark.parametrize("fn", [_swap_with_a_product, _transposed])
def test_a_replayed_loop_whose_new_values_alias_its_carried_ones(fn):
    x = np.arange(4, dtype="float32").reshape(2, 2)
    args = [x, x + 1] if fn is _swap_with_a_product else [x]
    args.append(np.array([[1, 2], [0, 1]], "float32"))
    converted = jit.to_static(fn)
    tensors = [d2s.to_tensor(a) for a in args]
    with d2s.no_grad():
        want = [t.numpy() for t in _flat(fn(*tensors))]
        for _ in range(3):
            got = [t.numpy() for t in _flat(converted(*tensors))]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    (plan,) = plans_of(converted)
    (loop,) = plan.loop_graphs
    assert loop.not_captured is None and all(loop.graphs.values())


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def test_a_loop_whose_carried_shape_changes_runs_uncaptured():
    @jit.to_static
    def grow(x):
        while x.sum() < 100.0:
            x = d2s.concat([x, x * 2.0])
        return x

    host = np.ones(2, "float32")
    want = host
    while want.sum() < 100:
        want = np.concatenate([want, want * 2])
    with d2s.no_grad():
        for _ in range(2):
            np.testing.assert_allclose(grow(d2s.to_tensor(host)).numpy(), want)
    (plan,) = plans_of(grow)
    assert all(graph is None for loop in plan.loop_graphs for graph in loop.graphs.values())


def test_a_layer_in_a_replayed_loop_sees_its_updated_weights():
    class Repeat(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            while x.abs().sum() < 50.0:
                x = self.fc(x) * 2.0
            return x

    d2s.seed(0)
    net, eager = Repeat(), Repeat()
    eager.set_state_dict(net.state_dict())
    jit.to_static(net)
    x = d2s.ones([2, 4])
    for _ in range(3):
        with d2s.no_grad():
            np.testing.assert_allclose(net(x).numpy(), eager(x).numpy(), rtol=1e-5)
            for layer in (net, eager):
                layer.fc.weight.set_value(layer.fc.weight * 1.5)
    assert plans_of(net.forward)[0].loop_graphs


def test_a_loop_that_draws_random_numbers_is_not_replayed():
    @jit.to_static
    def noisy(x):
        while x.sum() < 100.0:
            x = x + d2s.rand([4])
        return x

    with d2s.no_grad():
        outs = [noisy(d2s.zeros([4])).numpy() for _ in range(3)]
    assert all(out.sum() >= 100.0 for out in outs) and not np.array_equal(outs[1], outs[2])
    (plan,) = plans_of(noisy)
    assert not plan.loop_graphs


def test_gradients_through_a_loop_on_the_host_match_eager():
    """A training loop saves each iteration (no replay): its gradient as eager's."""
    w_host = (np.eye(3) * 1.5 + 0.1).astype("float32")
    grads = []
    for fn in (matmul_loop, jit.to_static(matmul_loop)):
        x = d2s.to_tensor(np.full((2, 3), 0.5, "float32"), stop_gradient=False)
        w = d2s.to_tensor(w_host, stop_gradient=False)
        out, _ = fn(x, w)
        out.sum().backward()
        grads.append((out.numpy(), x.grad.numpy(), w.grad.numpy()))
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5)


# ------------------------------------------------------- straight-line plans


def d2l_mlp():
    d2s.seed(0)
    return nn.Sequential(*[nn.Linear(32, 32) for _ in range(6)], nn.Linear(32, 16), nn.ReLU(),
                         nn.Linear(16, 2))


@needs_fake
def test_a_straight_line_forward_is_one_graph_launch():
    net = d2l_mlp()
    eager_net = d2l_mlp()
    jit.to_static(net)
    x = d2s.randn([1, 32])
    with d2s.no_grad():
        want = eager_net(x).numpy()
        uncaptured = counted(lambda: net(x))
        n = counted(lambda: net(x))  # captured: the graph runs once
        n = counted(lambda: net(x))
        np.testing.assert_allclose(net(x).numpy(), want, rtol=1e-5, atol=1e-6)
    assert uncaptured.launches >= 9 and n.launches == 3 and n.transfers == 0, n.ops


def test_results_of_a_captured_plan_are_not_overwritten_by_the_next_call():
    net = d2l_mlp()
    jit.to_static(net)
    with d2s.no_grad():
        xs = [d2s.randn([2, 32]) for _ in range(4)]
        outs = [net(x) for x in xs]
        wants = [net(x).numpy() for x in xs]
    for out, want in zip(outs, wants):
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


def test_each_batch_size_has_its_own_graph():
    net = d2l_mlp()
    eager_net = d2l_mlp()
    jit.to_static(net)
    with d2s.no_grad():
        for batch in (1, 3, 1, 3, 5, 1):
            x = d2s.randn([batch, 32])
            np.testing.assert_allclose(net(x).numpy(), eager_net(x).numpy(), rtol=1e-5,
                                       atol=1e-6)


class SmallConvNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(1, 4, 3, padding=1)
        self.norm = nn.BatchNorm2D(4)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        y = nn.functional.max_pool2d(nn.functional.relu(self.norm(self.conv(x))), 2)
        return self.fc(d2s.flatten(y, 1))


def test_a_captured_training_step_trains_as_eager():
    """Forward and backward plans captured; the eager optimizer replaces the parameters
    every step and batch norm writes its running statistics."""
    rng = np.random.default_rng(0)
    x = d2s.to_tensor(rng.standard_normal((6, 1, 8, 8)).astype("float32"))
    label = d2s.to_tensor(rng.integers(0, 3, (6,)))
    nets = []
    for convert in (False, True):
        d2s.seed(1)
        net = SmallConvNet()
        nets.append(jit.to_static(net) if convert else net)
    runs = []
    for net in nets:
        opt = optimizer.Adam(parameters=net.parameters(), learning_rate=0.01)
        losses = []
        mean_before = net.norm._mean.detach()
        for _ in range(4):
            loss = nn.functional.cross_entropy(net(x), label)
            loss.backward()
            opt.step()
            opt.clear_grad()
            losses.append(loss.item())
        np.testing.assert_array_equal(mean_before.numpy(), np.zeros(4))  # kept its values
        runs.append((losses, net.norm._mean.numpy(), net.fc.weight.numpy()))
    for got, want in zip(runs[1], runs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert any(p.graphs for p in plans_of(nets[1].forward))


def test_a_plan_with_random_draws_is_not_captured():
    net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    jit.to_static(net)
    x = d2s.ones([4, 8])
    outs = [net(x).numpy() for _ in range(3)]
    assert not np.array_equal(outs[1], outs[2])  # new masks every call
    assert any("random" in (p.not_captured or "") for p in plans_of(net.forward))


def test_static_executor_plans_are_captured_too():
    main, startup = d2s.static.Program(), d2s.static.Program()
    with d2s.static.program_guard(main, startup):
        x = d2s.static.data("x", [-1, 4])
        y = d2s.relu(d2s.static.nn.fc(x, 3)) * 2.0
    exe = d2s.static.Executor()
    exe.run(startup)
    feed = {"x": np.ones((2, 4), "float32")}
    outs = [exe.run(main, feed=feed, fetch_list=[y])[0] for _ in range(3)]
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    plans = [p for p in exe._runtime._plans.values() if p.program is main]
    assert plans and plans[0].graphs


def test_the_registered_kernels_are_what_the_gpu_ran():
    converted = jit.to_static(w2)
    with d2s.no_grad():
        converted(d2s.ones([8]))
    (plan,) = plans_of(converted)
    names = {k.name for k in cuda_kernels.registered()}
    assert {k.name for k in plan.loop_kernels} <= names
