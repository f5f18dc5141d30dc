"""What cannot be exported says so: the op, the line of the user's code that built it,
and what to do; and a bad opset or a missing onnx package is a clear error."""

from __future__ import annotations

import inspect
import sys

import pytest

pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402

import dy2stat as d2s  # noqa: E402
from dy2stat import nn  # noqa: E402
from dy2stat.onnx import ExportError, exporter  # noqa: E402
from dy2stat.onnx.lowering import RULES  # noqa: E402
from dy2stat.static import InputSpec  # noqa: E402
from tests.dy2static.corpus import CASES  # noqa: E402
from tests.onnx.helpers import run, traced  # noqa: E402

X = [InputSpec([-1, 4], "float32", "x")]


class Noisy(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.fc(x) + d2s.rand([4])  # a fresh draw at every call

    def dropped(self, x):
        return self.drop(self.fc(x))


def _line(fn, text: str) -> int:
    """The line of ``fn``'s source (in this file) that holds ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_a_random_op_names_itself_the_line_and_what_to_do(tmp_path):
    with pytest.raises(ExportError) as info:
        d2s.onnx.export(Noisy(), tmp_path / "noisy", input_spec=X)
    error = info.value
    assert error.op_type == "uniform"
    assert (error.filename, error.lineno) == (__file__, _line(Noisy.forward, "d2s.rand"))
    assert error.source == "return self.fc(x) + d2s.rand([4])  # a fresh draw at every call"
    assert str(error).startswith(f"op uniform at {__file__}:{error.lineno} (`return self.fc")
    assert "draws random numbers" in str(error) and "eval mode" in str(error)
    assert not (tmp_path / "noisy.onnx").exists()


def test_dropout_of_a_layer_in_training_mode_says_to_export_in_eval_mode(tmp_path):
    model = Noisy()
    dropped = d2s.jit.to_static(model.dropped, input_spec=X)
    with pytest.raises(ExportError, match="op bernoulli_mask at .*layer.eval"):
        d2s.onnx.export(dropped, tmp_path / "dropped")
    model.eval()  # a method is exported in the mode of its Layer, as jit.save does
    path = d2s.onnx.export(dropped, tmp_path / "dropped")
    assert path.endswith("dropped.onnx")


def test_an_assert_is_refused_at_its_line(tmp_path):
    case = next(c for c in CASES if c.name == "assert_tensor")
    with pytest.raises(ExportError, match="op assert at .*corpus.py:.* no ONNX op can") as info:
        d2s.onnx.export(case.fn, tmp_path / "assert",
                        input_spec=[InputSpec([3], "float32", "x")])
    assert "assert x.sum() > 0" in info.value.source


def test_a_gradient_in_the_exported_function_is_refused(tmp_path):
    def penalty(x):
        x.stop_gradient = False
        y = (x * x).sum()
        (g,) = d2s.grad([y], [x], create_graph=True)
        return g

    with pytest.raises(ExportError, match="is a gradient op: only inference programs"):
        d2s.onnx.export(penalty, tmp_path / "grad", input_spec=X)


def test_pooling_that_needs_known_dims_says_to_give_them(tmp_path):
    pool = nn.MaxPool2D(3, stride=2, ceil_mode=True)
    with pytest.raises(ExportError, match="op max_pool2d .*known when the model is exported"):
        d2s.onnx.export(pool, tmp_path / "pool",
                        input_spec=[InputSpec([-1, 3, -1, -1], "float32", "x")])
    d2s.onnx.export(pool, tmp_path / "pool", input_spec=[InputSpec([-1, 3, 9, 9], "float32")])


def test_a_saved_program_still_names_the_line(tmp_path):
    """A saved program keeps the lines that built its ops: converting it names them too."""
    @d2s.jit.to_static(input_spec=[InputSpec([3], "int64", "x")])
    def flipped_bits(x):
        return x ^ 5

    d2s.jit.save(flipped_bits, str(tmp_path / "bits"))
    with pytest.raises(ExportError, match=r"op bitwise_xor at .*test_errors.py:\d+ "
                                          r"\(`return x \^ 5`\): bitwise ops on integers "
                                          r"need opset_version 18"):
        d2s.onnx.export_saved(tmp_path / "bits")
    path = d2s.onnx.export_saved(tmp_path / "bits", opset_version=18)
    assert run(path, np.array([1, 2, 3]))[0].tolist() == [4, 7, 6]


def test_an_op_of_the_registry_without_a_rule_is_named_with_its_line(monkeypatch):
    """(Every op has a rule or a reason today, test_ops.py: an op added to the registry
    without either still fails naming itself.)"""
    monkeypatch.delitem(RULES, "tanh")

    def squashed(x):
        return d2s.tanh(x) * 2

    with pytest.raises(ExportError) as info:
        exporter.to_onnx(*traced(squashed, {"x": ([3], "float32")}))
    error = info.value
    assert (error.op_type, error.reason) == ("tanh", "has no ONNX mapping")
    assert (error.lineno, error.source) == (_line(squashed, "d2s.tanh"),
                                            "return d2s.tanh(x) * 2")


def test_an_op_without_a_recorded_line_is_named_by_its_place():
    program, feeds, fetches, params = traced(lambda x: x ^ 5, {"x": ([3], "int64")})
    for op in program.all_ops():
        op.origin = ""
    with pytest.raises(ExportError, match=r"op bitwise_xor \(block 0, op 1; the program does "
                                          r"not record the line that built it\)"):
        exporter.to_onnx(program, feeds, fetches, params)


@pytest.mark.parametrize("opset", [16, 10_000, "17", True])
def test_an_opset_out_of_range_is_refused(tmp_path, opset):
    with pytest.raises(ValueError, match="opset_version must be an int from 17 to"):
        d2s.onnx.export(nn.Linear(4, 2), tmp_path / "m", input_spec=X, opset_version=opset)


def test_without_the_onnx_package_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx fails
    with pytest.raises(ImportError, match=r'pip install "dy2stat\[onnx\]"'):
        d2s.onnx.export(nn.Linear(4, 2), tmp_path / "m", input_spec=X)
