"""How a converted call's arguments reach its program: bound to the parameters (keywords in
any order), NumPy arrays fed like tensors, nested structures flattened in one order."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit, nn
from dy2stat.static import InputSpec
from tests.jit.helpers import tensor


def test_numpy_arrays_are_inputs_not_constants():
    @jit.to_static
    def double_positive(a):
        if a.sum() > 0:
            return a * 2
        return a - 1

    rng = np.random.default_rng(0)
    for _ in range(50):
        array = rng.standard_normal(4).astype("float32")
        expected = array * 2 if array.sum() > 0 else array - 1
        np.testing.assert_allclose(double_positive(array).numpy(), expected, rtol=1e-6)
    assert len(double_positive.program_cache) == 1


def test_numpy_arrays_are_checked_against_the_input_spec():
    @jit.to_static(input_spec=[InputSpec([None, 3], "float32")])
    def rows(a):
        return a.sum(axis=1)

    np.testing.assert_allclose(rows(np.ones((5, 3), "float32")).numpy(), np.full(5, 3.0))
    for bad, what in ((np.ones((5, 3), "float64"), "dtype"), (np.ones((5, 3), "complex64"),
                                                              "dtype"),
                      (np.ones((5, 4), "float32"), "shape"), (np.ones(3, "float32"), "rank")):
        with pytest.raises(ValueError, match=f"'a'.*{what}"):
            rows(bad)
    assert len(rows.program_cache) == 1


def test_keyword_arguments_in_any_order_reach_their_parameters():
    @jit.to_static
    def difference(a, b, scale=1.0):
        return (a - b) * scale

    a, b = tensor([3], seed=1), tensor([3], seed=2)
    expected = (a.numpy() - b.numpy()) * 2
    for call in (lambda: difference(a, b, 2.0), lambda: difference(b=b, a=a, scale=2.0),
                 lambda: difference(scale=2.0, b=b, a=a), lambda: difference(a, scale=2.0, b=b)):
        np.testing.assert_allclose(call().numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(difference(b=b, a=a).numpy(), a.numpy() - b.numpy(), rtol=1e-6)
    assert len(difference.program_cache) == 2  # scale 2.0 and the default 1.0


def test_keyword_only_varargs_and_kwargs_parameters():
    @jit.to_static
    def combine(x, *rest, weight, **named):
        total = x * weight
        for r in rest:
            total = total + r
        for key in sorted(named):
            total = total - named[key]
        return total

    x, y, z, u, v = (tensor([2], seed=s) for s in range(5))
    expected = x.numpy() * 3 + y.numpy() + z.numpy() - u.numpy() - v.numpy()
    np.testing.assert_allclose(combine(x, y, z, weight=3.0, u=u, v=v).numpy(), expected,
                               rtol=1e-6)
    np.testing.assert_allclose(combine(x, y, z, v=v, u=u, weight=3.0).numpy(), expected,
                               rtol=1e-6)


def test_dict_and_nested_arguments_feed_the_right_placeholders():
    @jit.to_static
    def weighted(batch):
        return batch["inputs"] * batch["weights"][0] - batch["weights"][1]

    x, w0, w1 = tensor([3], seed=3), tensor([3], seed=4), tensor([3], seed=5)
    expected = x.numpy() * w0.numpy() - w1.numpy()
    for batch in ({"inputs": x, "weights": (w0, w1)}, {"weights": (w0, w1), "inputs": x}):
        np.testing.assert_allclose(weighted(batch).numpy(), expected, rtol=1e-6)
    assert len(weighted.program_cache) == 1


def test_a_layer_forward_with_keyword_tensors():
    class TwoInputs(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, query, key, mask=None):
            out = self.fc(query) - key
            if mask is not None:
                out = out * mask
            return out

    d2s.seed(0)
    net = TwoInputs()
    q, k, m = tensor([2, 3], seed=6), tensor([2, 3], seed=7), tensor([2, 3], seed=8)
    expected = net(q, k, m).numpy()
    no_mask = net(q, k).numpy()
    jit.to_static(net)
    np.testing.assert_allclose(net(key=k, mask=m, query=q).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(net(q, mask=m, key=k).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(net(key=k, query=q).numpy(), no_mask, rtol=1e-6)


def test_nested_input_specs_match_nested_arguments():
    spec = [[InputSpec([None, 2], "float32"), InputSpec([None, 2], "float32")],
            {"scale": InputSpec([1], "float32")}]

    @jit.to_static(input_spec=spec)
    def pair(xs, options):
        return (xs[0] + xs[1]) * options["scale"]

    for rows in (1, 4):
        a, b = tensor([rows, 2], seed=rows), tensor([rows, 2], seed=rows + 1)
        s = d2s.to_tensor(np.array([3.0], "float32"))
        np.testing.assert_allclose(pair([a, b], {"scale": s}).numpy(),
                                   (a.numpy() + b.numpy()) * 3, rtol=1e-6)
    assert len(pair.program_cache) == 1
    with pytest.raises(ValueError, match=r"xs\[1\]"):
        pair([a, tensor([4, 3])], {"scale": s})


def test_get_concrete_program_from_specs_without_running():
    @jit.to_static
    def affine(x, bias):
        return x * 2 + bias

    concrete, runner = affine.get_concrete_program(InputSpec([None, 3], "float32"), 1.0)
    assert [v.shape for v in concrete.inputs] == [[-1, 3]]
    assert len(affine.program_cache) == 1
    x = tensor([5, 3])
    np.testing.assert_allclose(runner([x])[0].numpy(), x.numpy() * 2 + 1, rtol=1e-6)
    assert affine.program_cache.concrete_programs() == [concrete]
    assert affine.program_cache.last()[1][0] is concrete
    np.testing.assert_allclose(affine(x, 1.0).numpy(), x.numpy() * 2 + 1, rtol=1e-6)
    assert len(affine.program_cache) == 2  # a call without a spec: [5, 3] exactly


def test_the_cache_size_limit_falls_back_to_eager_with_a_warning(caplog):
    @jit.to_static
    def scaled(x, k):
        return x * k

    x = tensor([2])
    jit.set_cache_size_limit(3)
    try:
        for k in range(10):
            np.testing.assert_allclose(scaled(x, float(k)).numpy(), x.numpy() * k, rtol=1e-6)
    finally:
        jit.set_cache_size_limit(8)
    assert len(scaled.program_cache) == 3
    warnings = [r.getMessage() for r in caplog.records if "cache size limit" in r.getMessage()]
    assert len(warnings) == 1 and "'k'" in warnings[0]


def test_an_input_spec_applies_to_star_args(tmp_path):
    @jit.to_static(input_spec=[InputSpec([None, 2], "float32"), InputSpec([None, 2], "float32")])
    def add(*xs):
        return xs[0] + xs[1]

    for rows in (1, 3):
        a, b = tensor([rows, 2], seed=rows), tensor([rows, 2], seed=rows + 1)
        np.testing.assert_allclose(add(a, b).numpy(), a.numpy() + b.numpy(), rtol=1e-6)
    assert len(add.program_cache) == 1
    with pytest.raises(ValueError, match=r"xs\[1\]"):
        add(a, tensor([3, 5]))
    path = str(tmp_path / "add")
    jit.save(add, path)
    loaded = jit.load(path)
    a, b = tensor([4, 2], seed=7), tensor([4, 2], seed=8)
    np.testing.assert_allclose(loaded(a, b).numpy(), a.numpy() + b.numpy(), rtol=1e-6)


def test_a_spec_without_a_dtype_takes_the_inputs_dtype_and_one_with_a_dtype_checks_it():
    def cast_only(a):
        return a.astype("float32") * 2

    default = jit.to_static(cast_only, input_spec=[InputSpec([None, 3])])
    ints = np.arange(6, dtype="int64").reshape(2, 3)
    np.testing.assert_array_equal(default(d2s.to_tensor(ints)).numpy(), ints * 2.0)
    np.testing.assert_array_equal(default(d2s.to_tensor(ints * 0.5)).numpy(), ints * 1.0)
    assert InputSpec([None, 3]).dtype == np.float32
    explicit = jit.to_static(cast_only, input_spec=[InputSpec([None, 3], "float32")])
    with pytest.raises(ValueError, match="expected dtype float32, got int64"):
        explicit(d2s.to_tensor(ints))
