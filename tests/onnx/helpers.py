"""What the ONNX tests share: checking an exported model, running it in ONNX Runtime,
and exporting a static program traced from eager-style code."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

import dy2stat as d2s
from dy2stat.onnx import exporter
from dy2stat.runtime import prune
from dy2stat.static import framework
from dy2stat.static.builder import captured_tensors


def checked(model) -> onnx.ModelProto:
    """The model (a ModelProto or a file), after the full ONNX check (strict type and
    shape inference of every node, sub-graphs included)."""
    proto = onnx.load(model) if isinstance(model, str) else model
    onnx.checker.check_model(proto, full_check=True)
    return proto


def session(model) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # the test machines have few cores, shared
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def run(model, *inputs) -> list[np.ndarray]:
    """The outputs of an ONNX model on inputs given in the order of its inputs."""
    sess = session(model)
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), inputs)})


def traced(build, feeds: dict):
    """``(program, feed names, fetch names, params)`` of a static program: ``build``
    gets one ``static.data`` variable per item of ``feeds`` (name -> (shape, dtype))
    and returns the variables to fetch; the program is pruned to them."""
    program = d2s.static.Program()
    with framework.program_guard(program, d2s.static.Program()), framework.static_guard(True):
        args = [d2s.static.data(name, list(shape), dtype) for name, (shape, dtype) in
                feeds.items()]
        outs = build(*args)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    fetches = [o.name for o in outs]
    pruned = prune.prune(program, list(feeds), fetches)
    captured = captured_tensors(program)
    params = {v.name: captured[v.name].numpy() for v in pruned.persistables()}
    used = [n for n in feeds if n in pruned.global_block().vars]
    return pruned, used, fetches, params


def export_traced(build, feeds: dict, opset_version=None) -> onnx.ModelProto:
    return exporter.to_onnx(*traced(build, feeds), opset_version)


def assert_close(actual, expected, rtol: float, atol: float) -> None:
    """Same dtype and shape; values within the tolerance (integers and bools exact)."""
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(actual, expected)
