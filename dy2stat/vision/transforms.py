"""Image transforms over NumPy arrays (HWC or HW) and Tensors (Paddle's ``vision.transforms``).

A transform is called on one image, or on a tuple whose items are named by
``keys`` (``"image"`` by default); ``_apply_<key>`` transforms the item of
that key, and items with no such method pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dy2stat import device
from dy2stat.tensor import Tensor

__all__ = ["BaseTransform", "Compose", "Normalize", "Resize", "ToTensor", "Transpose"]


class BaseTransform:
    """Subclass and define ``_apply_image(image)`` (and ``_get_params`` for random ones)."""

    def __init__(self, keys: Sequence[str] | None = None):
        if keys is None:
            keys = ("image",)
        elif isinstance(keys, str) or not isinstance(keys, Sequence):
            raise ValueError(f"{type(self).__name__}: keys must be a sequence of names, "
                             f"got {keys!r}")
        self.keys = tuple(keys)
        self.params = None

    def _get_params(self, inputs):
        """Random choices shared by all items of one call (e.g. a crop box)."""
        return None

    def __call__(self, inputs):
        single = not isinstance(inputs, tuple)
        items = (inputs,) if single else inputs
        self.params = self._get_params(items)
        outputs = []
        for i, item in enumerate(items):
            apply = getattr(self, f"_apply_{self.keys[i]}", None) if i < len(self.keys) else None
            outputs.append(item if apply is None else apply(item))
        return outputs[0] if single else tuple(outputs)

    def _apply_image(self, image):
        raise NotImplementedError(f"{type(self).__name__} must define _apply_image")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Compose:
    """Apply ``transforms`` one after another."""

    def __init__(self, transforms: Sequence[Callable]):
        for t in transforms:
            if not callable(t):
                raise TypeError(f"Compose: {t!r} is not callable")
        self.transforms = list(transforms)

    def __call__(self, data):
        for t in self.transforms:
            data = t(data)
        return data

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"Compose([{inner}\n])"


def _host(image) -> tuple[np.ndarray, bool]:
    """The image as a NumPy array, and whether it came as a Tensor."""
    if isinstance(image, Tensor):
        return image.numpy(), True
    if isinstance(image, np.ndarray):
        return image, False
    if hasattr(image, "__array_interface__") or hasattr(image, "__array__"):  # PIL images
        return np.asarray(image), False
    raise TypeError(f"transforms: expected a NumPy array or Tensor image, "
                    f"got {type(image).__name__}")


def _tensor(array: np.ndarray) -> Tensor:
    # Built directly so transforms also work while static mode is on.
    return Tensor(device.current.xp.asarray(np.ascontiguousarray(array)))


def _hwc(array: np.ndarray, where: str) -> np.ndarray:
    if array.ndim == 2:
        return array[:, :, None]
    if array.ndim != 3:
        raise ValueError(f"{where}: expected an HW or HWC image, got shape {list(array.shape)}")
    return array


class ToTensor(BaseTransform):
    """HWC (or HW) image → float32 Tensor in CHW (or HWC) layout; uint8 values are scaled
    from [0, 255] to [0, 1]."""

    def __init__(self, data_format: str = "CHW", keys=None):
        super().__init__(keys)
        if data_format not in ("CHW", "HWC"):
            raise ValueError(f"ToTensor: data_format must be 'CHW' or 'HWC', got {data_format!r}")
        self.data_format = data_format

    def _apply_image(self, image):
        array, _ = _host(image)
        array = _hwc(array, "ToTensor")
        if self.data_format == "CHW":
            array = array.transpose(2, 0, 1)
        if array.dtype == np.uint8:
            return _tensor(array.astype(np.float32) / np.float32(255.0))
        return _tensor(array.astype(np.float32, copy=False))


class Normalize(BaseTransform):
    """``(image - mean) / std`` per channel, in float32.

    ``mean`` and ``std`` are numbers or one value per channel; the channel
    axis is first for ``"CHW"`` and last for ``"HWC"`` (so an HW image under
    ``"CHW"`` comes out as [1, H, W], as in Paddle). ``to_rgb`` flips BGR to
    RGB first. Tensors stay Tensors, arrays stay arrays.
    """

    def __init__(self, mean=0.0, std=1.0, data_format: str = "CHW", to_rgb: bool = False,
                 keys=None):
        super().__init__(keys)
        if data_format not in ("CHW", "HWC"):
            raise ValueError(f"Normalize: data_format must be 'CHW' or 'HWC', got {data_format!r}")
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        self.std = np.asarray(std, dtype=np.float32).reshape(-1)
        if (self.std == 0).any():
            raise ValueError("Normalize: std must not contain zeros")
        self.data_format, self.to_rgb = data_format, to_rgb

    def _apply_image(self, image):
        array, was_tensor = _host(image)
        shape = (-1, 1, 1) if self.data_format == "CHW" else (1, 1, -1)
        array = array.astype(np.float32)
        if self.to_rgb:
            array = array[::-1] if self.data_format == "CHW" else array[..., ::-1]
        out = (array - self.mean.reshape(shape)) / self.std.reshape(shape)
        return _tensor(out) if was_tensor else out

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


class Transpose(BaseTransform):
    """Permute the axes of an HWC image (an HW image gets a channel axis first);
    the default ``(2, 0, 1)`` gives CHW."""

    def __init__(self, order: Sequence[int] = (2, 0, 1), keys=None):
        super().__init__(keys)
        if sorted(order) != [0, 1, 2]:
            raise ValueError(f"Transpose: order must be a permutation of (0, 1, 2), got {order}")
        self.order = tuple(order)

    def _apply_image(self, image):
        array, was_tensor = _host(image)
        out = _hwc(array, "Transpose").transpose(self.order)
        return _tensor(out) if was_tensor else out


class Resize(BaseTransform):
    """Resize an HW/HWC image to ``size`` ((h, w), or an int for the shorter side,
    keeping the aspect ratio) with ``"bilinear"`` or ``"nearest"`` interpolation."""

    def __init__(self, size, interpolation: str = "bilinear", keys=None):
        super().__init__(keys)
        if interpolation not in ("bilinear", "nearest"):
            raise ValueError(f"Resize: interpolation must be 'bilinear' or 'nearest', "
                             f"got {interpolation!r}")
        if isinstance(size, int):
            size_ok = size > 0
        else:
            size = tuple(size)
            size_ok = len(size) == 2 and all(isinstance(s, int) and s > 0 for s in size)
        if not size_ok:
            raise ValueError(f"Resize: size must be a positive int or (h, w), got {size!r}")
        self.size, self.interpolation = size, interpolation

    def _target(self, h: int, w: int) -> tuple[int, int]:
        if not isinstance(self.size, int):
            return self.size
        if h <= w:
            return self.size, max(1, round(w * self.size / h))
        return max(1, round(h * self.size / w)), self.size

    def _apply_image(self, image):
        array, was_tensor = _host(image)
        if array.ndim not in (2, 3):
            raise ValueError(f"Resize: expected an HW or HWC image, got shape {list(array.shape)}")
        h, w = array.shape[:2]
        th, tw = self._target(h, w)
        out = _resize(array, th, tw, self.interpolation)
        return _tensor(out) if was_tensor else out


def _resize(array: np.ndarray, th: int, tw: int, interpolation: str) -> np.ndarray:
    """Half-pixel-centre sampling (OpenCV's convention)."""
    h, w = array.shape[:2]
    if interpolation == "nearest":
        rows = np.minimum(np.arange(th) * h // th, h - 1)
        cols = np.minimum(np.arange(tw) * w // tw, w - 1)
        return array[rows][:, cols]
    ys = np.clip((np.arange(th) + 0.5) * (h / th) - 0.5, 0, h - 1)
    xs = np.clip((np.arange(tw) + 0.5) * (w / tw) - 0.5, 0, w - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    wy, wx = (ys - y0).astype(np.float32), (xs - x0).astype(np.float32)
    data = array.astype(np.float32)
    extra = (1,) * (array.ndim - 2)
    wy = wy.reshape(-1, 1, *extra)
    wx = wx.reshape(1, -1, *extra)
    top = data[y0][:, x0] * (1 - wx) + data[y0][:, x1] * wx
    bottom = data[y1][:, x0] * (1 - wx) + data[y1][:, x1] * wx
    out = top * (1 - wy) + bottom * wy
    if np.issubdtype(array.dtype, np.integer):
        info = np.iinfo(array.dtype)
        return np.clip(np.rint(out), info.min, info.max).astype(array.dtype)
    return out.astype(array.dtype)
