"""vision.transforms on arrays and Tensors."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat.vision import transforms as T

IMAGE = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10  # HWC


def test_to_tensor_hwc_uint8_to_chw_float():
    out = T.ToTensor()(IMAGE)
    assert isinstance(out, d2s.Tensor) and out.shape == [3, 2, 3] and out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), IMAGE.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    gray = T.ToTensor()(IMAGE[..., 0])
    assert gray.shape == [1, 2, 3]
    assert T.ToTensor(data_format="HWC")(IMAGE).shape == [2, 3, 3]
    floats = T.ToTensor()(np.full((2, 2), 3.0))
    np.testing.assert_array_equal(floats.numpy(), np.full((1, 2, 2), 3.0))


def test_normalize_chw_and_hwc():
    chw = IMAGE.transpose(2, 0, 1).astype(np.float32)
    mean, std = [1.0, 2.0, 3.0], [2.0, 4.0, 8.0]
    out = T.Normalize(mean, std)(chw)
    want = (chw - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    np.testing.assert_allclose(out, want, rtol=1e-6)
    hwc = T.Normalize(mean, std, data_format="HWC")(IMAGE)
    np.testing.assert_allclose(hwc, (IMAGE - np.array(mean)) / np.array(std), rtol=1e-6)
    as_tensor = T.Normalize(mean, std)(d2s.to_tensor(chw))
    assert isinstance(as_tensor, d2s.Tensor)
    np.testing.assert_allclose(as_tensor.numpy(), want, rtol=1e-6)


def test_normalize_gray_image_gains_a_channel():
    out = T.Normalize(mean=127.5, std=127.5)(np.full((4, 4), 255, np.uint8))
    assert out.shape == (1, 4, 4) and np.allclose(out, 1.0)


def test_transpose():
    assert T.Transpose()(IMAGE).shape == (3, 2, 3)
    assert T.Transpose((1, 0, 2))(IMAGE).shape == (3, 2, 3)
    assert T.Transpose()(IMAGE[..., 0]).shape == (1, 2, 3)
    with pytest.raises(ValueError, match="permutation"):
        T.Transpose((0, 1))


def test_compose_and_custom_transform():
    class AddOne(T.BaseTransform):
        def _apply_image(self, image):
            return image + 1

    pipeline = T.Compose([AddOne(), T.Transpose(), T.Normalize(0.0, 2.0)])
    out = pipeline(IMAGE.astype(np.float32))
    np.testing.assert_allclose(out, (IMAGE.transpose(2, 0, 1) + 1) / 2.0)
    image, label = AddOne()((np.zeros(2), 7))  # a tuple: only the image key is transformed
    assert image.tolist() == [1.0, 1.0] and label == 7


def test_resize():
    image = np.arange(16, dtype=np.float32).reshape(4, 4)
    same = T.Resize((4, 4))(image)
    np.testing.assert_allclose(same, image)
    half = T.Resize((2, 2))(image)
    np.testing.assert_allclose(half, [[2.5, 4.5], [10.5, 12.5]])
    assert T.Resize(8)(np.zeros((4, 6, 3), np.uint8)).shape == (8, 12, 3)
    nearest = T.Resize((2, 2), interpolation="nearest")(image)
    np.testing.assert_array_equal(nearest, [[0, 2], [8, 10]])
    with pytest.raises(ValueError, match="size"):
        T.Resize(0)


def test_bad_inputs():
    with pytest.raises(TypeError, match="NumPy array or Tensor"):
        T.ToTensor()("not an image")
    with pytest.raises(ValueError, match="HW or HWC"):
        T.ToTensor()(np.zeros((1, 2, 3, 4)))
    with pytest.raises(ValueError, match="std"):
        T.Normalize(0.0, 0.0)
