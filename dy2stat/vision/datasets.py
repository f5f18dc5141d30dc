"""``MNIST`` read from the standard IDX files in a local folder.

Nothing is downloaded: put ``train-images-idx3-ubyte.gz``,
``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz`` and
``t10k-labels-idx1-ubyte.gz`` (gzipped or not) in ``data_dir``, or pass the
two paths.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable

import numpy as np

from dy2stat.io.dataset import Dataset

__all__ = ["MNIST", "FashionMNIST", "read_idx"]

DEFAULT_HOME = os.path.join("~", ".cache", "dy2stat", "datasets")
_GZIP_MAGIC = b"\x1f\x8b"
_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
              0x0E: ">f8"}


def read_idx(path: str, ndim: int, what: str) -> np.ndarray:
    """The array in IDX file ``path`` (gzipped or not), checked to have ``ndim`` dims of uint8.

    Errors name the file: a bad magic number, a wrong element type or rank,
    or a size that disagrees with the header (a truncated download).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:2] == _GZIP_MAGIC:
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{what} file {path}: cannot read it as gzip or raw IDX ({exc})") from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        magic = raw[:4].hex() if len(raw) >= 4 else f"only {len(raw)} bytes"
        raise ValueError(
            f"{what} file {path}: not an IDX file (magic number {magic}; expected "
            f"0x{0x800 + ndim:08x} for {ndim}-d unsigned bytes)"
        )
    if raw[2] != 0x08 or raw[3] != ndim:
        raise ValueError(
            f"{what} file {path}: magic number 0x{raw[:4].hex()} is not 0x{0x800 + ndim:08x} "
            f"({ndim}-d unsigned bytes): is this the right file?"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{what} file {path}: truncated header ({len(raw)} bytes)")
    dims = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    expected = header + int(np.prod(dims))
    if len(raw) != expected:
        raise ValueError(
            f"{what} file {path}: the header promises {list(dims)} "
            f"({expected} bytes in all) but the file holds {len(raw)} bytes (truncated or "
            "corrupted?)"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


class MNIST(Dataset):
    """Handwritten digits: ``image`` uint8 [28, 28] (after ``transform``), ``label`` int64 [1].

    ``mode`` is ``"train"`` (60000 samples) or ``"test"`` (10000). Files come
    from ``image_path``/``label_path`` or from ``data_dir`` (default
    ``~/.cache/dy2stat/datasets/mnist``), gzipped or not.
    """

    NAME = "mnist"
    FILES = {
        "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    }

    def __init__(self, image_path: str | None = None, label_path: str | None = None,
                 mode: str = "train", transform: Callable | None = None,
                 download: bool = False, data_dir: str | None = None, backend: str | None = None):
        mode = mode.lower()
        if mode not in self.FILES:
            raise ValueError(f"{type(self).__name__}: mode must be 'train' or 'test', got {mode!r}")
        if backend not in (None, "cv2", "numpy"):
            raise ValueError(f"{type(self).__name__}: backend {backend!r} is not supported "
                             "(images are NumPy arrays)")
        self.mode = mode
        self.transform = transform
        self.data_dir = os.path.expanduser(
            data_dir or os.path.join(DEFAULT_HOME, self.NAME))
        image_name, label_name = self.FILES[mode]
        self.image_path = image_path or self._find(image_name, download)
        self.label_path = label_path or self._find(label_name, download)
        for path in (self.image_path, self.label_path):
            if not os.path.isfile(path):
                raise FileNotFoundError(self._missing(path, download))
        self.images = read_idx(self.image_path, 3, f"{type(self).__name__} images")
        self.labels = read_idx(self.label_path, 1, f"{type(self).__name__} labels").astype(np.int64)
        if self.images.shape[1:] != (28, 28):
            raise ValueError(f"{type(self).__name__} images file {self.image_path}: images are "
                             f"{list(self.images.shape[1:])}, expected [28, 28]")
        if len(self.images) != len(self.labels):
            raise ValueError(
                f"{type(self).__name__}: {self.image_path} holds {len(self.images)} images but "
                f"{self.label_path} holds {len(self.labels)} labels"
            )

    def _find(self, name: str, download: bool) -> str:
        for candidate in (name + ".gz", name):
            path = os.path.join(self.data_dir, candidate)
            if os.path.isfile(path):
                return path
        raise FileNotFoundError(self._missing(os.path.join(self.data_dir, name + ".gz"), download))

    def _missing(self, path: str, download: bool) -> str:
        name = os.path.basename(path)
        placing = (f"place the four {type(self).__name__} IDX files (gzipped or not) in "
                   f"{self.data_dir} (or pass data_dir=..., or image_path=/label_path=)")
        if download:
            return (f"{type(self).__name__}: {name} is missing and cannot be downloaded: "
                    f"dy2stat has no dataset downloads; {placing}")
        return (f"{type(self).__name__}: missing file {path} (downloads are not available); "
                f"{placing}")

    def __getitem__(self, index):
        image = self.images[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, np.array([self.labels[index]], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.labels)


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: the same file names and layout as MNIST."""

    NAME = "fashion-mnist"
