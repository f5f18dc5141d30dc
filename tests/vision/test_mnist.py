"""MNIST from IDX files the test writes itself (gzipped and raw)."""

import gzip
import struct

import numpy as np
import pytest

from dy2stat.io import DataLoader
from dy2stat.vision import transforms
from dy2stat.vision.datasets import MNIST

RNG = np.random.default_rng(0)


def _idx(array: np.ndarray) -> bytes:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    header += b"".join(struct.pack(">I", d) for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_mnist(folder, mode="train", n=12, gz=True, images=None, labels=None):
    prefix = "train" if mode == "train" else "t10k"
    images = RNG.integers(0, 256, (n, 28, 28)) if images is None else images
    labels = RNG.integers(0, 10, n) if labels is None else labels
    suffix = ".gz" if gz else ""
    for name, data in ((f"{prefix}-images-idx3-ubyte", _idx(images)),
                       (f"{prefix}-labels-idx1-ubyte", _idx(labels))):
        raw = gzip.compress(data) if gz else data
        (folder / (name + suffix)).write_bytes(raw)
    return images.astype(np.uint8), labels.astype(np.int64)


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("mode", ["train", "test"])
def test_reads_back_what_was_written(tmp_path, gz, mode):
    images, labels = write_mnist(tmp_path, mode, gz=gz)
    ds = MNIST(mode=mode, data_dir=str(tmp_path))
    assert len(ds) == 12
    image, label = ds[5]
    assert image.dtype == np.uint8 and image.shape == (28, 28)
    np.testing.assert_array_equal(image, images[5])
    assert label.dtype == np.int64 and label.shape == (1,) and label[0] == labels[5]
    assert ds[-1][1][0] == labels[-1]


def test_explicit_paths_and_transform(tmp_path):
    images, labels = write_mnist(tmp_path, gz=False)
    ds = MNIST(image_path=str(tmp_path / "train-images-idx3-ubyte"),
               label_path=str(tmp_path / "train-labels-idx1-ubyte"),
               transform=transforms.Normalize(mean=[127.5], std=[127.5], data_format="CHW"))
    image, _ = ds[0]
    assert image.shape == (1, 28, 28) and image.dtype == np.float32
    np.testing.assert_allclose(image[0], (images[0] - 127.5) / 127.5, rtol=1e-6)


def test_loader_batches_mnist(tmp_path):
    write_mnist(tmp_path)
    ds = MNIST(data_dir=str(tmp_path), transform=transforms.ToTensor())
    x, y = next(iter(DataLoader(ds, batch_size=4, num_workers=2)))
    assert x.shape == [4, 1, 28, 28] and str(x.dtype) == "float32"
    assert y.shape == [4, 1] and str(y.dtype) == "int64"


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte") as info:
        MNIST(data_dir=str(tmp_path))
    assert "downloads are not available" in str(info.value)
    assert str(tmp_path) in str(info.value)


def test_missing_labels_only(tmp_path):
    write_mnist(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match="train-labels-idx1-ubyte"):
        MNIST(data_dir=str(tmp_path))


def test_download_request_says_how_to_place_the_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="cannot be downloaded") as info:
        MNIST(mode="test", data_dir=str(tmp_path), download=True)
    assert "t10k-images-idx3-ubyte" in str(info.value) and "place" in str(info.value)


def test_download_flag_is_harmless_when_files_are_there(tmp_path):
    write_mnist(tmp_path)
    assert len(MNIST(data_dir=str(tmp_path), download=True)) == 12


def test_corrupted_magic_is_named(tmp_path):
    write_mnist(tmp_path, gz=False)
    path = tmp_path / "train-images-idx3-ubyte"
    data = bytearray(path.read_bytes())
    data[3] = 0x01  # a 1-d file where a 3-d one belongs
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.*magic number"):
        MNIST(data_dir=str(tmp_path))
    path.write_bytes(b"PK\x03\x04 not idx at all")
    with pytest.raises(ValueError, match="not an IDX file"):
        MNIST(data_dir=str(tmp_path))


def test_truncated_file_is_named(tmp_path):
    write_mnist(tmp_path, gz=False)
    path = tmp_path / "train-labels-idx1-ubyte"
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte.*truncated"):
        MNIST(data_dir=str(tmp_path))


def test_broken_gzip_is_named(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.gz"):
        MNIST(data_dir=str(tmp_path))


def test_counts_must_agree(tmp_path):
    write_mnist(tmp_path, images=RNG.integers(0, 256, (5, 28, 28)),
                labels=RNG.integers(0, 10, 4))
    with pytest.raises(ValueError, match="5 images but .* 4 labels"):
        MNIST(data_dir=str(tmp_path))


def test_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        MNIST(mode="valid")
