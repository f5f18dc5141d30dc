"""Control flow in ONNX: every function of the shared corpus (tests/dy2static/corpus.py)
traced, exported and run in ONNX Runtime on each of its input sets, equal to the original
run eagerly; and converted Layers whose ``cond``/``while`` nest, ``break``, return early,
carry values whose dims change, and loop a number of times a tensor gives."""

from __future__ import annotations

import dataclasses

import pytest

ort = pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402

import dy2stat as d2s  # noqa: E402
from dy2stat import nn  # noqa: E402
from dy2stat.onnx import exporter  # noqa: E402
from dy2stat.runtime import prune  # noqa: E402
from dy2stat.static import InputSpec, nest  # noqa: E402
from dy2stat.static.builder import captured_tensors  # noqa: E402
from dy2stat.static.variable import Variable  # noqa: E402
from tests.dy2static.corpus import CASES  # noqa: E402
from tests.dy2static.test_corpus import as_numpy, eager, signature_groups, trace  # noqa: E402
from tests.onnx.helpers import checked, run, session  # noqa: E402

# print() of a static tensor warns while tracing (the ONNX model leaves print out)
pytestmark = pytest.mark.filterwarnings("ignore:print\\(\\) of a static tensor")

STATIC = [c for c in CASES if c.static]


def _leaves(value):
    return nest.flatten(value) if isinstance(value, (list, tuple, dict)) else [value]


@pytest.mark.parametrize("dims", ["as-given", "unknown"])
@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.name)
def test_corpus_function_runs_in_onnx_runtime_as_eagerly(case, dims):
    """Traced with the case's shapes, and with every dim of every input -1 (the shapes
    are read when the model runs: Shape ops, in Loop bodies and If branches too)."""
    for group in signature_groups(case):
        if dims == "unknown":
            case = dataclasses.replace(case, shapes=[
                [-1] * a.ndim for a in group[0] if isinstance(a, np.ndarray)])
        program, outputs = trace(case, group[0])
        leaves = _leaves(outputs)
        fetch = [v.name for v in leaves if isinstance(v, Variable)]
        if not fetch:  # the function returns Python values only
            continue
        feeds = [f"arg{i}" for i, a in enumerate(group[0]) if isinstance(a, np.ndarray)]
        pruned = prune.prune(program, feeds, fetch)
        feeds = [f for f in feeds if f in pruned.global_block().vars]
        captured = captured_tensors(program)
        params = {v.name: captured[v.name].numpy() for v in pruned.persistables()}
        model = checked(exporter.to_onnx(pruned, feeds, fetch, params))
        sess = session(model)
        for args in group:
            got = sess.run(None, {f"arg{i}": a for i, a in enumerate(args) if f"arg{i}" in feeds})
            expected = [e for e, v in zip(_leaves(as_numpy(case.fn(*eager(args)))), leaves)
                        if isinstance(v, Variable)]
            for actual, want in zip(got, expected):
                np.testing.assert_allclose(np.asarray(actual, np.float64),
                                           np.asarray(want, np.float64), rtol=1e-5, atol=1e-6)


def test_the_corpus_exports_nested_if_and_loop():
    kinds = set()
    for case in STATIC:
        program, _ = trace(case, case.inputs[0])
        kinds |= {op.type for op in program.all_ops()}
    assert {"cond", "while"} <= kinds


class Decoder(nn.Layer):
    """A loop bounded by a tensor, whose carried tokens grow a dim per step, that breaks
    when every row is done, with a branch inside and early returns after it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @d2s.jit.to_static(input_spec=[InputSpec([-1, 4], "float32", "x"),
                                   InputSpec([], "int64", "steps")])
    def forward(self, x, steps):
        tokens = d2s.zeros([x.shape[0], 0], "int64")
        done = d2s.zeros([x.shape[0]], "bool")
        i = d2s.zeros([], "int64")
        while i < steps:
            x = d2s.tanh(self.fc(x))
            if x.mean() > 0:
                x = x * 0.5
            else:
                x = x + 0.25
            token = x.argmax(-1)
            tokens = d2s.concat([tokens, token.unsqueeze(1)], axis=1)
            done = done | (token == 3)
            i = i + 1
            if done.all():
                break
        if tokens.shape[1] == 0:
            return x, tokens
        return x * 2, tokens


def _decoder_inputs(seed):
    return np.random.default_rng(seed).standard_normal((3, 4)).astype("float32")


def test_a_nested_loop_with_break_and_early_return_in_a_layer(tmp_path):
    d2s.seed(3)
    model = Decoder()
    path = d2s.onnx.export(model, tmp_path / "decoder")
    proto = checked(path)
    ops = {n.op_type for n in proto.graph.node}
    assert {"Loop", "If"} <= ops
    lengths = set()
    for seed, steps in [(0, 0), (1, 1), (2, 6), (3, 40)]:
        x = _decoder_inputs(seed)
        want = [t.numpy() for t in model(d2s.to_tensor(x), d2s.to_tensor(np.int64(steps)))]
        got = run(path, x, np.array(steps, np.int64))
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[1], want[1])
        lengths.add(got[1].shape[1])
    assert len(lengths) >= 3  # zero steps, a few, and a break before the bound


def test_a_for_loop_over_a_tensor_range_with_unknown_batch(tmp_path):
    @d2s.jit.to_static
    def running_max(x, n):
        best = x[:, 0]
        for j in range(1, n):
            best = d2s.maximum(best, x[:, j])
        return best

    spec = [InputSpec([-1, -1], "float32", "x"), InputSpec([], "int64", "n")]
    path = d2s.onnx.export(running_max, tmp_path / "running_max", input_spec=spec)
    for shape, n in [((2, 5), 5), ((4, 3), 2), ((1, 6), 1)]:
        x = np.random.default_rng(n).standard_normal(shape).astype("float32")
        got = run(checked(path), x, np.array(n, np.int64))[0]
        np.testing.assert_array_equal(got, x[:, :n].max(axis=1))


def test_a_static_program_built_by_hand_converts_once_saved(tmp_path):
    """static.nn.cond and static.nn.while_loop, saved with save_inference_model (the
    Paddle 1.x way), converted by export_saved as a jit.save'd program is."""
    d2s.seed(0)
    d2s.enable_static()
    try:
        main, startup = d2s.static.Program(), d2s.static.Program()
        with d2s.static.program_guard(main, startup):
            x = d2s.static.data("x", [None, 4], "float32")
            n = d2s.static.data("n", [], "int64")
            h = d2s.static.nn.fc(x, 4)
            h = d2s.static.nn.cond(h.sum() > 0, lambda: h * 2, lambda: h - 1)
            i = d2s.zeros([], "int64")
            i, h = d2s.static.nn.while_loop(lambda i, h: i < n,
                                            lambda i, h: [i + 1, d2s.tanh(h) + 0.5], [i, h])
        exe = d2s.static.Executor()
        exe.run(startup)
        d2s.static.save_inference_model(str(tmp_path / "hand"), [x, n], [h], exe)
        cases = [(np.random.default_rng(s).standard_normal((b, 4)).astype("float32"),
                  np.array(k, np.int64)) for s, b, k in [(0, 2, 0), (1, 3, 4)]]
        wanted = [exe.run(main, feed={"x": a, "n": k}, fetch_list=[h])[0] for a, k in cases]
    finally:
        d2s.disable_static()
    model = checked(d2s.onnx.export_saved(tmp_path / "hand"))
    assert {"If", "Loop"} <= {node.op_type for node in model.graph.node}
    sess = session(model)
    for (a, k), want in zip(cases, wanted):
        np.testing.assert_allclose(sess.run(None, {"x": a, "n": k})[0], want, rtol=1e-5,
                                   atol=1e-6)
