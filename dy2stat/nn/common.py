"""Linear, Embedding, Dropout, Flatten, Identity and Upsample."""

from __future__ import annotations

from dy2stat import ops
from dy2stat.nn import functional as F
from dy2stat.nn.layer import Layer


class Linear(Layer):
    """``y = x @ weight + bias`` with ``weight`` [in_features, out_features] (Paddle's layout).

    ``bias_attr=False`` leaves the bias out.
    """

    def __init__(self, in_features: int, out_features: int, weight_attr=None, bias_attr=None,
                 name: str | None = None):
        super().__init__(name)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = self.create_parameter([self.in_features, self.out_features], weight_attr)
        self.bias = self.create_parameter([self.out_features], bias_attr, is_bias=True)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype={self._dtype}")


class Embedding(Layer):
    """A lookup table [num_embeddings, embedding_dim]; ``padding_idx`` rows read as zeros."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 sparse: bool = False, weight_attr=None, name: str | None = None):
        super().__init__(name)
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for "
                                 f"{num_embeddings} embeddings")
            padding_idx = int(padding_idx) % self.num_embeddings
        self.padding_idx = padding_idx
        self.weight = self.create_parameter([self.num_embeddings, self.embedding_dim],
                                            weight_attr)

    def forward(self, x):
        return F.embedding(x, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Dropout(Layer):
    """Drops elements with probability ``p`` in training mode (see ``F.dropout``)."""

    def __init__(self, p: float = 0.5, axis=None, mode: str = "upscale_in_train",
                 name: str | None = None):
        super().__init__(name)
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        if axis is not None:
            raise NotImplementedError("Dropout: axis is not supported; drop elementwise "
                                      "(axis=None)")
        self.p, self.axis, self.mode = float(p), axis, mode

    def forward(self, x):
        return F.dropout(x, self.p, self.axis, self.training, self.mode)

    def extra_repr(self) -> str:
        return f"p={self.p}, mode={self.mode}"


class Flatten(Layer):
    """Flattens dims ``start_axis``..``stop_axis`` into one."""

    def __init__(self, start_axis: int = 1, stop_axis: int = -1):
        super().__init__()
        self.start_axis, self.stop_axis = int(start_axis), int(stop_axis)

    def forward(self, x):
        return ops.flatten(x, self.start_axis, self.stop_axis)

    def extra_repr(self) -> str:
        return f"start_axis={self.start_axis}, stop_axis={self.stop_axis}"


class Identity(Layer):
    """Returns its input (a placeholder in a Sequential)."""

    def forward(self, x):
        return x


class Upsample(Layer):
    """Resizes NCHW images to ``size`` or by ``scale_factor`` ('nearest' or 'bilinear',
    sampled as Paddle's ``interpolate``)."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool = False, align_mode: int = 0, data_format: str = "NCHW",
                 name: str | None = None):
        super().__init__(name)
        if data_format not in ("NCHW", "NHWC"):
            raise ValueError(f"Upsample: data_format must be 'NCHW' or 'NHWC', "
                             f"got {data_format!r}")
        if mode not in ("nearest", "bilinear"):
            raise NotImplementedError(f"Upsample: mode must be 'nearest' or 'bilinear', "
                                      f"got {mode!r}")
        if (size is None) == (scale_factor is None):
            raise ValueError("Upsample: give exactly one of size and scale_factor")
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.align_mode = bool(align_corners), int(align_mode)
        self.data_format = data_format

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.align_mode, self.data_format)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else \
            f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2D(Upsample):
    """Nearest-neighbour ``Upsample``."""

    def __init__(self, size=None, scale_factor=None, data_format: str = "NCHW",
                 name: str | None = None):
        super().__init__(size, scale_factor, "nearest", data_format=data_format, name=name)


class UpsamplingBilinear2D(Upsample):
    """Bilinear ``Upsample`` with aligned corners (as Paddle's)."""

    def __init__(self, size=None, scale_factor=None, data_format: str = "NCHW",
                 name: str | None = None):
        super().__init__(size, scale_factor, "bilinear", align_corners=True,
                         data_format=data_format, name=name)
