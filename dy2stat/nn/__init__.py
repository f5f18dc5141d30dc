"""``dy2stat.nn``: Layer, parameters and initializers, the layers and losses, and
``nn.functional``."""

from dy2stat.nn import functional, initializer
from dy2stat.nn.activation import (
    ELU,
    GELU,
    Hardswish,
    LeakyReLU,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Softsign,
    Tanh,
)
from dy2stat.nn.common import (
    Dropout,
    Embedding,
    Flatten,
    Identity,
    Linear,
    Upsample,
    UpsamplingBilinear2D,
    UpsamplingNearest2D,
)
from dy2stat.nn.container import LayerDict, LayerList, ParameterList, Sequential
from dy2stat.nn.conv import Conv1D, Conv2D, Conv2DTranspose
from dy2stat.nn.layer import HookRemoveHelper, Layer
from dy2stat.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from dy2stat.nn.norm import (
    BatchNorm,
    BatchNorm1D,
    BatchNorm2D,
    GroupNorm,
    InstanceNorm1D,
    InstanceNorm2D,
    LayerNorm,
)
from dy2stat.nn.parameter import ParamAttr, Parameter
from dy2stat.nn.pooling import (
    AdaptiveAvgPool1D,
    AdaptiveAvgPool2D,
    AdaptiveMaxPool1D,
    AdaptiveMaxPool2D,
    AvgPool1D,
    AvgPool2D,
    MaxPool1D,
    MaxPool2D,
)
from dy2stat.nn.rnn import GRU, LSTM, GRUCell, LSTMCell, SimpleRNN, SimpleRNNCell
from dy2stat.nn.transformer import (
    MultiHeadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "ELU", "GELU", "GRU", "LSTM", "AdaptiveAvgPool1D", "AdaptiveAvgPool2D",
    "AdaptiveMaxPool1D", "AdaptiveMaxPool2D", "AvgPool1D", "AvgPool2D", "BCELoss",
    "BCEWithLogitsLoss", "BatchNorm", "BatchNorm1D", "BatchNorm2D", "Conv1D", "Conv2D",
    "Conv2DTranspose", "CrossEntropyLoss", "Dropout", "Embedding", "Flatten", "GRUCell",
    "GroupNorm", "Hardswish", "HookRemoveHelper", "Identity", "InstanceNorm1D",
    "InstanceNorm2D", "KLDivLoss", "L1Loss", "Layer", "LayerDict", "LayerList", "LayerNorm",
    "LeakyReLU", "Linear", "LogSoftmax", "LSTMCell", "MSELoss", "MarginRankingLoss",
    "MaxPool1D", "MaxPool2D", "Mish", "MultiHeadAttention", "NLLLoss", "PReLU", "ParamAttr",
    "Parameter", "ParameterList", "ReLU", "ReLU6", "Sequential", "SiLU", "Sigmoid",
    "SimpleRNN", "SimpleRNNCell", "SmoothL1Loss", "Softmax", "Softplus", "Softsign", "Tanh",
    "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
    "TransformerEncoderLayer", "Upsample", "UpsamplingBilinear2D", "UpsamplingNearest2D",
    "functional", "initializer",
]
