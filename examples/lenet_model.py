"""The second seed's appendix: one LeNet/MNIST `Model.fit`/`evaluate` script, dynamic or static.

    python examples/lenet_model.py [--static] [--epochs 2] [--quick]

The script is the same in both modes; `--static` only calls
`d2s.enable_static()` first, and the Model then builds static programs (train,
eval) and runs them with an Executor. The data set is a small MNIST-like set
written as standard IDX files into a temporary folder (nothing is downloaded):
noise images with one bright block whose position is the label.
"""

from __future__ import annotations

import argparse
import gzip
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

import dy2stat as d2s
from dy2stat.static import InputSpec
from dy2stat.vision.transforms import BaseTransform, Compose, Normalize, Transpose


class ToArray(BaseTransform):
    """The seed's transform: the image as a float32 ndarray."""

    def __init__(self, keys=None):
        super().__init__(keys)

    def _apply_image(self, img):
        return np.array(img, dtype="float32")


def write_idx(folder: Path, n_train: int, n_test: int) -> None:
    """train-* (gzipped) and t10k-* IDX files of 28x28 images and their labels."""
    def idx(array: np.ndarray) -> bytes:
        header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
        header += b"".join(struct.pack(">I", d) for d in array.shape)
        return header + array.astype(np.uint8).tobytes()

    for prefix, n, seed in (("train", n_train, 0), ("t10k", n_test, 1)):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 10, n)
        images = rng.integers(0, 40, (n, 28, 28))
        for image, label in zip(images, labels):
            row, col = divmod(int(label), 5)
            image[3 + 12 * row: 11 + 12 * row, 1 + 5 * col: 6 + 5 * col] = 255
        (folder / f"{prefix}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx(images)))
        (folder / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx(labels)))


def train(data_dir: str, epochs: int, batch_size: int) -> dict:
    transforms = Compose([Transpose(), ToArray(), Normalize(mean=[127.5], std=[127.5])])
    train_dataset = d2s.vision.datasets.MNIST(mode="train", transform=transforms,
                                              data_dir=data_dir)
    test_dataset = d2s.vision.datasets.MNIST(mode="test", transform=transforms,
                                             data_dir=data_dir)

    # Static mode needs the inputs' shapes and dtypes.
    x_spec = InputSpec(shape=[-1, 1, 28, 28], dtype="float32", name="x")
    y_spec = InputSpec(shape=[-1, 1], dtype="int64", name="y")

    d2s.seed(0)
    lenet = d2s.vision.models.LeNet()
    model = d2s.Model(lenet, inputs=x_spec, labels=y_spec)
    model.prepare(
        d2s.optimizer.Adam(learning_rate=0.002, parameters=model.parameters()),
        d2s.nn.CrossEntropyLoss(),
        d2s.metric.Accuracy(topk=(1, 2)),
    )
    model.fit(train_dataset, epochs=epochs, batch_size=batch_size, log_freq=400, verbose=1)
    return model.evaluate(test_dataset, log_freq=40, batch_size=64, verbose=0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--static", action="store_true", help="run after d2s.enable_static()")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=512, help="training images")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="a tiny run, for the tests")
    args = parser.parse_args(argv)
    epochs, samples = (2, 64) if args.quick else (args.epochs, args.samples)

    if args.static:
        d2s.enable_static()  # the only line that differs between the two modes
    try:
        with tempfile.TemporaryDirectory() as folder:
            write_idx(Path(folder), samples, max(samples // 4, 32))
            start = time.perf_counter()
            result = train(folder, epochs, args.batch_size)
            elapsed = time.perf_counter() - start
    finally:
        d2s.disable_static()
    mode = "static" if args.static else "dynamic"
    metrics = ", ".join(f"{k} {float(np.mean(v)):.4f}" for k, v in result.items())
    print(f"{mode} mode: {epochs} epochs in {elapsed:.2f}s; evaluate: {metrics}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
