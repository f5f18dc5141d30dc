"""``jit.save`` -> ``jit.load`` in a process that never imports the model's module."""

import importlib.util
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from dy2stat.static import InputSpec

MODEL_SOURCE = '''
import dy2stat as d2s
from dy2stat import nn


class SavedNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        h = self.fc1(x).relu()
        if h.mean() > 0.5:
            h = h * 0.5
        i = 0
        while i < h.shape[0] - 10:
            h = h + 0.0
            i += 1
        return self.fc2(h)
'''

LOADER = textwrap.dedent('''
    import json, sys
    import numpy as np
    import dy2stat as d2s
    from dy2stat import jit

    prefix, data = sys.argv[1], sys.argv[2]
    model = jit.load(prefix)
    result = {"leaked": [m for m in sys.modules if "d2s_saved_model" in m]}
    for batch in (2, 5):
        x = d2s.to_tensor(np.load(f"{data}/x{batch}.npy"))
        expected = np.load(f"{data}/y{batch}.npy")
        result[f"diff{batch}"] = float(np.abs(model(x).numpy() - expected).max())
    model.train()
    params = model.parameters()
    result["trainable"] = len(params) > 0 and all(not p.stop_gradient for p in params)
    opt = d2s.optimizer.Adam(parameters=params, learning_rate=0.01)
    x = d2s.to_tensor(np.load(f"{data}/x5.npy"))
    target = d2s.zeros([5, 3])
    losses = []
    for _ in range(6):
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    result["losses"] = losses
    print(json.dumps(result))
''')


def import_model(path):
    spec = importlib.util.spec_from_file_location("d2s_saved_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not put in sys.modules: nothing can find it by name
    return module


@pytest.fixture
def saved(tmp_path):
    source = tmp_path / "d2s_saved_model.py"
    source.write_text(MODEL_SOURCE)
    module = import_model(source)
    d2s.seed(0)
    net = jit.to_static(module.SavedNet(), input_spec=[InputSpec([-1, 6], "float32")])
    data = tmp_path / "data"
    data.mkdir()
    for batch in (2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 6)).astype("float32")
        np.save(data / f"x{batch}.npy", x)
        np.save(data / f"y{batch}.npy", net(d2s.to_tensor(x)).numpy())
    prefix = tmp_path / "export" / "net"
    jit.save(net, str(prefix))
    assert net.training  # saved in eval mode, left as it was
    source.unlink()  # loading never needs the source
    return net, prefix, data


def test_files_are_the_documented_pair(saved):
    _, prefix, _ = saved
    assert prefix.with_suffix(".json").exists() and prefix.with_suffix(".safetensors").exists()
    program = json.loads(prefix.with_suffix(".json").read_text())
    assert "while" in json.dumps(program) and "cond" in json.dumps(program)


def test_load_in_a_process_that_never_imported_the_model(saved, tmp_path):
    _, prefix, data = saved
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    proc = subprocess.run([sys.executable, "-c", LOADER, str(prefix), str(data)],
                          cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["leaked"] == []
    assert result["diff2"] < 1e-5 and result["diff5"] < 1e-5
    assert result["trainable"]
    losses = result["losses"]
    assert losses[-1] < 0.7 * losses[0]


def test_loaded_model_in_process_matches_and_its_gradients_match(saved):
    net, prefix, data = saved
    loaded = jit.load(str(prefix))
    x = d2s.to_tensor(np.load(data / "x5.npy"))
    np.testing.assert_allclose(loaded(x).numpy(), np.load(data / "y5.npy"), rtol=1e-6)
    loss = (loaded(x) ** 2).mean()
    loss.backward()
    (net(x) ** 2).mean().backward()
    got = sorted(p.grad.numpy().sum() for p in loaded.parameters())
    want = sorted(p.grad.numpy().sum() for p in net.parameters())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_save_a_function_with_an_input_spec(tmp_path):
    def f(x):
        return (x * 2).sum(axis=1)

    jit.save(f, str(tmp_path / "f"), input_spec=[InputSpec([None, 3])])
    loaded = jit.load(str(tmp_path / "f"))
    for batch in (1, 4):
        x = np.ones((batch, 3), "float32")
        np.testing.assert_allclose(loaded(x).numpy(), np.full(batch, 6.0), rtol=1e-6)


def test_a_loaded_model_rejects_a_contradicting_input(saved):
    _, prefix, _ = saved
    loaded = jit.load(str(prefix))
    with pytest.raises(ValueError, match="shape"):
        loaded(d2s.ones([2, 7]))
