"""A tiny MNIST-like IDX data set, the seed's transforms, and a LeNet Model.

Each image is dark noise with one bright 8x5 block; the label is the block's
position (10 positions: 2 rows of 5), so LeNet learns it in a few epochs.
"""

from __future__ import annotations

import gzip
import struct

import numpy as np

import dy2stat as d2s
from dy2stat.hapi import Model
from dy2stat.static import InputSpec
from dy2stat.vision.datasets import MNIST
from dy2stat.vision.models import LeNet
from dy2stat.vision.transforms import BaseTransform, Compose, Normalize, Transpose

N_TRAIN, N_TEST = 64, 32


def _idx(array: np.ndarray) -> bytes:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    header += b"".join(struct.pack(">I", d) for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def make_images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = rng.integers(0, 40, (n, 28, 28))
    for image, label in zip(images, labels):
        row, col = divmod(int(label), 5)
        image[3 + 12 * row: 11 + 12 * row, 1 + 5 * col: 6 + 5 * col] = 255
    return images.astype(np.uint8), labels.astype(np.int64)


def write_idx_dataset(folder) -> None:
    """``train-*`` (64 images, gzipped) and ``t10k-*`` (32 images, raw) IDX files."""
    for prefix, n, seed, gz in (("train", N_TRAIN, 0, True), ("t10k", N_TEST, 1, False)):
        images, labels = make_images(n, seed)
        for name, data in ((f"{prefix}-images-idx3-ubyte", _idx(images)),
                           (f"{prefix}-labels-idx1-ubyte", _idx(labels))):
            if gz:
                (folder / f"{name}.gz").write_bytes(gzip.compress(data))
            else:
                (folder / name).write_bytes(data)


class ToArray(BaseTransform):
    """The seed's transform: the image as a float32 ndarray."""

    def __init__(self, keys=None):
        super().__init__(keys)

    def _apply_image(self, img):
        return np.array(img, dtype="float32")


def datasets(folder):
    """(train, test) MNIST data sets read from ``folder`` with the seed's transforms."""
    transforms = Compose([Transpose(), ToArray(), Normalize(mean=[127.5], std=[127.5])])
    train = MNIST(image_path=str(folder / "train-images-idx3-ubyte.gz"),
                  label_path=str(folder / "train-labels-idx1-ubyte.gz"),
                  mode="train", transform=transforms)
    test = MNIST(mode="test", data_dir=str(folder), transform=transforms)
    return train, test


X_SPEC = InputSpec(shape=[-1, 1, 28, 28], dtype="float32", name="x")
Y_SPEC = InputSpec(shape=[-1, 1], dtype="int64", name="y")


def lenet_model(inputs=X_SPEC, labels=Y_SPEC, lr=0.002, seed=0, metrics=True) -> Model:
    """The seed's Model: LeNet, Adam, CrossEntropyLoss, Accuracy(topk=(1, 2))."""
    d2s.seed(seed)
    model = Model(LeNet(), inputs=inputs, labels=labels)
    model.prepare(
        d2s.optimizer.Adam(learning_rate=lr, parameters=model.parameters()),
        d2s.nn.CrossEntropyLoss(),
        d2s.metric.Accuracy(topk=(1, 2)) if metrics else None,
    )
    return model
