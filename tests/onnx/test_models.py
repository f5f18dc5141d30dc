"""The model set and every example's model, exported to ONNX once each (small
configurations) and run in ONNX Runtime on one or more batches: the outputs equal
dy2stat's within the tolerances docs/deploying.md documents (decoded tokens exactly).

(examples/lenet_model.py trains dy2stat.vision.models.LeNet, exported here;
examples/double_grad.py has no converted model: its point is d2s.grad, whose gradient
ops an inference export refuses, test_errors.py.) Then the layers of d2s.nn one by one."""

from __future__ import annotations

import pytest

ort = pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402

import dy2stat as d2s  # noqa: E402
from dy2stat.static import InputSpec  # noqa: E402
from dy2stat.vision import models  # noqa: E402
from tests.models.helpers import example  # noqa: E402
from tests.onnx.helpers import assert_close, checked, session  # noqa: E402

rng = np.random.default_rng(0)


def _images(channels, size, batch=2, seed=0):
    return np.random.default_rng(seed).standard_normal(
        (batch, channels, size, size)).astype("float32")


def _image_model(make, channels=3, size=32):
    def build():
        d2s.seed(0)
        model = make()
        model.eval()  # batch norm: the running statistics, as exported
        return model, [InputSpec([-1, channels, size, size], "float32", "x")]
    return build, [(_images(channels, size),), (_images(channels, size, batch=3, seed=1),)]


def _any_size_image_model(make):
    """Height and width unknown (-1) when exported: one model for every image size."""
    def build():
        d2s.seed(0)
        model = make()
        model.eval()
        return model, [InputSpec([-1, 3, -1, -1], "float32", "x")]
    return build, [(_images(3, 32),), (np.random.default_rng(1).standard_normal(
        (1, 3, 64, 48)).astype("float32"),)]


def _transformer(method):
    T = example("transformer")

    def build():
        d2s.seed(0)
        model = T.converted(T.TransformerModel(**T.CONFIGS["small"]))
        model.eval()
        return (model if method is None else getattr(model, method)), None

    batches = [T.reversal_batch(np.random.default_rng(s), b, n, 16) for s, b, n in
               [(0, 3, 6), (1, 2, 4)]]
    if method is None:
        return build, [(src, trg_in) for src, trg_in, _ in batches]
    return build, [(src,) for src, _, _ in batches]


def _ernie(head):
    E = example("ernie")

    def build():
        d2s.seed(0)
        model = E.converted(getattr(E, head)(E.ErnieModel(**E.CONFIGS["small"])))
        model.eval()
        return model, None

    batches = [E.pair_batch(np.random.default_rng(s), b, n, 40) for s, b, n in
               [(0, 3, 12), (1, 2, 9)]]
    if head == "ErnieForPretraining":
        return build, [(ids, types, positions) for ids, types, positions, _, _ in batches]
    return build, [(ids, types) for ids, types, *_ in batches]


def _seq2seq(method):
    S = example("seq2seq_attention")

    def build():
        d2s.seed(1)  # its greedy decoding breaks after two steps on the first batch
        model = S.converted(S.Seq2SeqAttention(**S.CONFIGS["small"]))
        model.eval()
        return (model if method is None else getattr(model, method)), None

    batches = [S.reversal_batch(np.random.default_rng(s), 4, n, 16) for s, n in
               [(1, 6), (0, 5)]]
    if method is None:
        return build, [(src, length, trg_in) for src, length, trg_in, _, _ in batches]
    return build, [(src, length) for src, length, *_ in batches]


def _bilstm(pooling):
    B = example("bilstm_classifier")

    def build():
        d2s.seed(0)
        model = B.converted(B.BiLSTMClassifier(**B.CONFIGS["small"], pooling_type=pooling))
        model.eval()
        return model, None

    return build, [B.text_batch(np.random.default_rng(s), 3, 12, 30)[:2] for s in (0, 1)]


def _rnn():
    R = example("rnn_dynamic_loop")

    def build():
        d2s.seed(0)
        return d2s.jit.to_static(R.DynamicRNN(), input_spec=[
            InputSpec([-1, R.MAX_LEN, R.FEATURES], "float32", "x"),
            InputSpec([], "int64", "length")]), None

    return build, [batch[:2] for batch in R.batches(3, 2)]


def _mnist():
    M = example("mnist_declarative")

    def build():
        d2s.seed(0)
        return M.MNIST(), [InputSpec([-1, 1, 28, 28], "float32", "x")]

    return build, [(M.synthetic_digits(3)[0],)]


def _mlp():
    H = example("hybrid_mlp")
    return (lambda: (H.get_net(), [InputSpec([-1, 512], "float32", "x")]),
            [(rng.standard_normal((2, 512)).astype("float32"),)])


def _hooked():
    F = example("forward_pre_hook")

    def build():
        d2s.seed(0)
        linear = d2s.nn.Linear(13, 5)
        linear.register_forward_pre_hook(F.forward_pre_hook)
        return F.Model(linear), [InputSpec([-1, 13], "float32", "x")]

    return build, [(rng.standard_normal((2, 13)).astype("float32"),),
                   (-np.abs(rng.standard_normal((3, 13))).astype("float32"),)]


# name -> ((build, input batches), tolerance): every float output within tolerance times
# its largest magnitude (at least 1) of dy2stat's (docs/deploying.md lists the errors).
MODELS = {
    "LeNet": (_image_model(models.LeNet, 1, 28), 1e-5),
    "resnet18": (_image_model(models.resnet18), 1e-5),
    "resnet34": (_image_model(models.resnet34), 1e-5),
    "resnet50": (_image_model(models.resnet50), 1e-5),
    "mobilenet_v2": (_image_model(models.mobilenet_v2), 1e-5),
    "mobilenet_v2 of any size": (_any_size_image_model(models.mobilenet_v2), 1e-5),
    "transformer": (_transformer(None), 1e-5),
    "transformer.greedy_search": (_transformer("greedy_search"), 1e-5),
    "transformer.beam_search": (_transformer("beam_search"), 1e-5),
    "ernie classifier": (_ernie("ErnieForSequenceClassification"), 1e-5),
    "ernie pretraining": (_ernie("ErnieForPretraining"), 1e-5),
    "seq2seq": (_seq2seq(None), 1e-5),
    "seq2seq.greedy_search": (_seq2seq("greedy_search"), 1e-5),
    "bilstm final": (_bilstm(None), 1e-5),
    "bilstm mean": (_bilstm("mean"), 1e-5),
    "bilstm max": (_bilstm("max"), 1e-5),
    "rnn_dynamic_loop": (_rnn(), 1e-5),
    "mnist_declarative": (_mnist(), 1e-5),
    "hybrid_mlp": (_mlp(), 1e-5),
    "forward_pre_hook": (_hooked(), 1e-5),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> (the model or function, its exported file); each exported once."""
    folder = tmp_path_factory.mktemp("onnx_models")
    cache = {}

    def get(name):
        if name not in cache:
            (build, _), _ = MODELS[name]
            model, spec = build()
            path = d2s.onnx.export(model, folder / name.replace(" ", "_"), input_spec=spec)
            cache[name] = model, path
        return cache[name]

    return get


def _outputs(value) -> list:
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v.numpy() for v in values]


@pytest.mark.parametrize("name", list(MODELS))
def test_model_runs_in_onnx_runtime_as_in_dy2stat(exported, name):
    (_, batches), tolerance = MODELS[name]
    model, path = exported(name)
    sess = session(checked(path).SerializeToString())
    for batch in batches:
        with d2s.no_grad():
            expected = _outputs(model(*[d2s.to_tensor(a) for a in batch]))
        actual = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), batch)})
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol=0, atol=tolerance * max(1.0, float(np.abs(e).max(
                initial=0))))


def _op_types(graph) -> set:
    """The op types of a graph and of its sub-graphs (If branches, Loop bodies)."""
    types = set()
    for node in graph.node:
        types.add(node.op_type)
        for attr in node.attribute:
            if attr.HasField("g"):
                types |= _op_types(attr.g)
    return types


@pytest.mark.parametrize("name, ops", [
    ("transformer.greedy_search", {"Loop", "If"}), ("transformer.beam_search", {"Loop", "If"}),
    ("seq2seq.greedy_search", {"Loop", "If"}), ("bilstm final", {"Loop"}),
    ("rnn_dynamic_loop", {"Loop"}), ("forward_pre_hook", {"If"})])
def test_control_flow_stays_control_flow(exported, name, ops):
    _, path = exported(name)
    assert ops <= _op_types(checked(path).graph)


def test_decoding_breaks_or_runs_to_the_bound_as_in_dy2stat(exported):
    """(The outputs' shapes equal dy2stat's: here both ways of ending a loop are seen.)"""
    steps = {}
    for name in ("seq2seq.greedy_search", "transformer.greedy_search"):
        _, path = exported(name)
        sess = session(path)
        batch = MODELS[name][0][1][0]
        tokens = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), batch)})[0]
        steps[name] = (tokens.shape[-1], batch[0].shape[1] + 4)  # (steps, the bound)
    assert steps["seq2seq.greedy_search"][0] < steps["seq2seq.greedy_search"][1]  # break
    assert steps["transformer.greedy_search"][0] == steps["transformer.greedy_search"][1]


def test_a_saved_program_converts_to_the_same_model(exported, tmp_path):
    """jit.save then export_saved (what `dy2stat convert` runs) gives what export gives."""
    model, path = exported("bilstm max")
    d2s.jit.save(model, str(tmp_path / "saved"))
    converted = d2s.onnx.export_saved(tmp_path / "saved")
    assert converted == str(tmp_path / "saved.onnx")
    loaded = d2s.jit.load(str(tmp_path / "saved"))
    batch = MODELS["bilstm max"][0][1][0]
    a = session(path).run(None, dict(zip(loaded.feed_names, batch)))
    sess = session(checked(converted))
    b = sess.run(None, dict(zip(loaded.feed_names, batch)))
    np.testing.assert_array_equal(a[0], b[0])
    # the inputs and outputs are the program's feeds and fetches, by name
    assert [i.name for i in sess.get_inputs()] == loaded.feed_names == ["text", "seq_len"]
    assert [o.name for o in sess.get_outputs()] == loaded.fetch_names


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


# The layers of d2s.nn a model is made of, each exported on its own (in eval mode).
LAYERS = [
    ("Conv2DTranspose", lambda: d2s.nn.Conv2DTranspose(3, 4, 3, stride=2, padding=1,
                                                       output_padding=1), _x(2, 3, 5, 5)),
    ("Conv1D", lambda: d2s.nn.Conv1D(3, 4, 3, padding=1), _x(2, 3, 7)),
    ("AdaptiveAvgPool2D", lambda: d2s.nn.AdaptiveAvgPool2D(3), _x(2, 3, 7, 8)),
    ("AdaptiveMaxPool2D", lambda: d2s.nn.AdaptiveMaxPool2D(2), _x(2, 3, 7, 8)),
    ("AvgPool2D ceil", lambda: d2s.nn.AvgPool2D(3, stride=2, ceil_mode=True), _x(1, 2, 7, 7)),
    ("GroupNorm", lambda: d2s.nn.GroupNorm(2, 4), _x(2, 4, 3, 3)),
    ("InstanceNorm2D", lambda: d2s.nn.InstanceNorm2D(4), _x(2, 4, 3, 3)),
    ("BatchNorm1D", lambda: d2s.nn.BatchNorm1D(4), _x(3, 4)),
    ("GRU bidirect, 2 layers", lambda: d2s.nn.GRU(4, 5, num_layers=2, direction="bidirect"),
     _x(2, 6, 4)),
    ("SimpleRNN", lambda: d2s.nn.SimpleRNN(4, 5), _x(2, 6, 4)),
    ("TransformerEncoder", lambda: d2s.nn.TransformerEncoder(
        d2s.nn.TransformerEncoderLayer(8, 2, 16), 2), _x(2, 5, 8)),
    ("Upsample bilinear", lambda: d2s.nn.Upsample(scale_factor=2, mode="bilinear"),
     _x(1, 2, 3, 4)),
    *[(name, getattr(d2s.nn, name), _x(3, 4)) for name in (
        "PReLU", "LeakyReLU", "ELU", "SiLU", "Mish", "Hardswish", "Softplus", "GELU",
        "Softmax", "Sigmoid", "Tanh")],
]


@pytest.mark.parametrize("name, make, x", LAYERS, ids=[n for n, _, _ in LAYERS])
def test_layer_runs_in_onnx_runtime_as_in_dy2stat(tmp_path, name, make, x):
    d2s.seed(0)
    layer = make()
    layer.eval()
    path = d2s.onnx.export(layer, tmp_path / "layer",
                           input_spec=[InputSpec(list(x.shape), "float32", "x")])
    with d2s.no_grad():
        expected = _outputs(layer(d2s.to_tensor(x)))
    actual = session(checked(path)).run(None, {"x": x})
    for a, e in zip(actual, expected):
        assert_close(a, e, rtol=0, atol=1e-5 * max(1.0, float(np.abs(e).max())))
