"""``nn.functional``: stateless layer math; every function emits ops through the
dispatcher, so it runs on eager Tensors and builds static programs alike."""

from dy2stat.nn.functional.activation import gelu, log_softmax, relu, sigmoid, softmax, tanh
from dy2stat.nn.functional.common import dropout, embedding, linear
from dy2stat.nn.functional.conv import conv2d
from dy2stat.nn.functional.loss import cross_entropy, mse_loss
from dy2stat.nn.functional.norm import batch_norm, layer_norm
from dy2stat.nn.functional.pooling import avg_pool2d, max_pool2d
from dy2stat.nn.functional.shaping import interpolate, one_hot, pad, sequence_mask

__all__ = [
    "avg_pool2d", "batch_norm", "conv2d", "cross_entropy", "dropout", "embedding", "gelu",
    "layer_norm", "linear", "log_softmax", "max_pool2d", "mse_loss", "relu", "sigmoid",
    "softmax", "tanh",
    "interpolate", "one_hot", "pad", "sequence_mask",
]
