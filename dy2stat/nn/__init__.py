"""``dy2stat.nn``: Layer, parameters and initializers, the layers and losses, and
``nn.functional``."""

from dy2stat.nn import functional, initializer
from dy2stat.nn.activation import GELU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from dy2stat.nn.common import Dropout, Embedding, Flatten, Identity, Linear
from dy2stat.nn.container import LayerList, Sequential
from dy2stat.nn.conv import Conv2D
from dy2stat.nn.layer import HookRemoveHelper, Layer
from dy2stat.nn.loss import CrossEntropyLoss, MSELoss
from dy2stat.nn.norm import BatchNorm1D, BatchNorm2D, LayerNorm
from dy2stat.nn.parameter import ParamAttr, Parameter
from dy2stat.nn.pooling import AvgPool2D, MaxPool2D
from dy2stat.nn.rnn import GRU, LSTM, GRUCell, LSTMCell

__all__ = [
    "GELU", "GRU", "LSTM", "AvgPool2D", "BatchNorm1D", "BatchNorm2D", "Conv2D",
    "CrossEntropyLoss", "Dropout", "Embedding", "Flatten", "GRUCell", "HookRemoveHelper",
    "Identity", "Layer", "LayerList", "LayerNorm", "Linear", "LogSoftmax", "LSTMCell",
    "MSELoss", "MaxPool2D", "ParamAttr", "Parameter", "ReLU", "Sequential", "Sigmoid",
    "Softmax", "Tanh", "functional", "initializer",
]
