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


def _small_saved(folder, name="net"):
    d2s.seed(0)
    layer = d2s.nn.Linear(3, 2)
    jit.save(layer, str(folder / name), input_spec=[InputSpec([-1, 3], "float32")])
    return layer


@pytest.mark.parametrize("given", ["{p}", "{p}.json", "{p}.safetensors", "{d}"])
def test_load_finds_the_files_from_the_prefix_a_file_or_the_folder(tmp_path, given):
    layer = _small_saved(tmp_path / "out")
    path = given.format(p=tmp_path / "out" / "net", d=tmp_path / "out")
    x = d2s.randn([4, 3])
    np.testing.assert_allclose(jit.load(path)(x).numpy(), layer(x).numpy(), rtol=1e-6)
    program, feeds, _ = d2s.static.load_inference_model(path)
    assert feeds == jit.load(path).feed_names


def test_a_folder_of_several_models_loads_model_or_says_which_it_holds(tmp_path):
    _small_saved(tmp_path, "a")
    _small_saved(tmp_path, "b")
    with pytest.raises(FileNotFoundError, match=r"jit.load: .* is a folder; looked in it for one "
                                                r"saved model .*: it holds 2: 'a', 'b'; name one"):
        jit.load(str(tmp_path))
    _small_saved(tmp_path, "model")  # what ProgramTranslator.save_inference_model writes
    assert jit.load(str(tmp_path)).feed_names


def test_a_missing_model_says_what_it_looked_for(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        jit.load(str(tmp_path / "nope.json"))
    assert str(info.value) == (f"jit.load: no saved model at {tmp_path / 'nope.json'}: looked "
                               f"for {tmp_path / 'nope.json'}.json and "
                               f"{tmp_path / 'nope.json'}.safetensors (the path is the prefix "
                               "given to jit.save)")
    with pytest.raises(FileNotFoundError, match="it holds none"):
        jit.load(str(tmp_path))


def test_a_loaded_model_holds_its_parameters_without_a_second_copy(tmp_path):
    """A parameter file loads in memory about its own size (views of one buffer)."""
    import tracemalloc

    d2s.seed(0)
    big = d2s.nn.Sequential(d2s.nn.Linear(1024, 1024), d2s.nn.Linear(1024, 1024))
    jit.save(big, str(tmp_path / "big"), input_spec=[InputSpec([-1, 1024], "float32")])
    size = (tmp_path / "big.safetensors").stat().st_size
    del big
    tracemalloc.start()
    try:
        loaded = jit.load(str(tmp_path / "big"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size > 8_000_000 and peak < 1.3 * size, (peak, size)
    loaded.train()
    opt = d2s.optimizer.SGD(learning_rate=0.1, parameters=loaded.parameters())
    loaded(d2s.randn([2, 1024])).mean().backward()
    opt.step()  # the views are writable


def test_errors_about_a_feed_quote_its_name_in_a_few_hundred_characters(tmp_path):
    _small_saved(tmp_path)
    doc = json.loads((tmp_path / "net.json").read_text())
    old = doc["feed"][0]
    text = (tmp_path / "net.json").read_text().replace(json.dumps(old), json.dumps("x" * 10**6))
    (tmp_path / "net.json").write_text(text)
    loaded = jit.load(str(tmp_path / "net"))
    with pytest.raises(ValueError) as info:
        loaded(d2s.randn([2, 7]))
    assert len(str(info.value)) < 600 and "1,000,000 characters" in str(info.value)


def test_output_spec_keeps_only_the_chosen_outputs(tmp_path):
    @jit.to_static(input_spec=[InputSpec([None, 3], "float32")])
    def two(x):
        return x * 2, (x + 1).sum(axis=1)

    x = np.arange(6, dtype="float32").reshape(2, 3)
    for spec, want in (([1], [x.sum(1) + 3]), ([0], [x * 2]), ([-1, 0], [x.sum(1) + 3, x * 2])):
        path = str(tmp_path / f"two{len(want)}{spec[0]}")
        jit.save(two, path, output_spec=spec)
        loaded = jit.load(path)
        outs = loaded(x)
        outs = outs if isinstance(outs, list) else [outs]
        assert len(outs) == len(want)
        for got, expected in zip(outs, want):
            np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    concrete = two.concrete_program
    path = str(tmp_path / "by_variable")
    jit.save(two, path, output_spec=[concrete.outputs[1]])
    assert jit.load(path).fetch_names == [concrete.outputs[1].name]
    with pytest.raises(IndexError, match="out of range"):
        jit.save(two, path, output_spec=[2])
    with pytest.raises(ValueError, match="not an output"):
        jit.save(two, path, output_spec=["nothing"])


@pytest.mark.parametrize("count, problem", [(3, "too many positional arguments"),
                                            (1, "missing a required argument: 'y'")])
def test_an_input_spec_of_the_wrong_length_names_the_inputs(tmp_path, count, problem):
    def added(x, y):
        return x + y

    specs = [InputSpec([3], "float32", f"in{i}") for i in range(count)]
    with pytest.raises(TypeError, match=rf"added\(x, y\): input_spec gives {count} inputs?: "
                                        rf"{problem}"):
        jit.save(added, str(tmp_path / "m"), input_spec=specs)
