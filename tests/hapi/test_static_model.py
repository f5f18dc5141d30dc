"""``d2s.Model`` after ``d2s.enable_static()``: the seed's script unchanged, trained
through static programs and an Executor; checkpoints shared with dynamic mode."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import static
from dy2stat.hapi import Model
from dy2stat.io import DataLoader
from dy2stat.static import InputSpec
from dy2stat.static.variable import Variable
from dy2stat.vision.models import LeNet
from tests.hapi.helpers import (
    N_TEST,
    X_SPEC,
    Y_SPEC,
    datasets,
    lenet_model,
    write_idx_dataset,
)


@pytest.fixture
def folder(tmp_path):
    write_idx_dataset(tmp_path)
    return tmp_path


@pytest.fixture
def static_mode():
    """Static mode with fresh default programs (what a new process has); always undone."""
    main, startup = static.Program(), static.Program()
    d2s.enable_static()
    try:
        with static.program_guard(main, startup):
            yield main, startup
    finally:
        d2s.disable_static()


def seed_script(folder, epochs=4):
    """The second seed's appendix, line for line (with a local data set and 16-sample
    batches): the same code runs in dynamic and static mode."""
    train_dataset, test_dataset = datasets(folder)
    x_spec = InputSpec(shape=[-1, 1, 28, 28], dtype="float32", name="x")
    y_spec = InputSpec(shape=[-1, 1], dtype="int64", name="y")
    d2s.seed(0)
    lenet = LeNet()
    model = Model(lenet, inputs=x_spec, labels=y_spec)  # d2s.Model
    model.prepare(
        d2s.optimizer.Adam(learning_rate=0.002, parameters=model.parameters()),
        d2s.nn.CrossEntropyLoss(),
        d2s.metric.Accuracy(topk=(1, 2)),
    )
    history = model.fit(train_dataset, epochs=epochs, batch_size=16, log_freq=400, verbose=0)
    result = model.evaluate(test_dataset, log_freq=40, batch_size=64, verbose=0)
    return model, history, result


def test_seed_script_trains_in_static_mode(folder, static_mode):
    model, history, result = seed_script(folder)
    assert model.static
    assert all(isinstance(p, Variable) for p in model.parameters())
    losses = [epoch[0] for epoch in history["loss"]]
    assert losses[-1] < 0.5 * losses[0]
    assert list(result) == ["loss", "acc_top1", "acc_top2"]
    assert result["acc_top1"] > 0.5 and result["acc_top2"] >= result["acc_top1"]

    built = model._adapter._built
    train_ops = [op.type for op in built["train"].program.global_block().ops]
    eval_ops = [op.type for op in built["eval"].program.global_block().ops]
    assert "adam" in train_ops and "conv2d" in train_ops
    assert "adam" not in eval_ops and not any(t.endswith("_grad") for t in eval_ops)
    assert built["train"].input_names == ["x"] and built["train"].label_names == ["y"]

    _, test = datasets(folder)
    outputs = model.predict(test, batch_size=10, stack_outputs=True, verbose=0)
    assert outputs[0].shape == (N_TEST, 10)
    assert built["predict"].label_names == []
    labels = np.array([int(test[i][1][0]) for i in range(N_TEST)])
    assert np.mean(outputs[0].argmax(1) == labels) == pytest.approx(result["acc_top1"])


def test_seed_script_trains_in_dynamic_mode_too(folder):
    jit_ok = True
    try:
        import dy2stat.jit  # noqa: F401
    except ImportError:
        jit_ok = False
    if jit_ok:
        model, history, result = seed_script(folder)
    else:  # inputs specs ask for to_static: without the transpiler Model trains eagerly
        with pytest.warns(RuntimeWarning, match="trained eagerly"):
            model, history, result = seed_script(folder)
    assert not model.static
    assert model._adapter.converted == jit_ok  # mode 2: trained through to_static code
    assert history["loss"][-1][0] < 0.5 * history["loss"][0][0]
    assert result["acc_top1"] > 0.5


def test_batch_methods_and_labels_specs_from_the_data(folder, static_mode):
    train, _ = datasets(folder)
    model = lenet_model(labels=None)  # label specs come from the first batch
    x, y = next(iter(DataLoader(train, batch_size=8)))
    losses, metrics = model.train_batch([x], [y])
    assert np.shape(losses[0]) == () and len(metrics[0]) == 2
    spec = model._adapter._built["train"].label_specs[0]
    assert spec.shape == (-1, 1) and spec.dtype == np.int64
    before = model.eval_batch([x], [y])[0][0]
    for _ in range(5):
        model.train_batch(x.numpy(), y.numpy())
    assert model.eval_batch([x], [y])[0][0] < before
    assert model.predict_batch(x)[0].shape == (8, 10)
    with pytest.raises(ValueError, match="update=False"):
        model.train_batch([x], [y], update=False)


def test_static_mode_needs_inputs_specs(static_mode):
    with pytest.raises(ValueError, match="static mode needs the inputs InputSpecs"):
        Model(LeNet())


def test_save_and_load_round_trip_in_static_mode(folder, static_mode, tmp_path):
    train, test = datasets(folder)
    model = lenet_model()
    model.fit(train, epochs=2, batch_size=16, verbose=0)
    path = str(tmp_path / "static_ckpt")
    model.save(path)
    expected = model.predict(test, batch_size=32, verbose=0)[0][0]

    other = lenet_model(seed=5)
    other.load(path)  # before any program ran: the values wait in the scope
    np.testing.assert_allclose(other.predict(test, batch_size=32, verbose=0)[0][0], expected,
                               rtol=1e-6, atol=1e-6)
    # the accumulators were restored: one more identical step gives identical weights
    x, y = next(iter(DataLoader(train, batch_size=16)))
    model.train_batch([x], [y])
    other.train_batch([x], [y])
    a, b = model._adapter.state_arrays(), other._adapter.state_arrays()
    assert list(a) == list(b)
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_checkpoints_move_between_dynamic_and_static_mode(folder, tmp_path):
    train, test = datasets(folder)
    dynamic = lenet_model(inputs=None)
    dynamic.fit(train, epochs=1, batch_size=16, verbose=0)
    dynamic.save(str(tmp_path / "dyn"))
    expected = dynamic.predict(test, batch_size=32, verbose=0)[0][0]
    expected_eval = dynamic.evaluate(test, batch_size=32, verbose=0)

    main, startup = static.Program(), static.Program()
    d2s.enable_static()
    try:
        with static.program_guard(main, startup):
            model = lenet_model(seed=9)
            model.load(str(tmp_path / "dyn"))
            got = model.predict(test, batch_size=32, verbose=0)[0][0]
            got_eval = model.evaluate(test, batch_size=32, verbose=0)
            model.fit(train, epochs=1, batch_size=16, verbose=0)
            model.save(str(tmp_path / "static"))
    finally:
        d2s.disable_static()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert got_eval["acc_top1"] == expected_eval["acc_top1"]
    assert got_eval["loss"][0] == pytest.approx(expected_eval["loss"][0], rel=1e-4)

    back = lenet_model(inputs=None, seed=11)
    back.load(str(tmp_path / "static"))
    state = back._optimizer.state_dict()
    assert len(state) == 4 * len(back.parameters())  # Adam's accumulators, keyed by param


def test_save_inference_model_in_static_mode(folder, static_mode, tmp_path):
    train, test = datasets(folder)
    model = lenet_model(labels=[Y_SPEC])
    model.fit(train, epochs=1, batch_size=32, verbose=0)
    path = str(tmp_path / "infer" / "lenet")
    model.save(path, training=False)
    assert (tmp_path / "infer" / "lenet.json").is_file()
    assert (tmp_path / "infer" / "lenet.safetensors").is_file()
    expected = model.predict(test, batch_size=N_TEST, verbose=0)[0][0]
    x = next(iter(DataLoader(test, batch_size=N_TEST)))[0]
    program, feeds, fetches = static.load_inference_model(path, static.Executor())
    assert feeds == [X_SPEC.name]
    (got,) = static.Executor().run(program, feed={feeds[0]: x}, fetch_list=fetches)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert "adam" not in [op.type for op in program.all_ops()]
