"""Normalization layers: batch norm (the 2.x forms and the 1.8 ``BatchNorm``), layer,
group and instance norm."""

from __future__ import annotations

import numbers

from dy2stat.nn import functional as F
from dy2stat.nn.initializer import Constant
from dy2stat.nn.layer import Layer


class _BatchNormBase(Layer):
    """Batch norm with running statistics in the buffers ``_mean`` and ``_variance``
    (Paddle's names). Training normalizes with the batch statistics and updates the
    running ones: ``running = momentum * running + (1 - momentum) * batch``."""

    _ranks: tuple = ()
    _formats: tuple = ()

    def __init__(self, num_features: int, momentum: float = 0.9, epsilon: float = 1e-5,
                 weight_attr=None, bias_attr=None, data_format: str | None = None,
                 use_global_stats: bool | None = None, name: str | None = None):
        super().__init__(name)
        data_format = data_format or self._formats[0]
        if data_format not in self._formats:
            raise ValueError(f"{type(self).__name__}: data_format must be one of "
                             f"{list(self._formats)}, got {data_format!r}")
        self.num_features = int(num_features)
        self.momentum, self.epsilon = float(momentum), float(epsilon)
        self.data_format, self.use_global_stats = data_format, use_global_stats
        c = [self.num_features]
        self.weight = self.create_parameter(c, weight_attr, default_initializer=Constant(1.0))
        self.bias = self.create_parameter(c, bias_attr, is_bias=True)
        self.register_buffer("_mean", self.create_buffer("_mean", c, fill_value=0.0))
        self.register_buffer("_variance", self.create_buffer("_variance", c, fill_value=1.0))

    def forward(self, x):
        if len(x.shape) not in self._ranks:
            ranks = " or ".join(f"{r}-D" for r in self._ranks)
            raise ValueError(f"{type(self).__name__}: expected a {ranks} input, "
                             f"got shape {list(x.shape)}")
        return F.batch_norm(x, self._mean, self._variance, self.weight, self.bias,
                            training=self.training, momentum=self.momentum,
                            epsilon=self.epsilon, data_format=self._op_format(len(x.shape)),
                            use_global_stats=self.use_global_stats)

    def _op_format(self, ndim: int) -> str:
        return self.data_format

    def extra_repr(self) -> str:
        return (f"num_features={self.num_features}, momentum={self.momentum}, "
                f"epsilon={self.epsilon}")


class BatchNorm1D(_BatchNormBase):
    """Batch norm of [N, C] or [N, C, L] inputs (``data_format`` "NCL" or "NLC")."""

    _ranks = (2, 3)
    _formats = ("NCL", "NLC", "NC")

    def _op_format(self, ndim: int) -> str:
        return "NC" if ndim == 2 else self.data_format


class BatchNorm2D(_BatchNormBase):
    """Batch norm of [N, C, H, W] inputs (``data_format`` "NCHW" or "NHWC")."""

    _ranks = (4,)
    _formats = ("NCHW", "NHWC")


class LayerNorm(Layer):
    """Normalizes over the trailing dims ``normalized_shape``; weight ones, bias zeros."""

    def __init__(self, normalized_shape, epsilon: float = 1e-5, weight_attr=None,
                 bias_attr=None, name: str | None = None):
        super().__init__(name)
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = [normalized_shape]
        self.normalized_shape = [int(d) for d in normalized_shape]
        self.epsilon = float(epsilon)
        self.weight = self.create_parameter(self.normalized_shape, weight_attr,
                                            default_initializer=Constant(1.0))
        self.bias = self.create_parameter(self.normalized_shape, bias_attr, is_bias=True)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.epsilon)

    def extra_repr(self) -> str:
        return f"normalized_shape={self.normalized_shape}, epsilon={self.epsilon}"


class BatchNorm(_BatchNormBase):
    """Paddle 1.8's batch norm: ``BatchNorm(num_channels, act=None, ...)`` over
    inputs of rank 2 to 5 (channels on axis 1, or last for ``data_layout='NHWC'``),
    followed by the activation ``act`` ('relu', 'sigmoid', ... or None)."""

    _ranks = (2, 3, 4, 5)
    _formats = ("NCHW", "NHWC")

    def __init__(self, num_channels: int, act: str | None = None, is_test: bool = False,
                 momentum: float = 0.9, epsilon: float = 1e-5, param_attr=None,
                 bias_attr=None, dtype="float32", data_layout: str = "NCHW",
                 in_place: bool = False, moving_mean_name=None, moving_variance_name=None,
                 do_model_average_for_mean_and_var: bool = True,
                 use_global_stats: bool = False, trainable_statistics: bool = False):
        if act is not None and not callable(getattr(F, act, None)):
            raise ValueError(f"BatchNorm: unknown activation act={act!r}")
        if trainable_statistics:
            raise NotImplementedError("BatchNorm: trainable_statistics=True is not supported")
        super().__init__(num_channels, momentum, epsilon, param_attr, bias_attr,
                         data_format=data_layout,
                         use_global_stats=True if use_global_stats or is_test else None)
        self._act = act

    def forward(self, x):
        y = super().forward(x)
        return y if self._act is None else getattr(F, self._act)(y)

    def extra_repr(self) -> str:
        act = "" if self._act is None else f", act={self._act!r}"
        return super().extra_repr() + act


class GroupNorm(Layer):
    """Normalizes groups of ``num_channels / num_groups`` channels per sample; a scale
    (ones) and shift (zeros) per channel (``weight_attr``/``bias_attr=False``: none)."""

    def __init__(self, num_groups: int, num_channels: int, epsilon: float = 1e-5,
                 weight_attr=None, bias_attr=None, data_format: str = "NCHW",
                 name: str | None = None):
        super().__init__(name)
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by "
                             f"num_groups {num_groups}")
        self.num_groups, self.num_channels = int(num_groups), int(num_channels)
        self.epsilon, self.data_format = float(epsilon), data_format
        c = [self.num_channels]
        self.weight = self.create_parameter(c, weight_attr, default_initializer=Constant(1.0))
        self.bias = self.create_parameter(c, bias_attr, is_bias=True)

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.epsilon, self.weight, self.bias,
                            self.data_format)

    def extra_repr(self) -> str:
        return (f"num_groups={self.num_groups}, num_channels={self.num_channels}, "
                f"epsilon={self.epsilon}")


class _InstanceNormBase(Layer):
    """Normalizes each sample's channels over their positions; a scale (ones) and shift
    (zeros) per channel. No running statistics are kept (as in Paddle)."""

    _rank = 0

    def __init__(self, num_features: int, epsilon: float = 1e-5, momentum: float = 0.9,
                 weight_attr=None, bias_attr=None, data_format: str | None = None,
                 name: str | None = None):
        super().__init__(name)
        self.num_features, self.epsilon = int(num_features), float(epsilon)
        self.data_format = data_format
        c = [self.num_features]
        self.scale = self.create_parameter(c, weight_attr, default_initializer=Constant(1.0))
        self.bias = self.create_parameter(c, bias_attr, is_bias=True)

    def forward(self, x):
        if len(x.shape) != self._rank:
            raise ValueError(f"{type(self).__name__}: expected a {self._rank}-D input, got "
                             f"shape {list(x.shape)}")
        return F.instance_norm(x, weight=self.scale, bias=self.bias, eps=self.epsilon)

    def extra_repr(self) -> str:
        return f"num_features={self.num_features}, epsilon={self.epsilon}"


class InstanceNorm1D(_InstanceNormBase):
    """Instance norm of [N, C, L] inputs."""

    _rank = 3


class InstanceNorm2D(_InstanceNormBase):
    """Instance norm of [N, C, H, W] inputs."""

    _rank = 4
