"""`dy2stat export` of trained models (--params, --checkpoint, the model's own input_spec,
specs that contradict the weights), `--format onnx` and `dy2stat convert SAVED --to onnx`:
what they write runs as the model does, and every mistake is one line with status 2."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import cli

try:
    import onnxruntime as ort
except ModuleNotFoundError:  # the [onnx] extra is not installed: the ONNX cases skip
    ort = None

needs_onnx = pytest.mark.skipif(ort is None, reason="needs onnxruntime (the [onnx] extra)")

MODEL = textwrap.dedent('''
    import dy2stat as d2s
    from dy2stat import nn
    from dy2stat.static import InputSpec


    class Net(nn.Layer):
        """Its forward carries its own input_spec, with a loop and a branch."""

        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.norm = nn.BatchNorm1D(8)
            self.fc2 = nn.Linear(8, 3)

        @d2s.jit.to_static(input_spec=[InputSpec([-1, 4], "float32", "x")])
        def forward(self, x):
            h = self.norm(nn.functional.relu(self.fc1(x)))
            while h.abs().sum() < 30:
                h = h * 2
            y = self.fc2(h)
            if y.mean() > 0:
                return y
            return -y


    class Plain(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x)


    class Noisy(Plain):
        def forward(self, x):
            return self.fc(x) + d2s.rand([3])


    @d2s.jit.to_static(input_spec=[InputSpec([3], "int64", "x")])
    def flipped(x):
        return x ^ 5


    def make():
        d2s.seed(1)
        return Net()


    def scaled():
        return d2s.jit.to_static(lambda x: x * 2)


    def high_level():
        return d2s.Model(make())


    TRACES = []


    class Counted(nn.Layer):
        """Counts how often it is traced (a Python side effect of forward)."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            TRACES.append(1)
            return self.fc(x)


    @d2s.jit.to_static(input_spec=[InputSpec([-1, 4], "float32", "x")])
    def doubled(x):
        return x * 2


    described = d2s.Model(Counted(), inputs=[InputSpec([-1, 4], "float32", "x")])


    def converted_plain():
        return d2s.jit.to_static(Plain(), input_spec=[InputSpec([-1, 4], "float32", "x")])
''')


def run(capsys, *args) -> tuple[int, str, str]:
    status = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def one_line(err: str, command: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"dy2stat {command}: error: "), lines[0]
    return lines[0]


def trained_model(module):
    """The model of ``module`` after some training (its weights and batch-norm statistics
    differ from a fresh one's)."""
    model = module.make()
    optimizer = d2s.optimizer.Adam(learning_rate=0.05, parameters=model.parameters())
    x = d2s.to_tensor(np.random.default_rng(0).standard_normal((16, 4)).astype("float32"))
    for _ in range(3):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
    model.eval()
    return model


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export_trained")
    (folder / "model.py").write_text(MODEL)
    spec = importlib.util.spec_from_file_location("export_trained_model", folder / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = trained_model(module)
    d2s.save(model.state_dict(), str(folder / "trained.pdparams"))
    wrong = dict(model.state_dict(), **{"fc1.weight": d2s.zeros([3, 8])})  # one key's shape
    d2s.save(wrong, str(folder / "wrong_shape.pdparams"))
    d2s.save({"model": model.state_dict(), "epoch": 3}, str(folder / "nested.pdparams"))
    d2s.save({"nested": {"fc1.weight": np.zeros((4, 8), "float32")}, "epoch": 3},
             str(folder / "not_a_state.pdparams"))
    d2s.Model(model).save(str(folder / "ckpt/final"))
    x = np.random.default_rng(1).standard_normal((5, 4)).astype("float32")
    np.save(folder / "x.npy", x)
    expected = model(d2s.to_tensor(x)).numpy()
    fresh = module.make()
    fresh.eval()
    assert not np.allclose(fresh(d2s.to_tensor(x)).numpy(), expected)  # training mattered
    return folder, x, expected


def onnx_outputs(path, x) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


@needs_onnx
@pytest.mark.parametrize("weights", [["--params", "trained.pdparams"],
                                     ["--checkpoint", "ckpt/final"],
                                     ["--checkpoint", "ckpt/final.pdparams"]])
def test_trained_weights_export_as_onnx_with_the_models_own_spec(work, capsys, monkeypatch,
                                                                 weights):
    folder, x, expected = work
    monkeypatch.chdir(folder)
    status, out, err = run(capsys, "export", "model.py:make", *weights, "--format", "onnx",
                           "-o", "out/net")
    assert status == 0, err
    assert out.strip() == "wrote out/net.onnx"
    np.testing.assert_allclose(onnx_outputs(folder / "out/net.onnx", x), expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target, weights", [
    ("model.py:high_level", ["--params", "trained.pdparams"]),  # a d2s.Model: its network
    ("model.py:make", ["--checkpoint", "ckpt/final"])])
def test_trained_weights_export_as_a_program_too(work, capsys, monkeypatch, target, weights):
    folder, x, expected = work
    monkeypatch.chdir(folder)
    status, out, err = run(capsys, "export", target, *weights, "-o", "saved/net")
    assert status == 0 and out.strip() == "wrote saved/net.json and saved/net.safetensors", err
    loaded = d2s.jit.load(str(folder / "saved/net"))
    np.testing.assert_allclose(loaded(x).numpy(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target, x", [
    ("model.py:doubled", np.ones((2, 4), "float32")),  # a converted function, its own spec
    ("model.py:described", np.ones((3, 4), "float32")),  # a d2s.Model: its inputs specs
    ("model.py:converted_plain", np.ones((1, 4), "float32"))])  # to_static(layer, spec)
def test_own_specs_of_a_converted_function_a_model_and_a_layer(work, capsys, monkeypatch,
                                                              target, x):
    folder, _, _ = work
    monkeypatch.chdir(folder)
    status, _, err = run(capsys, "export", target, "-o", "own/m")
    assert status == 0, err
    loaded = d2s.jit.load(str(folder / "own/m"))
    assert loaded.feed_names == ["x"] and loaded(x).shape[0] == len(x)  # -1: any batch


def test_export_traces_the_model_once(work, capsys, monkeypatch):
    folder, _, _ = work
    monkeypatch.chdir(folder)
    status, _, err = run(capsys, "export", "model.py:Counted", "--input-spec",
                         "x:float32[-1,4]", "-o", "once/m")
    assert status == 0, err
    assert len(sys.modules["dy2stat_user_model"].TRACES) == 1


@needs_onnx
def test_the_command_lines_spec_overrides_the_models_own(work, capsys, monkeypatch):
    folder, x, expected = work
    monkeypatch.chdir(folder)
    status, _, err = run(capsys, "export", "model.py:make", "--params", "trained.pdparams",
                         "--input-spec", "x:float32[5,4]", "--format", "onnx", "-o", "fixed")
    assert status == 0, err
    sess = ort.InferenceSession("fixed.onnx", providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].shape == [5, 4]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs a folder no one can write in")
def test_an_output_that_cannot_be_written_is_not_blamed_on_the_model(work, capsys,
                                                                      monkeypatch):
    folder, _, _ = work
    monkeypatch.chdir(folder)
    status, _, err = run(capsys, "export", "model.py:make", "-o", "/proc/dy2stat-none/m")
    line = one_line(err, "export")
    assert status == 2 and line.startswith("dy2stat export: error: /proc/dy2stat-none"), line


@needs_onnx
def test_a_saved_program_converts_to_onnx_without_the_source(work, capsys, monkeypatch):
    folder, x, expected = work
    monkeypatch.chdir(folder)
    status, _, err = run(capsys, "export", "model.py:make", "--params", "trained.pdparams",
                         "-o", "saved/net")
    assert status == 0, err
    status, out, err = run(capsys, "convert", "saved/net", "--to", "onnx")
    assert status == 0 and out.strip() == "wrote saved/net.onnx", err
    np.testing.assert_allclose(onnx_outputs(folder / "saved/net.onnx", x), expected,
                               rtol=1e-5, atol=1e-5)
    status, out, _ = run(capsys, "convert", "saved/net.json", "--to", "onnx", "-o",
                         "other.onnx", "--opset", "21")
    assert status == 0 and out.strip() == "wrote other.onnx"


def _onnx(*case):
    return pytest.param(*case, marks=needs_onnx)


@pytest.mark.parametrize("args, message", [
    (["export", "model.py:Plain", "-o", "o"],
     "model.py: Plain has no input_spec of its own: give --input-spec NAME:DTYPE[DIMS]"),
    (["export", "model.py:make", "--input-spec", "x:float64[-1,4]", "-o", "o"],
     "input 'x' is float64 but make's parameters are float32: give --input-spec "
     '"x:float32[-1,4]"'),
    _onnx(["export", "model.py:make", "--input-spec", "x:float16[2,4]", "-o", "o", "--format",
           "onnx"], "input 'x' is float16 but make's parameters are float32"),
    (["export", "model.py:Plain", "--params", "trained.pdparams", "--input-spec",
      "x:float32[-1,4]", "-o", "o"],
     "--params trained.pdparams: the keys do not match Plain's state dict (missing 'fc.weight'"),
    (["export", "model.py:make", "--params", "wrong_shape.pdparams", "-o", "o"],
     "--params wrong_shape.pdparams: 'fc1.weight' has shape [3, 8], but the model expects "
     "[4, 8]"),
    (["export", "model.py:make", "--params", "not_a_state.pdparams", "-o", "o"],
     "--params not_a_state.pdparams: not a state dict"),
    (["export", "model.py:make", "--params", "nested.pdparams", "-o", "o"],
     "--params nested.pdparams: not a state dict (a dict of tensors by parameter name, as "
     "d2s.save(layer.state_dict(), FILE) writes; this one holds the keys 'model', 'epoch')"),
    (["export", "model.py:Plain", "--input-spec", "x:float32[-1,4]", "--input-spec",
      "y:float32[-1,4]", "-o", "o"],
     "model.py: saving Plain failed: TypeError: forward(x): input_spec gives 2 inputs: too "
     "many positional arguments"),
    (["export", "model.py:make", "--params", "x.npy", "-o", "o"],
     "--params x.npy: not a file d2s.save wrote"),
    (["export", "model.py:scaled", "--params", "trained.pdparams", "--input-spec",
      "x:float32[-1,4]", "-o", "o"],
     "--params trained.pdparams: model.py:scaled is a function, not a Layer"),
    (["export", "model.py:make", "--params", "nothing.pdparams", "-o", "o"],
     "--params nothing.pdparams: no such file"),
    (["export", "model.py:make", "--checkpoint", "ckpt/nothing", "-o", "o"],
     "--checkpoint ckpt/nothing: no such checkpoint (ckpt/nothing.pdparams does not exist)"),
    _onnx(["export", "model.py:make", "-o", "o", "--format", "onnx", "--opset", "12"],
          "--opset: must be an int from 17 to"),
    (["export", "model.py:make", "-o", "o", "--opset", "18"],
     "--opset applies to --format onnx only"),
    _onnx(["export", "model.py:Noisy", "--input-spec", "x:float32[-1,4]", "-o", "o",
           "--format", "onnx"], "op uniform at model.py:"),
    (["convert", "saved/nothing", "--to", "onnx"], "no saved model at saved/nothing"),
])
def test_mistakes_are_one_line_with_status_2(work, capsys, monkeypatch, args, message):
    folder, _, _ = work
    monkeypatch.chdir(folder)
    status, out, err = run(capsys, *args)
    line = one_line(err, args[0])
    assert status == 2 and out == ""
    assert message in line, line
    assert not (folder / "o.onnx").exists() and not (folder / "o.json").exists()


@needs_onnx
def test_converting_an_op_that_needs_a_newer_opset_names_its_line(work, capsys, monkeypatch):
    folder, _, _ = work
    monkeypatch.chdir(folder)
    assert run(capsys, "export", "model.py:flipped", "-o", "bits/m")[0] == 0
    status, _, err = run(capsys, "convert", "bits/m", "--to", "onnx")
    line = one_line(err, "convert")
    assert status == 2 and "op bitwise_xor at " in line and "model.py:" in line
    assert "(`return x ^ 5`): bitwise ops on integers need opset_version 18" in line
    assert not (folder / "bits/m.onnx").exists()
    status, out, err = run(capsys, "convert", "bits/m", "--to", "onnx", "--opset", "18")
    assert status == 0 and out.strip() == "wrote bits/m.onnx", err


@pytest.mark.parametrize("args", [["convert", "saved/net", "--to", "onnx"],
                                  ["export", "model.py:make", "--format", "onnx", "-o", "o"]])
def test_without_the_onnx_package_the_commands_say_how_to_install_it(work, capsys,
                                                                     monkeypatch, args):
    folder, _, _ = work
    monkeypatch.chdir(folder)
    run(capsys, "export", "model.py:make", "-o", "saved/net")
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx fails
    status, _, err = run(capsys, *args)
    line = one_line(err, args[0])
    assert status == 2 and 'pip install "dy2stat[onnx]"' in line


@needs_onnx
def test_an_unsupported_op_names_the_line_of_the_model_file(work, capsys, monkeypatch):
    folder, _, _ = work
    monkeypatch.chdir(folder)
    _, _, err = run(capsys, "export", "model.py:Noisy", "--input-spec", "x:float32[-1,4]",
                    "-o", "o", "--format", "onnx")
    line = one_line(err, "export")
    assert "op uniform at model.py:38 (`return self.fc(x) + d2s.rand([3])`): draws random " \
        "numbers" in line


DY2STAT = [shutil.which("dy2stat")] if shutil.which("dy2stat") else [
    sys.executable, "-m", "dy2stat.cli"]


@pytest.mark.parametrize("command", ["convert", "export"])
def test_the_console_script_has_the_commands(command):
    result = subprocess.run([*DY2STAT, command, "--help"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("usage: dy2stat")
    assert "--params" in result.stdout if command == "export" else "--to" in result.stdout


@needs_onnx
def test_the_console_script_exports_a_checkpoint_to_onnx(work):
    folder, x, expected = work
    result = subprocess.run([*DY2STAT, "export", "model.py:make", "--checkpoint", "ckpt/final",
                             "--format", "onnx", "-o", "console.onnx"], cwd=folder,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(onnx_outputs(folder / "console.onnx", x), expected,
                               rtol=1e-5, atol=1e-5)
