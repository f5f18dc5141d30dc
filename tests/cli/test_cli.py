"""Every `dy2stat` subcommand driven through its console script, in a subprocess."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from xml.etree import ElementTree

import numpy as np
import pytest

import dy2stat as d2s

DY2STAT = [shutil.which("dy2stat")] if shutil.which("dy2stat") else [
    sys.executable, "-m", "dy2stat.cli"]

# A model file with nested control flow: an `if` inside a `while`, `break`, early
# returns, a tensor-valued loop, a helper called from converted code, and a factory
# for `export`. Run as a script it writes both functions' results to an .npz file.
MODEL = textwrap.dedent('''
    """A model file with nested control flow."""
    import sys

    import numpy as np

    import dy2stat as d2s
    from dy2stat import nn


    def halve(x):
        if x.max() > 4:
            return x * 0.5
        return x


    @d2s.jit.to_static
    def scale_until(x, limit):
        """Double x until its sum passes limit; at most 10 times."""
        i = 0
        while i < 10:
            if x.sum() > limit:
                break
            x = x * 2
            i += 1
        if x.mean() > 100:
            return x - 100
        return halve(x) + i


    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 3)

        @d2s.declarative
        def forward(self, x):
            h = nn.functional.relu(self.fc1(x))
            n = 0
            while h.abs().sum() < 40:
                if n > 3:
                    h = h + 1
                else:
                    h = h * 2
                n += 1
            y = self.fc2(h)
            if y.mean() > 0:
                return y * 2
            return -y


    def make():
        d2s.seed(1)
        return Net()


    if __name__ == "__main__":
        x = d2s.to_tensor(np.load(sys.argv[1]))
        np.savez(sys.argv[2], scaled=scale_until(x, 20.0).numpy(), net=make()(x).numpy())
''')


def dy2stat(*args, cwd=None, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run([*DY2STAT, *map(str, args)], cwd=cwd, capture_output=True,
                            text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with the model file, an input array, and the model exported once."""
    folder = tmp_path_factory.mktemp("cli")
    (folder / "model.py").write_text(MODEL)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
    np.save(folder / "x.npy", x)
    dy2stat("export", "model.py:make", "--input-spec", "x:float32[-1,4]", "-o", "saved/net",
            cwd=folder)
    return folder


@pytest.mark.parametrize("command", [[], ["demo"], ["transpile"], ["export"], ["inspect"],
                                     ["run"], ["launch"]])
def test_help(command):
    result = dy2stat(*command, "--help")
    assert result.stdout.startswith("usage: dy2stat")
    assert "Traceback" not in result.stderr


def test_demo_trains():
    result = dy2stat("demo", "--steps", "20")
    assert "trained 20 steps" in result.stdout


def test_transpile_prints_the_converted_functions(work):
    out = dy2stat("transpile", "model.py", cwd=work).stdout
    assert "# model.py:" in out and "scale_until" in out and "Net.forward" in out
    assert "_jst.convert_while_loop(" in out and "_jst.convert_ifelse(" in out
    assert "def halve" not in out and "def make" not in out  # not marked


@pytest.mark.parametrize("name", ["Net", "Net.forward"])
def test_transpile_one_function(work, name):
    out = dy2stat("transpile", "model.py", "--function", name, cwd=work).stdout
    assert out.startswith("# model.py:") and "def forward(self, x):" in out
    assert "scale_until" not in out


def test_transpiled_module_runs_and_matches(work):
    dy2stat("transpile", "model.py", "-o", "converted.py", cwd=work)
    text = (work / "converted.py").read_text()
    assert "@d2s.jit.to_static" not in text and "@d2s.declarative" not in text
    assert "from dy2stat.dy2static import convert_operators as _jst" in text
    for script, out in (("model.py", "a.npz"), ("converted.py", "b.npz")):
        result = subprocess.run([sys.executable, script, "x.npy", out], cwd=work,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
    original, converted = np.load(work / "a.npz"), np.load(work / "b.npz")
    for key in ("scaled", "net"):
        np.testing.assert_allclose(converted[key], original[key], rtol=1e-5, atol=1e-6)


# What a written module must survive: a `#!` line, a module that binds `_jst` itself,
# `super()` in a converted method, and decorators other than the marking one.
EDGES = textwrap.dedent('''
    #!/usr/bin/env python
    import functools

    import numpy as np

    import dy2stat as d2s
    from dy2stat import nn

    _jst = "the user's own"


    class Base(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x)


    class Child(Base):
        @d2s.jit.to_static
        def forward(self, x):
            y = super().forward(x)
            if y.sum() > 0:
                y = y * 2
            return y

        @staticmethod
        @d2s.declarative
        def twice_if_positive(x):
            return x * 2 if x.mean() > 0 else x


    def logged(f):
        @functools.wraps(f)
        def wrapper(*args):
            return f(*args)
        return wrapper


    @logged
    @d2s.jit.to_static(input_spec=None)
    def shift(x): return x + 1 if x.sum() > 0 else x - 1

    if __name__ == "__main__":
        d2s.seed(0)
        x = d2s.to_tensor(np.linspace(-1, 2, 6, dtype="float32").reshape(2, 3))
        print(Child()(x).numpy().tolist(), Child.twice_if_positive(x).numpy().tolist(),
              shift(x).numpy().tolist(), _jst)
''').lstrip()


def test_transpiled_module_keeps_what_the_module_needs(tmp_path):
    (tmp_path / "edges.py").write_text(EDGES)
    dy2stat("transpile", "edges.py", "-o", "edges_out.py", cwd=tmp_path)
    text = (tmp_path / "edges_out.py").read_text()
    assert text.startswith("#!/usr/bin/env python\n")
    assert "import convert_operators as _jst_0" in text and "@staticmethod" in text
    assert "@logged\ndef shift(x):" in text
    outputs = [subprocess.run([sys.executable, script], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120) for script in ("edges.py", "edges_out.py")]
    assert all(r.returncode == 0 for r in outputs), [r.stderr for r in outputs]
    assert outputs[0].stdout == outputs[1].stdout and "the user's own" in outputs[0].stdout


def test_inspect_formats(work):
    text = dy2stat("inspect", "saved/net", cwd=work).stdout
    assert "feeds:   x: float32[-1, 4]" in text and "while" in text and "cond" in text
    program = json.loads(dy2stat("inspect", "saved/net", "--format", "json", cwd=work).stdout)
    assert program["format"] == "dy2stat.program" and program["feed"] == ["x"]
    assert {op["type"] for block in program["blocks"] for op in block["ops"]} >= {"while", "cond"}
    dot = dy2stat("inspect", "saved/net", "--format", "dot", cwd=work).stdout
    assert dot.startswith("digraph") and "subgraph cluster" in dot


def test_run_matches_the_model_in_process(work):
    result = dy2stat("run", "saved/net", "--input", "x=x.npy", "-o", "out.npy", cwd=work)
    assert "float32[5, 3]" in result.stdout
    spec = importlib.util.spec_from_file_location("cli_test_model", work / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.make()
    net.eval()
    expected = net(d2s.to_tensor(np.load(work / "x.npy"))).numpy()
    np.testing.assert_allclose(np.load(work / "out.npy"), expected, rtol=1e-5, atol=1e-6)


BAD_SYNTAX = "import dy2stat as d2s\n\n@d2s.jit.to_static\ndef f(x:\n    return x\n"
UNMARKED = "def f(x):\n    return x\n"
GENERATOR = "import dy2stat as d2s\n\n@d2s.jit.to_static\ndef f(x):\n    yield x\n"


@pytest.mark.parametrize("args, message", [
    (["transpile", "missing.py"], "missing.py: no such file"),
    (["transpile", "bad_syntax.py"], "bad_syntax.py:4: syntax error"),
    (["transpile", "unmarked.py"], "no function marked with @to_static"),
    (["transpile", "model.py", "--function", "Nope"], "no function, method or Layer class"),
    (["transpile", "generator.py"], "generator.py:5: generator functions"),
    (["export", "missing.py:Net", "--input-spec", "x:float32[-1,4]", "-o", "o"],
     "missing.py: no such file"),
    (["export", "model.py:Nope", "--input-spec", "x:float32[-1,4]", "-o", "o"],
     "no object named 'Nope'"),
    (["export", "model.py:make", "--input-spec", "x:float32(-1,4)", "-o", "o"],
     "expected NAME:DTYPE[DIMS]"),
    (["export", "model.py:make", "--input-spec", "x:float32[a,4]", "-o", "o"], "bad dim 'a'"),
    (["export", "model.py", "--input-spec", "x:float32[-1,4]", "-o", "o"],
     "expected MODEL.py:OBJECT"),
    (["inspect", "saved/missing"], "no saved model at saved/missing: looked for "
                                   "saved/missing.json and saved/missing.safetensors"),
    (["run", "saved/missing", "--input", "x=x.npy"], "no saved model at saved/missing"),
    (["run", "saved/net", "--input", "y=x.npy"], "the program has no input named 'y'"),
    (["run", "saved/net", "--input", "x.npy"], "expected NAME=FILE.npy"),
    (["run", "saved/net", "--input", "x=wrong_shape.npy"], "expected shape [-1, 4]"),
    (["run", "saved/net", "--input", "x=missing.npy"], "missing.npy: no such file"),
])
def test_bad_input_is_one_line(work, args, message):
    (work / "bad_syntax.py").write_text(BAD_SYNTAX)
    (work / "unmarked.py").write_text(UNMARKED)
    (work / "generator.py").write_text(GENERATOR)
    np.save(work / "wrong_shape.npy", np.zeros((2, 5), "float32"))
    result = dy2stat(*args, cwd=work, check=False)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"dy2stat {args[0]}: error: ") and message in lines[0]


def test_inspect_draws_svg_and_png_without_graphviz(work):
    result = dy2stat("inspect", "saved/net", "--svg", "pictures/net.svg", "--png", "net.png",
                     "--format", "dot", cwd=work)
    assert result.stdout.startswith("digraph")
    assert "wrote pictures/net.svg" in result.stderr and "wrote net.png" in result.stderr
    svg = ElementTree.parse(work / "pictures" / "net.svg").getroot()
    kinds = {g.get("class") for g in svg.iter("{http://www.w3.org/2000/svg}g")}
    assert {"group control", "group block", "group layer", "node op"} <= kinds
    assert (work / "net.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_inspect_depth_must_be_a_level(work):
    result = dy2stat("inspect", "saved/net", "--svg", "net.svg", "--depth", "0", cwd=work,
                     check=False)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "--depth: expected a number of levels, 1 or more, got 0" in line
