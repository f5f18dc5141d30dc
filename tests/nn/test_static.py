"""The same layer code builds a static program: persistable parameters and buffers
initialized by the startup program, batch-norm statistics written back by assign ops."""

import numpy as np
import pytest

from dy2stat import nn
from dy2stat.nn import functional as F

try:
    from dy2stat import static
except ImportError as exc:  # dy2stat.static is still being built
    pytest.skip(f"dy2stat.static is not importable yet: {exc}", allow_module_level=True)


@pytest.fixture
def programs():
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        static.enable_static()
        try:
            yield main, startup
        finally:
            static.disable_static()


def _ops(program):
    return [op.type for op in program.global_block().ops]


def test_layers_create_persistable_parameters(programs):
    main, startup = programs
    x = static.data("x", [-1, 1, 6, 6])
    model = nn.Sequential(nn.Conv2D(1, 2, 3), nn.BatchNorm2D(2), nn.ReLU(), nn.MaxPool2D(2),
                          nn.Flatten(), nn.Linear(8, 3))
    y = model(x)
    assert y.shape == [-1, 3]
    params = model.parameters()
    assert len(params) == 6
    block = main.global_block()
    for p in params:
        assert isinstance(p, static.Variable) and p.persistable and not p.stop_gradient
        assert block.vars[p.name].persistable
    startup_outputs = {n for op in startup.global_block().ops for n in op.output_names()}
    state = model.state_dict()
    assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias", "1._mean",
                           "1._variance", "5.weight", "5.bias"]
    assert {v.name for v in state.values()} <= startup_outputs
    assert state["1._mean"].persistable and state["1._mean"].stop_gradient


def test_batch_norm_writes_running_statistics_back(programs):
    main, _ = programs
    bn = nn.BatchNorm2D(2)
    bn(static.data("x", [-1, 2, 3, 3]))
    assigns = [op for op in main.global_block().ops if op.type == "assign"]
    assert {op.outputs["Out"][0] for op in assigns} == {bn._mean.name, bn._variance.name}
    bn.eval()
    before = len(main.global_block().ops)
    bn(static.data("x2", [-1, 2, 3, 3]))
    assert "assign" not in _ops(main)[before:]


def test_dropout_emits_a_mask_in_training_only(programs):
    main, _ = programs
    x = static.data("x", [-1, 4])
    F.dropout(x, 0.5)
    assert _ops(main)[-2:] == ["bernoulli_mask", "dropout"]
    n = len(main.global_block().ops)
    assert F.dropout(x, 0.5, training=False) is x and len(main.global_block().ops) == n


def test_lstm_builds_in_static_mode(programs):
    main, _ = programs
    lstm = nn.LSTM(3, 4, num_layers=2)
    out, (h, c) = lstm(static.data("x", [2, 5, 3]))
    assert out.shape == [2, 5, 4] and h.shape == [2, 2, 4]
    assert len([p for p in lstm.parameters() if p.persistable]) == 8


def test_static_program_runs_and_matches_numpy(programs):
    main, startup = programs
    x = static.data("x", [-1, 3])
    layer = nn.Linear(3, 2)
    bn = nn.BatchNorm1D(2, momentum=0.5)
    y = bn(layer(x))
    exe = static.Executor()
    exe.run(startup)
    scope = static.global_scope()
    w, b = np.asarray(scope[layer.weight.name]), np.asarray(scope[layer.bias.name])
    data = np.random.default_rng(0).standard_normal((5, 3)).astype("float32")
    (out,) = exe.run(main, feed={"x": data}, fetch_list=[y])
    z = data @ w + b
    ref = (z - z.mean(0)) / np.sqrt(z.var(0) + 1e-5)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(scope[bn._mean.name]), 0.5 * z.mean(0), rtol=1e-5,
                               atol=1e-6)


def test_eager_layer_called_on_static_input_captures_its_buffers():
    static.disable_static()
    bn = nn.BatchNorm2D(2)  # built eagerly, as to_static sees it
    main = static.Program()
    with static.program_guard(main, static.Program()):
        bn(static.data("x", [-1, 2, 3, 3]))
    assigns = [op for op in main.global_block().ops if op.type == "assign"]
    assert {op.outputs["Out"][0] for op in assigns} == {bn._mean.name, bn._variance.name}
    assert main.global_block().vars[bn._mean.name].persistable


def test_set_state_dict_of_a_static_layer_fills_the_scope(programs):
    main, startup = programs
    x = static.data("x", [-1, 2])
    layer = nn.Linear(2, 2)
    y = layer(x)
    exe = static.Executor()
    exe.run(startup)
    weight = np.array([[1.0, 2.0], [3.0, 4.0]])
    layer.set_state_dict({"weight": weight, "bias": np.array([0.5, -0.5])})
    (out,) = exe.run(main, feed={"x": np.ones((1, 2), dtype="float32")}, fetch_list=[y])
    np.testing.assert_allclose(out, [[4.5, 5.5]])
