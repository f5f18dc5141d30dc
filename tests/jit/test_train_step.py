"""A whole training step inside one converted function: forward, ``loss.backward()``,
``opt.step()``, ``opt.clear_grad()`` are one program, and every run leaves what the eager
step leaves -- losses, parameters, gradients and optimizer state, bit for bit."""

import traceback

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.jit.step_record import TrainingStepError
from dy2stat.optimizer import lr
from dy2stat.static import InputSpec
from dy2stat.vision.models import LeNet
from tests.jit.helpers import LanguageModel

STEPS = 4
LOSS = nn.MSELoss()


def _data(steps=STEPS, batch=3, seed=0):
    rng = np.random.default_rng(seed)
    return [(d2s.to_tensor(rng.standard_normal((batch, 4)).astype("float32")),
             d2s.to_tensor(rng.standard_normal((batch, 2)).astype("float32")))
            for _ in range(steps)]


class Setup:
    """A small network and its optimizer, built the same way every time."""

    def __init__(self, make_optimizer):
        d2s.seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        self.opt = make_optimizer(self.net.parameters())
        self.scheduler = self.opt._learning_rate if isinstance(
            self.opt._learning_rate, lr.LRScheduler) else None


def assert_same(eager: Setup, converted: Setup) -> None:
    """Parameters, gradients and optimizer state equal bit for bit."""
    for p, q in zip(eager.net.parameters(), converted.net.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    a, b = eager.opt.state_dict(), converted.opt.state_dict()
    assert len(a) == len(b)
    for (key, x), y in zip(a.items(), b.values()):  # parameter names differ: by order
        if key == "LR_Scheduler":
            assert x == y
        else:
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def compare(make_optimizer, make_step, call=None, steps=STEPS):
    """Run ``make_step(setup)`` eagerly and converted on the same data; the results of
    every call and the final state agree bit for bit. Returns the converted function."""
    call = call or (lambda f, setup, x, y, i: f(x, y))
    eager, converted = Setup(make_optimizer), Setup(make_optimizer)
    f_eager = make_step(eager)
    f_converted = jit.to_static(make_step(converted))
    for i, (x, y) in enumerate(_data(steps)):
        want = call(f_eager, eager, x, y, i)
        got = call(f_converted, converted, x, y, i)
        np.testing.assert_array_equal(_values(got), _values(want))
    assert_same(eager, converted)
    return f_converted


def _values(result):
    if isinstance(result, (list, tuple)):
        return [_values(r) for r in result]
    return None if result is None else np.asarray(result, dtype=np.float64)


def standard_step(setup):
    net, opt = setup.net, setup.opt

    def train_step(x, y):
        loss = LOSS(net(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    return train_step


def _schedule():
    return lr.CosineAnnealingDecay(0.05, T_max=3)


OPTIMIZERS = {
    "SGD": lambda ps: d2s.optimizer.SGD(0.1, parameters=ps),
    "Momentum": lambda ps: d2s.optimizer.Momentum(_schedule(), momentum=0.8, parameters=ps,
                                                  use_nesterov=True),
    "Adam": lambda ps: d2s.optimizer.Adam(_schedule(), parameters=ps, weight_decay=0.01),
    "AdamW": lambda ps: d2s.optimizer.AdamW(0.01, parameters=ps,
                                            grad_clip=d2s.optimizer.ClipGradByGlobalNorm(0.5)),
    "RMSProp": lambda ps: d2s.optimizer.RMSProp(0.01, centered=True, momentum=0.5,
                                                parameters=ps),
    "Adagrad": lambda ps: d2s.optimizer.Adagrad(_schedule(), parameters=ps,
                                                grad_clip=d2s.optimizer.ClipGradByNorm(0.3)),
    "Adamax": lambda ps: d2s.optimizer.Adamax(0.01, parameters=ps,
                                              weight_decay=d2s.regularizer.L1Decay(0.01)),
    "Lamb": lambda ps: d2s.optimizer.Lamb(_schedule(), parameters=ps,
                                          grad_clip=d2s.optimizer.ClipGradByValue(0.2)),
}


# The other options of each optimizer.
VARIANTS = {
    "Momentum, plain, L2": lambda ps: d2s.optimizer.Momentum(0.05, parameters=ps,
                                                             weight_decay=0.01),
    "Adam, betas and epsilon": lambda ps: d2s.optimizer.Adam(
        0.02, beta1=0.5, beta2=0.9, epsilon=1e-4, parameters=ps,
        grad_clip=d2s.optimizer.ClipGradByGlobalNorm(0.1)),
    "AdamW, scheduled": lambda ps: d2s.optimizer.AdamW(_schedule(), parameters=ps,
                                                       weight_decay=0.1),
    "RMSProp, plain": lambda ps: d2s.optimizer.RMSProp(_schedule(), rho=0.8, parameters=ps),
    "Adagrad, initial value": lambda ps: d2s.optimizer.Adagrad(
        0.1, parameters=ps, initial_accumulator_value=0.1,
        weight_decay=d2s.regularizer.L2Decay(0.01)),
    "Lamb, excluded from decay": lambda ps: d2s.optimizer.Lamb(
        0.01, lamb_weight_decay=0.1, parameters=ps,
        exclude_from_weight_decay_fn=lambda p: len(p.shape) == 1),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS) + sorted(VARIANTS))
def test_every_optimizer_steps_as_eager(name):
    """Scheduled rates stepped outside, decay, clipping: each step is eager's."""

    def call(f, setup, x, y, i):
        loss = f(x, y)
        if setup.scheduler is not None:
            setup.scheduler.step()
        return loss

    f = compare({**OPTIMIZERS, **VARIANTS}[name], standard_step, call)
    assert len(f.program_cache) == 1
    types = [op.type for op in f.concrete_program.main_program.all_ops()]
    assert "matmul_grad" in types or any(t.endswith("_grad") for t in types)


def test_the_step_is_one_program_with_no_tape():
    setup = Setup(OPTIMIZERS["Adam"])
    f = jit.to_static(standard_step(setup))
    x, y = _data(1)[0]
    loss = f(x, y)
    assert loss.stop_gradient  # no tape node: the program made its own backward
    program = f.concrete_program.main_program
    types = [op.type for op in program.global_block().ops]
    assert types.count("adam") == 4
    assert all(p.grad is None for p in setup.net.parameters())
    # The plan runs the four updates as one op over flat arrays.
    (plan,) = f.concrete_program.runner._plans.values()
    assert [op.type for op in plan.compiled.global_block().ops].count("multi_tensor_adam") == 1


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_scheduler_stepped_inside_gives_eager_rates(where):
    def make_step(setup):
        net, opt, scheduler = setup.net, setup.opt, setup.scheduler

        def train_step(x, y):
            loss = LOSS(net(x), y)
            loss.backward()
            if where == "before":
                scheduler.step()
            opt.step()
            if where == "after":
                scheduler.step()
            opt.clear_grad()
            return loss, opt.get_lr()

        return train_step

    def call(f, setup, x, y, i):
        loss, rate = f(x, y)
        return float(loss), float(np.float32(float(rate)))  # the rate is a float32 tensor

    compare(lambda ps: d2s.optimizer.Adam(lr.StepDecay(0.1, 2, 0.5), parameters=ps),
            make_step, call, steps=5)


def test_gradients_accumulated_over_two_backward_calls():
    def make_step(setup):
        net, opt = setup.net, setup.opt

        def train_step(x, y):
            first = LOSS(net(x), y)
            first.backward()
            second = LOSS(net(x * 2.0), y)
            second.backward()
            opt.step()
            opt.clear_grad()
            return first + second

        return train_step

    compare(OPTIMIZERS["Momentum"], make_step)


def test_gradients_accumulated_over_calls_then_an_eager_step():
    """A converted backward-only function keeps the gradients in .grad, adding to those
    of the calls before; the eager step every second call uses them."""

    def make_step(setup):
        net = setup.net

        def accumulate(x, y):
            loss = LOSS(net(x), y)
            loss.backward()
            return loss

        return accumulate

    def call(f, setup, x, y, i):
        loss = f(x, y)
        if i % 2:
            setup.opt.step()
            setup.opt.clear_grad()
        return loss

    f = compare(OPTIMIZERS["Adam"], make_step, call)
    assert len(f.program_cache) == 2  # with and without gradients kept from before


def test_an_eager_backward_then_a_converted_update():
    def make_step(setup):
        opt = setup.opt

        def update():
            opt.step()
            opt.clear_grad()

        return update

    def call(f, setup, x, y, i):
        loss = LOSS(setup.net(x), y)
        loss.backward()
        f()
        return loss

    compare(OPTIMIZERS["Adamax"], make_step, call)


def test_eager_and_converted_steps_take_turns():
    def call(f, setup, x, y, i):
        if i % 2:
            return f(x, y)
        loss = LOSS(setup.net(x), y)
        loss.backward()
        setup.opt.step()
        setup.opt.clear_grad()
        return loss

    compare(OPTIMIZERS["Adam"], standard_step, call, steps=5)


def test_optimizer_state_round_trips_after_converted_steps(tmp_path):
    """state_dict after converted steps restores into a fresh optimizer, which goes on
    converted as the original goes on eagerly."""
    data = _data(6)
    original = Setup(OPTIMIZERS["Adam"])
    f = jit.to_static(standard_step(original))
    for x, y in data[:3]:
        f(x, y)
    d2s.save(original.opt.state_dict(), str(tmp_path / "opt.pdopt"))
    d2s.save(original.net.state_dict(), str(tmp_path / "net.pdparams"))
    restored = Setup(OPTIMIZERS["Adam"])
    restored.net.set_state_dict(d2s.load(str(tmp_path / "net.pdparams")))
    opt_state = d2s.load(str(tmp_path / "opt.pdopt"))
    # The keys name the parameters: rename them to the fresh network's.
    names = dict(zip([p.name for p in original.net.parameters()],
                     [p.name for p in restored.net.parameters()]))
    renamed = {}
    for key, value in opt_state.items():
        for old, new in names.items():
            if key.startswith(old + "_"):
                key = new + key[len(old):]
                break
        renamed[key] = value
    restored.opt.set_state_dict(renamed)
    g = jit.to_static(standard_step(restored))
    eager_step = standard_step(original)
    for x, y in data[3:]:
        np.testing.assert_array_equal(g(x, y).numpy(), eager_step(x, y).numpy())
    assert_same(original, restored)


def test_minimize_inside_converted_code():
    def make_step(setup):
        net, opt = setup.net, setup.opt

        def train_step(x, y):
            loss = LOSS(net(x), y)
            opt.minimize(loss)
            opt.clear_grad()
            return loss

        return train_step

    compare(OPTIMIZERS["RMSProp"], make_step)


def test_retain_graph_and_a_second_backward():
    def make_step(setup):
        net, opt = setup.net, setup.opt

        def train_step(x, y):
            loss = LOSS(net(x), y)
            loss.backward(retain_graph=True)
            loss.backward()
            opt.step()
            opt.clear_grad()
            return loss

        return train_step

    compare(OPTIMIZERS["SGD"], make_step)


def test_a_second_backward_through_a_freed_graph_fails_as_eagerly():
    setup = Setup(OPTIMIZERS["SGD"])

    @jit.to_static
    def twice(x, y):
        loss = LOSS(setup.net(x), y)
        loss.backward()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="a second time"):
        twice(*_data(1)[0])


def test_no_grad_regions_and_set_to_zero():
    def make_step(setup):
        net, opt = setup.net, setup.opt

        def train_step(x, y):
            out = net(x)
            loss = LOSS(out, y)
            with d2s.no_grad():
                metric = (out - y).abs().mean()
            loss.backward()
            opt.step()
            opt.clear_grad(set_to_zero=True)
            return loss, metric

        return train_step

    compare(OPTIMIZERS["Adagrad"], make_step)


def test_a_hand_written_update_of_the_parameters():
    def make_step(setup):
        net = setup.net

        def train_step(x, y):
            loss = LOSS(net(x), y)
            loss.backward()
            with d2s.no_grad():
                for p in net.parameters():
                    p.set_value(p - 0.1 * p.grad)
                    p.clear_grad()
            return loss

        return train_step

    compare(OPTIMIZERS["SGD"], make_step)


class Trainer:
    """A step written as a method that reads its network and optimizer from self."""

    def __init__(self, net):
        self.net, self.loss = net, nn.CrossEntropyLoss()
        self.opt = d2s.optimizer.Adam(parameters=net.parameters(), learning_rate=0.01)

    def step(self, x, y):
        loss = self.loss(self.net(x), y)
        loss.backward()
        self.opt.step()
        self.opt.clear_grad()
        return loss


class BatchNormNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2D(1, 4, 3), nn.BatchNorm2D(4)
        self.fc, self.unused = nn.Linear(4 * 6 * 6, 10), nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(d2s.flatten(nn.functional.relu(self.bn(self.conv(x))), 1))


@pytest.mark.parametrize("model,size,spec", [
    (LeNet, 28, None),
    (LeNet, 28, [InputSpec([-1, 1, 28, 28]), InputSpec([-1, 1], "int64")]),
    (BatchNormNet, 8, None),
])
def test_image_models_train_as_eager(model, size, spec):
    rng = np.random.default_rng(1)
    batches = [(d2s.to_tensor(rng.standard_normal((n, 1, size, size)).astype("float32")),
                d2s.to_tensor(rng.integers(0, 10, (n, 1)))) for n in (4, 6, 4)]
    results = []
    for convert in (False, True):
        d2s.seed(0)
        trainer = Trainer(model())
        step = jit.to_static(trainer.step, input_spec=spec) if convert else trainer.step
        losses = [float(step(x, y)) for x, y in batches]
        results.append((losses, [t.numpy() for t in trainer.net.state_dict().values()]))
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)


def test_an_argument_needing_a_gradient_is_a_clear_error():
    setup = Setup(OPTIMIZERS["SGD"])
    f = jit.to_static(standard_step(setup))
    x, y = _data(1)[0]
    f(x, y)
    x_grad = d2s.to_tensor(x.numpy(), stop_gradient=False)
    with pytest.raises(TrainingStepError, match="reaches the argument 'x'"):
        f(x_grad, y)


def test_backward_inside_a_tensor_branch_is_a_clear_error():
    setup = Setup(OPTIMIZERS["SGD"])

    @jit.to_static
    def train_step(x, y):
        loss = LOSS(setup.net(x), y)
        if loss > 0.0:
            loss.backward()
        return loss

    with pytest.raises(TrainingStepError, match="tensor-dependent") as info:
        train_step(*_data(1)[0])
    text = "".join(traceback.format_exception(info.value))
    assert f'File "{__file__}"' in text and "loss.backward()" in text


def test_reduce_on_plateau_inside_needs_its_metric_outside():
    setup = Setup(lambda ps: d2s.optimizer.SGD(lr.ReduceOnPlateau(0.1), parameters=ps))

    @jit.to_static
    def train_step(x, y):
        loss = LOSS(setup.net(x), y)
        setup.scheduler.step(loss)
        return loss

    with pytest.raises(TypeError, match="after the converted function returns"):
        train_step(*_data(1)[0])


def test_saving_a_training_step_is_a_clear_error(tmp_path):
    setup = Setup(OPTIMIZERS["SGD"])
    f = jit.to_static(standard_step(setup),
                      input_spec=[InputSpec([-1, 4]), InputSpec([-1, 2])])
    with pytest.raises(TypeError, match="save the model"):
        jit.save(f, str(tmp_path / "step"))


def test_the_usual_variations_of_a_step():
    """clear_grad first, Layer.clear_gradients, a gradient norm returned, a gradient
    edited by index assignment (kept across calls too)."""

    def make_step(setup):
        net, opt = setup.net, setup.opt

        def train_step(x, y):
            opt.clear_grad()
            loss = LOSS(net(x), y)
            loss.backward()
            norm = d2s.add_n([(p.grad * p.grad).sum() for p in net.parameters()])
            grad = net[0].weight.grad
            grad[0] = 0.0
            opt.step()
            net.clear_gradients()
            return loss, norm

        return train_step

    compare(OPTIMIZERS["Adam"], make_step)


def test_a_gradient_kept_from_eager_code_edited_in_converted_code():
    def make_step(setup):
        net = setup.net

        def edit():
            grad = net[0].weight.grad
            grad[0] = 0.0

        return edit

    def call(f, setup, x, y, i):
        loss = LOSS(setup.net(x), y)
        loss.backward()
        f()
        setup.opt.step()
        setup.opt.clear_grad()
        return loss

    compare(OPTIMIZERS["SGD"], make_step, call)


def test_two_optimizers_over_parts_of_a_network():
    eager, converted = Setup(OPTIMIZERS["Adam"]), Setup(OPTIMIZERS["Adam"])
    for setup in (eager, converted):  # the first optimizer trains the first layer only
        setup.opt = d2s.optimizer.Adam(parameters=setup.net[0].parameters())
        setup.head = d2s.optimizer.SGD(0.1, parameters=setup.net[2].parameters())

    def make_step(setup):
        def train_step(x, y):
            loss = LOSS(setup.net(x), y)
            loss.backward()
            setup.opt.step()
            setup.head.step()
            setup.opt.clear_grad()
            setup.head.clear_grad()
            return loss

        return train_step

    f_eager, f_converted = make_step(eager), jit.to_static(make_step(converted))
    for x, y in _data():
        np.testing.assert_array_equal(f_converted(x, y).numpy(), f_eager(x, y).numpy())
    assert_same(eager, converted)


def test_an_optimizer_or_scheduler_made_inside_is_a_clear_error():
    setup = Setup(OPTIMIZERS["SGD"])

    @jit.to_static
    def train_step(x, y):
        opt = d2s.optimizer.Adam(parameters=setup.net.parameters())
        loss = LOSS(setup.net(x), y)
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(RuntimeError, match="outside the converted function"):
        train_step(*_data(1)[0])

    @jit.to_static
    def scheduled(x):
        return x * lr.StepDecay(0.1, 2)()

    with pytest.raises(RuntimeError, match="outside the converted function"):
        scheduled(_data(1)[0][0])


def test_freezing_a_layer_between_steps_retraces():
    """A parameter frozen (stop_gradient=True) after some steps gets no gradient and no
    update from then on, as eagerly; unfrozen, it trains again."""

    def call(f, setup, x, y, i):
        for p in setup.net[0].parameters():
            p.stop_gradient = i in (1, 2)
        return f(x, y)

    f = compare(OPTIMIZERS["Momentum"], standard_step, call)
    assert len(f.program_cache) == 2


def test_a_step_through_a_tensor_length_while_loop():
    """The LSTM's time loop is a `while` op: its backward runs inside the step's program
    and gives eager's values (the loop adds a weight's per-iteration gradients in the
    tape's order)."""
    rng = np.random.default_rng(2)
    ids = d2s.to_tensor(rng.integers(0, 20, (3, 6)))
    results = []
    for convert in (False, True):
        d2s.seed(0)
        model = LanguageModel()
        opt = d2s.optimizer.Adam(parameters=model.parameters(), learning_rate=0.01)

        def train_step(ids, length, model=model, opt=opt):
            loss = model(ids, length)
            loss.backward()
            opt.step()
            opt.clear_grad()
            return loss

        step = jit.to_static(train_step) if convert else train_step
        losses = [float(step(ids, d2s.to_tensor(np.array(n)))) for n in (5, 3, 5)]
        results.append((losses, [p.numpy() for p in model.parameters()]))
    assert results[1][0] == results[0][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(b, a)


def _schedulers():
    """One of every scheduler in ``lr`` (LinearWarmup twice: to a rate, to a schedule)."""
    return {
        "StepDecay": lambda: lr.StepDecay(0.1, step_size=2, gamma=0.5),
        "MultiStepDecay": lambda: lr.MultiStepDecay(0.1, milestones=[1, 3], gamma=0.5),
        "ExponentialDecay": lambda: lr.ExponentialDecay(0.1, gamma=0.7),
        "CosineAnnealingDecay": lambda: lr.CosineAnnealingDecay(0.1, T_max=3, eta_min=0.01),
        "PiecewiseDecay": lambda: lr.PiecewiseDecay([1, 3], [0.1, 0.05, 0.01]),
        "LambdaDecay": lambda: lr.LambdaDecay(0.1, lambda epoch: 0.9 ** epoch),
        "LinearWarmup": lambda: lr.LinearWarmup(0.1, warmup_steps=3, start_lr=0.0,
                                                end_lr=0.1),
        "LinearWarmup to a schedule": lambda: lr.LinearWarmup(
            lr.ExponentialDecay(0.1, gamma=0.5), warmup_steps=2, start_lr=0.01, end_lr=0.1),
        "NoamDecay": lambda: lr.NoamDecay(d_model=16, warmup_steps=3, learning_rate=0.5),
        "NaturalExpDecay": lambda: lr.NaturalExpDecay(0.1, gamma=0.3),
        "InverseTimeDecay": lambda: lr.InverseTimeDecay(0.1, gamma=0.5),
        "PolynomialDecay": lambda: lr.PolynomialDecay(0.1, decay_steps=3, power=2.0,
                                                      cycle=True),
        "MultiplicativeDecay": lambda: lr.MultiplicativeDecay(0.1, lambda epoch: 0.8),
        "LinearLR": lambda: lr.LinearLR(0.1, total_steps=4, start_factor=0.25),
        "CosineAnnealingWarmRestarts": lambda: lr.CosineAnnealingWarmRestarts(
            0.1, T_0=2, T_mult=2, eta_min=0.001),
        "OneCycleLR": lambda: lr.OneCycleLR(0.1, total_steps=8, three_phase=True),
        "CyclicLR": lambda: lr.CyclicLR(0.01, 0.1, step_size_up=2, mode="triangular2"),
        "ReduceOnPlateau": lambda: lr.ReduceOnPlateau(0.1, factor=0.5, patience=0),
    }


def test_every_scheduler_is_tested():
    names = {n for n in lr.__all__ if n != "LRScheduler"}
    assert names == {key.split()[0] for key in _schedulers()}


def test_every_optimizer_is_tested():
    names = {n for n in d2s.optimizer.__all__
             if isinstance(getattr(d2s.optimizer, n), type)
             and issubclass(getattr(d2s.optimizer, n), d2s.optimizer.Optimizer)}
    assert names - {"Optimizer"} == set(OPTIMIZERS)


@pytest.mark.parametrize("name", sorted(_schedulers()))
def test_every_scheduler_stepped_inside_gives_eager_rates(name):
    """Each run's update reads the rate the eager step reads; the step made in the
    converted code (ReduceOnPlateau: after it returns, with the loss) is made once per
    run, and the scheduler's state is eager's after every step."""
    make_scheduler = _schedulers()[name]
    plateau = name == "ReduceOnPlateau"

    def make_step(setup):
        net, opt, scheduler = setup.net, setup.opt, setup.scheduler

        def train_step(x, y):
            loss = LOSS(net(x), y)
            loss.backward()
            opt.step()
            if not plateau:
                scheduler.step()
            opt.clear_grad()
            return loss, opt.get_lr()

        return train_step

    def call(f, setup, x, y, i):
        loss, rate = f(x, y)
        if plateau:
            setup.scheduler.step(loss)
        assert setup.scheduler.state_dict() == states.setdefault(i, setup.scheduler.state_dict())
        return float(loss), float(np.float32(float(rate)))

    states = {}
    f = compare(lambda ps: d2s.optimizer.Momentum(make_scheduler(), momentum=0.9,
                                                  parameters=ps),
                make_step, call, steps=7)
    assert len(f.program_cache) == 1


class Gated(nn.Layer):
    """A forward with a tensor ``if`` (one branch per sign of the first output) and a
    tensor-bounded ``while`` (halving until small)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        h = self.fc1(x)
        if h.mean() > 0.0:
            h = nn.functional.relu(h) * 2.0
        else:
            h = nn.functional.tanh(h) - 1.0
        while h.abs().max() > 1.0:
            h = h * 0.5
        return self.fc2(h)


@pytest.mark.parametrize("name", ["SGD", "Adam", "Lamb"])
def test_a_step_with_tensor_control_flow_in_the_forward(name):
    """Branches and loop trips chosen per batch inside the step's one program: the
    gradients flow through the `cond` and `while` ops as eager's through the Python
    statements."""
    rng = np.random.default_rng(3)
    batches = [(d2s.to_tensor((rng.standard_normal((3, 4)) * scale + shift)
                              .astype("float32")),
                d2s.to_tensor(rng.standard_normal((3, 2)).astype("float32")))
               for scale, shift in ((1, 2), (4, -3), (1, 0), (8, 1), (1, -2))]
    results = []
    for convert in (False, True):
        d2s.seed(0)
        net = Gated()
        opt = OPTIMIZERS[name](net.parameters())

        def train_step(x, y, net=net, opt=opt):
            out = net(x)
            loss = LOSS(out, y)
            if loss > 1.0:  # a tensor `if` in the step itself
                loss = loss * 0.5
            loss.backward()
            opt.step()
            opt.clear_grad()
            return loss

        step = jit.to_static(train_step) if convert else train_step
        losses = [float(step(x, y)) for x, y in batches]
        results.append((losses, [p.numpy() for p in net.parameters()]))
        if convert:
            assert len(step.program_cache) == 1
            types = [op.type for op in step.concrete_program.main_program.all_ops()]
            assert "cond" in types and "while" in types
    assert results[1][0] == results[0][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(b, a)


def test_parameter_attributes_in_a_step():
    """A parameter's own learning-rate factor, regularizer and need_clip=False."""
    attr = nn.ParamAttr(learning_rate=0.5, regularizer=d2s.regularizer.L1Decay(0.05),
                        need_clip=False)
    results = []
    for convert in (False, True):
        d2s.seed(0)
        net = nn.Sequential(nn.Linear(4, 8, weight_attr=attr), nn.Tanh(),
                            nn.Linear(8, 2, bias_attr=attr))
        opt = d2s.optimizer.Adam(0.05, parameters=net.parameters(), weight_decay=0.01,
                                 grad_clip=d2s.optimizer.ClipGradByGlobalNorm(0.05))

        def train_step(x, y, net=net, opt=opt):
            loss = LOSS(net(x), y)
            loss.backward()
            opt.step()
            opt.clear_grad()
            return loss

        step = jit.to_static(train_step) if convert else train_step
        losses = [float(step(x, y)) for x, y in _data()]
        results.append((losses, [p.numpy() for p in net.parameters()]))
    assert results[1][0] == results[0][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("flags", [{"batch_minor_layout": True},
                                   {"batch_parallelism": True, "batch_minor_layout": True}])
def test_a_step_under_the_opt_in_flags_stays_close_to_eager(flags):
    """The opt-in layout and batch splitting sum in other orders: the step converted whole
    stays within float32 rounding of eager's."""
    rng = np.random.default_rng(4)
    batches = [(d2s.to_tensor(rng.standard_normal((n, 1, 28, 28)).astype("float32")),
                d2s.to_tensor(rng.integers(0, 10, (n, 1)))) for n in (8, 16, 8)]
    results = []
    for convert in (False, True):
        d2s.seed(0)
        trainer = Trainer(LeNet())
        step = jit.to_static(trainer.step) if convert else trainer.step
        old = d2s.get_flags(list(flags))
        d2s.set_flags(flags)
        try:
            losses = [float(step(x, y)) for x, y in batches]
        finally:
            d2s.set_flags(old)
        results.append((losses, [p.numpy() for p in trainer.net.parameters()]))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
