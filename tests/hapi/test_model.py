"""``d2s.Model`` in dynamic mode: the seed's MNIST-style fit/evaluate/predict flow on an
IDX data set written here, the batch methods, callbacks, progress output, save/load."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.hapi import Callback, EarlyStopping, Model
from dy2stat.io import DataLoader, TensorDataset
from dy2stat.vision.models import LeNet
from tests.hapi.helpers import N_TEST, N_TRAIN, datasets, lenet_model, write_idx_dataset


@pytest.fixture
def data(tmp_path):
    write_idx_dataset(tmp_path)
    return datasets(tmp_path)


def test_fit_evaluate_predict_learns_the_data_set(data):
    train, test = data
    model = lenet_model(inputs=None)  # mode 1: plain eager training
    assert not model.static
    history = model.fit(train, test, epochs=4, batch_size=16, verbose=0)
    assert model.history is history
    assert set(history) == {"loss", "acc_top1", "acc_top2", "eval_loss", "eval_acc_top1",
                            "eval_acc_top2"}
    assert len(history["loss"]) == 4 and len(history["eval_acc_top1"]) == 4
    losses = [epoch[0] for epoch in history["loss"]]
    assert losses[-1] < 0.5 * losses[0]
    assert history["acc_top2"][-1] >= history["acc_top1"][-1]

    result = model.evaluate(test, batch_size=8, verbose=0)
    assert list(result) == ["loss", "acc_top1", "acc_top2"]
    assert isinstance(result["loss"], list) and len(result["loss"]) == 1
    assert result["acc_top1"] > 0.5  # chance is 0.1
    assert result["acc_top2"] >= result["acc_top1"]

    outputs = model.predict(test, batch_size=10, verbose=0)
    assert len(outputs) == 1 and [o.shape for o in outputs[0]] == [(10, 10)] * 3 + [(2, 10)]
    stacked = model.predict(test, batch_size=10, stack_outputs=True, verbose=0)[0]
    assert stacked.shape == (N_TEST, 10)
    labels = np.array([int(test[i][1][0]) for i in range(N_TEST)])
    assert np.mean(stacked.argmax(axis=1) == labels) == pytest.approx(result["acc_top1"])


def test_evaluate_loss_is_the_mean_over_the_data_set(data):
    _, test = data
    model = lenet_model(inputs=None)
    result = model.evaluate(test, batch_size=32, verbose=0)
    by_eight = model.evaluate(test, batch_size=8, verbose=0)
    assert by_eight["loss"][0] == pytest.approx(result["loss"][0], rel=1e-5)
    assert by_eight["acc_top1"] == result["acc_top1"]


def test_batch_methods(data):
    train, _ = data
    model = lenet_model(inputs=None)
    loader = DataLoader(train, batch_size=8)
    x, y = next(iter(loader))
    losses, metrics = model.train_batch([x], [y])
    assert len(losses) == 1 and np.shape(losses[0]) == ()
    assert len(metrics) == 1 and len(metrics[0]) == 2  # Accuracy(topk=(1, 2)): [top1, top2]
    before = model.eval_batch([x], [y])[0][0]
    for _ in range(5):
        model.train_batch(x.numpy(), y.numpy())  # arrays and single values work too
    after = model.eval_batch([x], [y])[0][0]
    assert after < before
    out = model.predict_batch([x])
    assert len(out) == 1 and out[0].shape == (8, 10) and isinstance(out[0], np.ndarray)

    no_metrics = lenet_model(inputs=None, metrics=False)
    result = no_metrics.train_batch([x], [y])
    assert isinstance(result, list) and len(result) == 1
    no_loss = Model(LeNet())
    no_loss.prepare(metrics=d2s.metric.Accuracy())
    assert isinstance(no_loss.eval_batch([x], [y])[0], float)  # just the metrics
    with pytest.raises(RuntimeError, match="no optimizer"):
        no_loss.train_batch([x], [y])


def test_gradient_accumulation_matches_one_big_batch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4)).astype("float32")
    y = rng.standard_normal((8, 2)).astype("float32")
    weights = []
    for accumulate in (False, True):
        d2s.seed(3)
        net = d2s.nn.Linear(4, 2)
        model = Model(net)
        model.prepare(d2s.optimizer.SGD(0.1, parameters=model.parameters()),
                      d2s.nn.MSELoss(reduction="sum"))
        if accumulate:
            model.train_batch([x[:4]], [y[:4]], update=False)
            model.train_batch([x[4:]], [y[4:]])
        else:
            model.train_batch([x], [y])
        weights.append(net.weight.numpy())
    np.testing.assert_allclose(weights[0], weights[1], rtol=1e-5, atol=1e-6)


def test_fit_takes_a_dataloader_and_tensor_datasets():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]], dtype="float32")).astype("float32")
    d2s.seed(1)
    model = Model(d2s.nn.Linear(3, 1))
    model.prepare(d2s.optimizer.Adam(0.05, parameters=model.parameters()), d2s.nn.MSELoss())
    loader = DataLoader(TensorDataset([x, y]), batch_size=8, shuffle=True)
    history = model.fit(loader, epochs=15, verbose=0)
    assert history["loss"][-1][0] < 0.1 * history["loss"][0][0]
    assert list(model.evaluate(TensorDataset([x, y]), batch_size=40, verbose=0)) == ["loss"]


def test_verbose_output(data, capsys):
    train, test = data
    model = lenet_model(inputs=None)
    model.fit(train, epochs=1, batch_size=16, log_freq=2, verbose=2)
    out = capsys.readouterr().out
    assert "Epoch 1/1" in out
    assert "step 2/4 - loss: " in out and "acc_top1: " in out and "acc_top2: " in out
    assert "step 4/4" in out
    model.evaluate(test, batch_size=16, log_freq=1, verbose=2)
    out = capsys.readouterr().out
    assert "Eval begin..." in out and "step 1/2 - loss" in out and f"Eval samples: {N_TEST}" in out
    model.fit(train, epochs=1, batch_size=16, verbose=1)
    captured = capsys.readouterr()
    assert "Epoch 1/1" in captured.out and "4/4" in captured.out and "loss: " in captured.out
    model.fit(train, epochs=1, batch_size=16, verbose=0)
    model.predict(test, batch_size=16, verbose=0)
    assert capsys.readouterr().out == ""


def test_callbacks_see_the_loop(data):
    train, test = data
    events = []

    class Recorder(Callback):
        def on_train_begin(self, logs=None):
            events.append(("train_begin", self.params["epochs"], self.params["steps"]))

        def on_epoch_end(self, epoch, logs=None):
            events.append(("epoch_end", epoch, sorted(logs)))

        def on_train_batch_end(self, step, logs=None):
            events.append(("batch", step, logs["batch_size"], len(logs["loss"])))

        def on_eval_end(self, logs=None):
            events.append(("eval_end", logs["samples"]))

        def on_train_end(self, logs=None):
            events.append(("train_end",))

    model = lenet_model(inputs=None)
    model.fit(train, test, epochs=2, batch_size=32, eval_freq=2, verbose=0,
              callbacks=Recorder())  # one callback, or a list
    assert events[0] == ("train_begin", 2, 2)
    assert events[1:3] == [("batch", 0, 32, 1), ("batch", 1, 32, 1)]
    assert events[3] == ("epoch_end", 0, ["acc_top1", "acc_top2", "batch_size", "loss",
                                          "samples", "step"])
    assert [e[0] for e in events[4:]] == ["batch", "batch", "epoch_end", "eval_end",
                                          "train_end"]  # evaluated every second epoch
    assert events[-2] == ("eval_end", N_TEST)


def test_lr_scheduler_steps_per_batch(data):
    train, _ = data
    d2s.seed(0)
    scheduler = d2s.optimizer.lr.StepDecay(0.01, step_size=1, gamma=0.5)
    model = Model(LeNet())
    model.prepare(d2s.optimizer.Adam(scheduler, parameters=model.parameters()),
                  d2s.nn.CrossEntropyLoss())
    model.fit(train, epochs=1, batch_size=16, verbose=0)
    assert scheduler.last_epoch == N_TRAIN // 16
    assert model._optimizer.get_lr() == pytest.approx(0.01 * 0.5 ** 4)


def test_early_stopping_stops_fit(data):
    train, test = data

    class Worse(Callback):  # the evaluated "loss" gets worse every time
        def on_eval_end(self, logs=None):
            self.n = getattr(self, "n", 0) + 1
            logs["loss"] = [float(self.n)]

    model = lenet_model(inputs=None)
    history = model.fit(train, test, epochs=6, batch_size=32, verbose=0,
                        callbacks=[Worse(), EarlyStopping("loss", patience=1, verbose=0,
                                                          save_best_model=False)])
    assert len(history["loss"]) == 3  # best at 1, worse twice: stop after epoch 3


def test_save_and_load_round_trip(data, tmp_path):
    train, test = data
    model = lenet_model(inputs=None)
    model.fit(train, epochs=2, batch_size=16, verbose=0)
    path = str(tmp_path / "ckpt" / "lenet")
    model.save(path)
    assert (tmp_path / "ckpt" / "lenet.pdparams").is_file()
    assert (tmp_path / "ckpt" / "lenet.pdopt").is_file()
    assert open(path + ".pdparams", "rb").read(1) != b"\x80"  # not a pickle
    expected = model.predict(test, batch_size=32, verbose=0)[0][0]
    expected_eval = model.evaluate(test, batch_size=32, verbose=0)

    other = lenet_model(inputs=None, seed=7)  # fresh weights, other runtime names
    assert not np.allclose(other.predict(test, batch_size=32, verbose=0)[0][0], expected)
    other.load(path)
    np.testing.assert_allclose(other.predict(test, batch_size=32, verbose=0)[0][0], expected,
                               rtol=1e-6, atol=1e-6)
    got_eval = other.evaluate(test, batch_size=32, verbose=0)
    assert got_eval.keys() == expected_eval.keys()
    for key, value in expected_eval.items():
        assert np.allclose(got_eval[key], value, rtol=1e-6), key
    # the optimizer state came along: one more identical step gives identical weights
    x, y = next(iter(DataLoader(train, batch_size=16)))
    model.train_batch([x], [y])
    other.train_batch([x], [y])
    for a, b in zip(model.parameters(), other.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_load_checks_and_options(data, tmp_path):
    train, _ = data
    model = lenet_model(inputs=None)
    model.fit(train, epochs=1, batch_size=32, verbose=0)
    path = str(tmp_path / "m")
    model.save(path)

    small = Model(LeNet(num_classes=5))
    small.prepare(d2s.optimizer.Adam(parameters=small.parameters()), d2s.nn.CrossEntropyLoss())
    with pytest.raises(ValueError, match=r"fc\.2\.weight has shape \[84, 10\]"):
        small.load(path)
    with pytest.warns(UserWarning, match=r"skip loading fc\.2\."):
        small.load(path + ".pdparams", skip_mismatch=True)
    np.testing.assert_array_equal(small.network.features[0].weight.numpy(),
                                  model.network.features[0].weight.numpy())
    fresh = lenet_model(inputs=None, seed=3)
    fresh.load(path, reset_optimizer=True)
    assert fresh._optimizer.state_dict() == {}
    with pytest.raises(FileNotFoundError, match="missing.pdparams"):
        fresh.load(str(tmp_path / "missing"))


def test_checkpoints_during_fit(data, tmp_path):
    train, _ = data
    model = lenet_model(inputs=None)
    model.fit(train, epochs=2, batch_size=32, save_dir=str(tmp_path / "ck"), verbose=0)
    names = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert names == ["0.pdopt", "0.pdparams", "1.pdopt", "1.pdparams", "final.pdopt",
                     "final.pdparams"]


def test_inputs_and_labels_from_the_forward_signature():
    class TwoInputs(d2s.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = d2s.nn.Linear(3, 1)

        def forward(self, a, b, scale=1.0):
            return self.fc(a + b) * scale

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((12, 3)).astype("float32") for _ in range(2))
    y = (a + b).sum(axis=1, keepdims=True)
    model = Model(TwoInputs())
    model.prepare(d2s.optimizer.SGD(0.05, parameters=model.parameters()), d2s.nn.MSELoss())
    history = model.fit(TensorDataset([a, b, y]), batch_size=4, epochs=10, verbose=0)
    assert history["loss"][-1][0] < history["loss"][0][0]
    assert model.predict(TensorDataset([a, b]), batch_size=12, verbose=0)[0][0].shape == (12, 1)


def test_summary(capsys):
    d2s.seed(0)
    model = Model(LeNet(), inputs=None)
    info = model.summary(input_size=(1, 1, 28, 28))
    out = capsys.readouterr().out
    assert info == {"total_params": 61610, "trainable_params": 61610}
    assert "fc.2 (Linear)" in out and "[1, 10]" in out and "Total params: 61,610" in out


def test_argument_errors(data):
    train, _ = data
    with pytest.raises(TypeError, match="nn.Layer"):
        Model(lambda x: x)
    with pytest.raises(TypeError, match="InputSpec"):
        Model(LeNet(), inputs=[[-1, 1, 28, 28]])
    model = Model(LeNet())
    with pytest.raises(TypeError, match="Metric"):
        model.prepare(metrics=[object()])
    with pytest.raises(TypeError, match="Optimizer"):
        model.prepare(optimizer="adam")
    with pytest.raises(RuntimeError, match=r"call model\.prepare"):
        model.fit(train, verbose=0)
    model = lenet_model(inputs=None)
    with pytest.raises(ValueError, match="epochs"):
        model.fit(train, epochs=0)
    with pytest.raises(ValueError, match="verbose"):
        model.fit(train, verbose=3)
    with pytest.raises(ValueError, match="batch_size"):
        model.evaluate(train, batch_size=0)
    with pytest.raises(ValueError, match="path"):
        model.save("out/")
    with pytest.raises(ValueError, match="needs the inputs InputSpecs"):
        model.save("plain", training=False)
