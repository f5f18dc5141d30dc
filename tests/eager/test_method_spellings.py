"""PyTorch spellings of tensor methods (softmax, clamp, float, new_zeros, in-place forms)
compute what NumPy does, eagerly and in converted code alike."""

import numpy as np
import pytest

import dy2stat as d2s

X = np.array([[1.0, -2.0, 0.5], [3.0, 4.0, -0.25]], np.float32)


def _softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


CASES = {
    "softmax": (lambda x: x.softmax(dim=-1), lambda a: _softmax(a, -1)),
    "log_softmax": (lambda x: x.log_softmax(0), lambda a: np.log(_softmax(a, 0))),
    "clamp": (lambda x: x.clamp(-1, 2), lambda a: np.clip(a, -1, 2)),
    "mul_sub_div": (lambda x: x.mul(2).sub(1).div(4), lambda a: (a * 2 - 1) / 4),
    "ne": (lambda x: x.ne(x * 0 + 3), lambda a: a != 3),
    "reciprocal": (lambda x: x.reciprocal(), lambda a: 1 / a),
    "casts": (lambda x: x.long().float() + x.double().half().float(),
              lambda a: (a.astype("int64").astype("float32")
                         + a.astype("float16").astype("float32"))),
    "type_as": (lambda x: x.type_as(x.long()), lambda a: a.astype("int64")),
    "where": (lambda x: x.where(x > 0, x * 10), lambda a: np.where(a > 0, a, a * 10)),
    "amax_amin": (lambda x: x.amax(axis=1) - x.amin(axis=0).sum(),
                  lambda a: a.max(axis=1) - a.min(axis=0).sum()),
    "swapaxes": (lambda x: x.swapaxes(0, 1), lambda a: a.swapaxes(0, 1)),
    "dot": (lambda x: x[0].dot(x[1]), lambda a: np.dot(a[0], a[1])),
    "new_tensors": (lambda x: x.new_zeros(2, 3) + x.new_ones([2, 3]) + x.contiguous(),
                    lambda a: 1 + a),
    "in_place": (lambda x: x.clone().add_(1).clamp_(0, 2).mul_(3),
                 lambda a: np.clip(a + 1, 0, 2) * 3),
    "fill_zero": (lambda x: x.clone().fill_(2.0) + x.clone().zero_(), lambda a: np.full_like(a, 2)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_spelling_matches_numpy_eager_and_converted(name):
    method, truth = CASES[name]
    expected = truth(X)
    eager = method(d2s.to_tensor(X))
    converted = d2s.jit.to_static(method)(d2s.to_tensor(X))
    for out in (eager, converted):
        assert out.dtype == expected.dtype
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_an_in_place_method_inside_a_tensor_branch_changes_the_tensor_on_that_path():
    def zero_if_positive(x):
        y = x.clone()
        if x.mean() > 0:
            y.zero_()
        else:
            y.add_(1)
        return y

    for data in (X, -X):
        expected = zero_if_positive(d2s.to_tensor(data)).numpy()
        np.testing.assert_array_equal(
            d2s.jit.to_static(zero_if_positive)(d2s.to_tensor(data)).numpy(), expected)
    np.testing.assert_array_equal(expected, -X + 1)
