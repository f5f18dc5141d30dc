"""cosine_similarity and label_smooth against NumPy, gradients against finite
differences, converted code against eager."""

import numpy as np
import pytest

from dy2stat.nn import functional as F
from dy2stat.static import InputSpec
from tests.nn.helpers import check_converted, check_input_grads, randn, tensor


def cosine_ref(a, b, axis=1, eps=1e-8):
    dot = (a * b).sum(axis)
    return dot / np.sqrt(np.maximum((a * a).sum(axis) * (b * b).sum(axis), eps * eps))


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_cosine_similarity(axis):
    a, b = randn(3, 4, 2), randn(3, 4, 2)
    np.testing.assert_allclose(F.cosine_similarity(tensor(a), tensor(b), axis=axis).numpy(),
                               cosine_ref(a, b, axis), rtol=1e-12)
    check_input_grads(lambda x, y: F.cosine_similarity(x, y, axis=axis), a, b)


def test_cosine_similarity_of_a_zero_vector_is_zero_not_nan():
    a = np.zeros((2, 3))
    out = F.cosine_similarity(tensor(a), tensor(randn(2, 3)))
    np.testing.assert_array_equal(out.numpy(), [0.0, 0.0])
    check_converted(lambda x, y: F.cosine_similarity(x, y), randn(2, 3), randn(2, 3),
                    input_spec=[InputSpec([None, 3], "float64"),
                                InputSpec([None, 3], "float64")])


def test_label_smooth():
    one_hot = np.eye(4)[[0, 3, 1]]
    np.testing.assert_allclose(F.label_smooth(tensor(one_hot)).numpy(),
                               0.9 * one_hot + 0.1 / 4, rtol=1e-12)
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(F.label_smooth(tensor(one_hot), tensor(prior), 0.2).numpy(),
                               0.8 * one_hot + 0.2 * prior, rtol=1e-12)
    check_input_grads(lambda x: F.label_smooth(x, epsilon=0.3), one_hot)
    check_converted(lambda x: F.label_smooth(x), one_hot,
                    input_spec=[InputSpec([None, 4], "float64")])
    with pytest.raises(ValueError, match="epsilon"):
        F.label_smooth(tensor(one_hot), epsilon=1.5)
