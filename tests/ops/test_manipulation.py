"""Manipulation and creation ops beyond the case table: gradients through
variadic slots, double gradients of these linear ops, the index encoding,
indexing through ``apply`` and the random generators."""

import json

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.dispatch import apply
from dy2stat.kernels import random as random_kernels
from dy2stat.runtime.ops.indexing import decode_index, encode_index

rng = np.random.default_rng(5)


def _randn(*shape):
    return rng.standard_normal(shape)


def _tensor(a):
    return d2s.Tensor(np.array(a), stop_gradient=False)


def _weighted_square(out, seed=3):
    """sum(w * out**2) over every float output: nonlinear, so second derivatives exist."""
    total = None
    w_rng = np.random.default_rng(seed)
    for o in out if isinstance(out, list) else [out]:
        w = d2s.Tensor(w_rng.standard_normal(o.shape))
        term = apply("sum", apply("multiply", w, apply("multiply", o, o)))
        total = term if total is None else apply("add", total, term)
    return total


def _numeric(f, arrays, eps=1e-6):
    grads = []
    for x in arrays:
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            saved = x[i]
            x[i] = saved + eps
            plus = f()
            x[i] = saved - eps
            minus = f()
            x[i] = saved
            g[i] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


def check_grads(fn, arrays):
    """First and second derivatives of sum(w * fn(xs)**2) against finite differences."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    directions = [np.random.default_rng(9).standard_normal(a.shape) for a in arrays]

    def loss(ts):
        return _weighted_square(fn(ts))

    def first(ts, create_graph):
        grads = d2s.grad([loss(ts)], ts, create_graph=create_graph, allow_unused=True)
        total = None
        for g, v in zip(grads, directions):
            term = apply("sum", apply("multiply", g, d2s.Tensor(v)))
            total = term if total is None else apply("add", total, term)
        return grads, total

    ts = [_tensor(a) for a in arrays]
    grads, directional = first(ts, create_graph=True)

    def value():
        with d2s.no_grad():
            return float(loss([d2s.Tensor(a) for a in arrays]).numpy())

    for g, want in zip(grads, _numeric(value, arrays)):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-4, atol=1e-6)

    second = d2s.grad([directional], ts, allow_unused=True)

    def directional_value():
        return float(first([_tensor(a) for a in arrays], create_graph=False)[1].numpy())

    for g, want in zip(second, _numeric(directional_value, arrays)):
        got = np.zeros_like(want) if g is None else g.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _index(x, index):
    encoded, tensors = encode_index(index)
    return apply("getitem", x, [d2s.Tensor(np.asarray(t)) for t in tensors], index=encoded)


def _setitem(x, index, value):
    encoded, tensors = encode_index(index)
    tensors = [d2s.Tensor(np.asarray(t)) for t in tensors]
    return apply("setitem", x, value, tensors, index=encoded)


GRAD_CHECKS = {
    "reshape": ([_randn(2, 3, 2)], lambda t: apply("reshape", t[0], shape=[0, -1, 3])),
    "reshape_like": ([_randn(6)],
                     lambda t: apply("reshape_like", t[0], d2s.Tensor(np.zeros((2, 3))))),
    "transpose": ([_randn(2, 3, 4)], lambda t: apply("transpose", t[0], perm=[1, 2, 0])),
    "swapaxes_last": ([_randn(2, 3)], lambda t: apply("swapaxes_last", t[0])),
    "concat": ([_randn(2, 3), _randn(1, 3)], lambda t: apply("concat", t, axis=0)),
    "concat-mixed": ([_randn(2, 3), _randn(2, 2)],
                     lambda t: apply("concat", [t[0], t[1], t[0]], axis=-1)),
    "split_like": ([_randn(5, 2)],
                   lambda t: apply("split_like", t[0], [d2s.Tensor(np.zeros((2, 1))),
                                                        d2s.Tensor(np.zeros((3, 9)))])),
    "stack": ([_randn(2, 3), _randn(2, 3)], lambda t: apply("stack", t, axis=-1)),
    "unstack": ([_randn(3, 2)], lambda t: apply("unstack", t[0], axis=0)),
    "split": ([_randn(2, 6)], lambda t: apply("split", t[0], num_or_sections=[1, -1], axis=1)),
    "split-unused": ([_randn(6)], lambda t: apply("split", t[0], num_or_sections=3)[1]),
    "squeeze": ([_randn(1, 3, 1)], lambda t: apply("squeeze", t[0], axis=-1)),
    "unsqueeze": ([_randn(3)], lambda t: apply("unsqueeze", t[0], axis=[0, 2])),
    "flatten": ([_randn(2, 3, 2)], lambda t: apply("flatten", t[0], start_axis=1)),
    "getitem-basic": ([_randn(3, 4)], lambda t: _index(t[0], (slice(None, None, -2), None, 1))),
    "getitem-repeated": ([_randn(3, 4)], lambda t: _index(t[0], (np.array([0, 2, 0]), ...))),
    "getitem-mask": ([_randn(3, 4)], lambda t: _index(t[0], np.arange(12).reshape(3, 4) % 3 == 0)),
    "getitem_grad": ([_randn(2, 4)],
                     lambda t: apply("getitem_grad", t[0], d2s.Tensor(np.zeros((3, 4))),
                                     [d2s.Tensor(np.array([1, 1]))],
                                     index=encode_index(np.array([0]))[0])),
    "setitem": ([_randn(3, 4), _randn(4)], lambda t: _setitem(t[0], (slice(1, None),), t[1])),
    "setitem-leading-1": ([_randn(3, 4), _randn(1, 1, 2)],
                          lambda t: _setitem(t[0], (0, slice(None, 2)), t[1])),
    "setitem-tensor": ([_randn(3, 4), _randn(2, 1)],
                       lambda t: _setitem(t[0], (np.array([2, 0]),), t[1])),
    "gather": ([_randn(4, 3)],
               lambda t: apply("gather", t[0], d2s.Tensor(np.array([3, 3, 0])), axis=0)),
    "gather_grad": ([_randn(2, 2)],
                    lambda t: apply("gather_grad", t[0], d2s.Tensor(np.zeros((2, 3))),
                                    d2s.Tensor(np.array([2, 2])), axis=1)),
    "where": ([_randn(2, 3), _randn(3)],
              lambda t: apply("where", d2s.Tensor(np.array([True, False, True])), t[0], t[1])),
    "where-scalar": ([_randn(2, 3)],
                     lambda t: apply("where", d2s.Tensor(np.array([True, False, True])), t[0],
                                     0.0)),
    "expand": ([_randn(3, 1)], lambda t: apply("expand", t[0], shape=[2, -1, 2])),
    "tile": ([_randn(2, 3)], lambda t: apply("tile", t[0], repeat_times=[2, 1, 2])),
    "tile_grad": ([_randn(2, 4)],
                  lambda t: apply("tile_grad", t[0], d2s.Tensor(np.zeros((2, 2))),
                                  repeat_times=[1, 2])),
    "flip": ([_randn(2, 3)], lambda t: apply("flip", t[0], axis=[1])),
    "assign": ([_randn(2, 3)], lambda t: apply("assign", t[0])),
}


@pytest.mark.parametrize("name", list(GRAD_CHECKS))
def test_first_and_second_derivatives(name):
    arrays, fn = GRAD_CHECKS[name]
    check_grads(fn, arrays)


# ------------------------------------------------------------------ encoding

INDICES = [
    2,
    -1,
    slice(None),
    slice(1, None, 2),
    slice(None, None, -1),
    (Ellipsis, None),
    (None, 0, Ellipsis, slice(2, 0, -1)),
    [0, 2, 2],
    [True, False, True],
    np.int64(1),
    (np.array([1, 0]), slice(None), np.array([[0], [3]])),
    np.arange(24).reshape(3, 2, 4) % 2 == 0,
    (slice(np.array(1), None), np.array(0)),
    (True, 1),
]


@pytest.mark.parametrize("index", INDICES, ids=[str(i) for i in range(len(INDICES))])
def test_encode_decode_round_trip(index):
    x = np.arange(24.0).reshape(3, 2, 4)
    encoded, tensors = encode_index(index)
    assert json.loads(json.dumps(encoded)) == encoded
    assert all(isinstance(t, np.ndarray) for t in tensors)
    np.testing.assert_array_equal(x[decode_index(encoded, tensors)], x[index])
    out = _index(d2s.Tensor(x), index)
    np.testing.assert_array_equal(out.numpy(), x[index])
    assert out.shape == list(np.shape(x[index]))


def test_encoding_format():
    t = np.array([1, 2])
    encoded, tensors = encode_index((1, slice(None, t, -1), None, Ellipsis, t, [0, 1], False))
    assert encoded == [
        1,
        ["slice", None, ["tensor", 0], -1],
        ["none"],
        ["ellipsis"],
        ["tensor", 1],
        ["list", [0, 1]],
        ["bool", False],
    ]
    assert tensors[0] is t and tensors[1] is t


def test_list_index_rejects_tensors():
    with pytest.raises(TypeError, match="getitem"):
        encode_index([np.array(1), 2])


def test_setitem_is_functional_and_casts():
    x = np.arange(6).reshape(2, 3)
    out = _setitem(d2s.Tensor(x), (slice(None), 1), 2.7)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out.numpy(), [[0, 2, 2], [3, 2, 5]])
    np.testing.assert_array_equal(x, np.arange(6).reshape(2, 3))


def test_index_out_of_range_is_an_index_error():
    with pytest.raises(IndexError, match="getitem"):
        _index(d2s.Tensor(np.zeros((2, 3))), (0, 5))


def test_getitem_grad_accumulates_repeated_indices():
    x = _tensor(np.zeros(4))
    y = _index(x, np.array([1, 1, 3]))
    (g,) = d2s.grad([apply("sum", y)], [x])
    np.testing.assert_array_equal(g.numpy(), [0, 2, 0, 1])


def test_concat_error_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"concat: .*\[2, 3\].*\[2, 4\]"):
        apply("concat", [d2s.Tensor(np.zeros((2, 3))), d2s.Tensor(np.zeros((2, 4)))])


# -------------------------------------------------------------------- random


def test_global_seed_repeats_draws():
    d2s_seed = random_kernels.seed
    d2s_seed(11)
    a = apply("normal", shape=[5]).numpy()
    b = apply("uniform", shape=[5]).numpy()
    d2s_seed(11)
    np.testing.assert_array_equal(apply("normal", shape=[5]).numpy(), a)
    np.testing.assert_array_equal(apply("uniform", shape=[5]).numpy(), b)
    assert not np.array_equal(apply("normal", shape=[5]).numpy(), a)


def test_seed_attr_makes_a_draw_deterministic():
    first = apply("randint", shape=[20], high=100, seed=4).numpy()
    np.testing.assert_array_equal(apply("randint", shape=[20], high=100, seed=4).numpy(), first)
    x = d2s.Tensor(np.zeros((50,), np.float32))
    mask = apply("bernoulli_mask", x, p=0.5, seed=3).numpy()
    np.testing.assert_array_equal(apply("bernoulli_mask", x, p=0.5, seed=3).numpy(), mask)


def test_creation_shape_must_be_known():
    with pytest.raises(ValueError, match=r"full: shape \[-1, 3\]"):
        apply("full", shape=[-1, 3])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int8", "bool"])
@pytest.mark.parametrize("shapes", [
    ((64, 100), (64, 100), ()),            # ReLU gradient: where(mask, g, 0)
    ((100,), (64, 100), (64, 1)),          # every operand broadcasts
    ((5000,), (5000,), (3, 5000)),         # y is bigger than cond and x
])
def test_large_where_matches_numpy_bit_for_bit(dtype, shapes):
    """Large operands take a branch-free path on NumPy; it must equal np.where exactly."""
    (c_shape, x_shape, y_shape) = shapes
    cond = rng.random(c_shape) > 0.5
    x = (rng.standard_normal(x_shape) * 10).astype(dtype)
    y = np.asarray(rng.standard_normal(y_shape) * 10).astype(dtype)
    got = d2s.where(d2s.to_tensor(cond), d2s.to_tensor(x), d2s.to_tensor(y)).numpy()
    want = np.where(cond, x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_large_where_keeps_nan_inf_and_negative_zero():
    x = np.array([np.nan, -0.0, np.inf, -np.inf] * 2000, dtype="float32")
    cond = np.arange(x.size) % 3 == 0
    got = d2s.where(d2s.to_tensor(cond), d2s.to_tensor(x), d2s.to_tensor(-x)).numpy()
    assert got.tobytes() == np.where(cond, x, -x).tobytes()


@pytest.mark.parametrize("zero", [0.0, -0.0])
def test_large_where_against_a_zero_keeps_every_value(zero):
    """where(mask, g, 0), a ReLU or max-pool gradient, multiplies the bits by the
    mask; -0.0 is not 0 there and must come out as -0.0."""
    x = np.array([np.nan, -0.0, np.inf, -np.inf, 1.5, -2.5] * 2000, dtype="float32")
    cond = np.arange(x.size) % 4 == 0
    y = np.array(zero, dtype="float32")
    got = d2s.where(d2s.to_tensor(cond), d2s.to_tensor(x), d2s.to_tensor(y)).numpy()
    assert got.tobytes() == np.where(cond, x, y).tobytes()
