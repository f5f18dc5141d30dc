"""``d2s.Model`` with ``inputs`` specs in dynamic mode: the network is converted with
``jit.to_static`` and trained by the eager loop (mode 2)."""

import numpy as np
import pytest

from dy2stat.io import DataLoader
from tests.hapi.helpers import N_TEST, datasets, lenet_model, write_idx_dataset

try:
    from dy2stat import jit
except ImportError as exc:  # the transpiler (dy2stat.dy2static.convert) is still being built
    pytest.skip(f"dy2stat.jit is not importable yet: {exc}", allow_module_level=True)


@pytest.fixture
def data(tmp_path):
    write_idx_dataset(tmp_path)
    return datasets(tmp_path)


def test_to_static_training_matches_eager_step_by_step(data):
    train, _ = data
    batches = list(DataLoader(train, batch_size=16))
    losses = {}
    for label, inputs in (("eager", None), ("converted", "specs")):
        model = lenet_model(inputs=None) if inputs is None else lenet_model()
        losses[label] = [float(model.train_batch([x], [y])[0][0]) for x, y in batches * 2]
        if inputs is not None:
            assert isinstance(model.network.forward, jit.StaticFunction)
            assert model.network.forward.main_program is not None
    np.testing.assert_allclose(losses["converted"], losses["eager"], rtol=1e-4, atol=1e-5)
    assert losses["converted"][-1] < losses["converted"][0]


def test_fit_evaluate_predict_through_converted_code(data):
    train, test = data
    model = lenet_model()
    history = model.fit(train, test, epochs=4, batch_size=16, verbose=0)
    assert history["loss"][-1][0] < 0.5 * history["loss"][0][0]
    result = model.evaluate(test, batch_size=16, verbose=0)
    assert result["acc_top1"] > 0.5
    assert model.predict(test, batch_size=8, stack_outputs=True, verbose=0)[0].shape == (
        N_TEST, 10)


def test_save_inference_model_loads_without_the_source(data, tmp_path):
    train, test = data
    model = lenet_model()
    model.fit(train, epochs=1, batch_size=32, verbose=0)
    path = str(tmp_path / "lenet")
    model.save(path, training=False)
    loaded = jit.load(path)
    x = next(iter(DataLoader(test, batch_size=N_TEST)))[0]
    expected = model.predict_batch([x])[0]
    np.testing.assert_allclose(loaded(x).numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loaded(x[:3]).numpy(), expected[:3], rtol=1e-5, atol=1e-6)
