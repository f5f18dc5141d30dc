"""``nn.functional``: stateless layer math; every function emits ops through the
dispatcher, so it runs on eager Tensors and builds static programs alike."""

from dy2stat.nn.functional.activation import (
    elu,
    gelu,
    hardswish,
    leaky_relu,
    log_softmax,
    mish,
    prelu,
    relu,
    relu6,
    sigmoid,
    silu,
    softmax,
    softplus,
    softsign,
    tanh,
)
from dy2stat.nn.functional.common import (
    cosine_similarity,
    dropout,
    embedding,
    label_smooth,
    linear,
)
from dy2stat.nn.functional.conv import conv1d, conv2d, conv2d_transpose
from dy2stat.nn.functional.decoding import gather_tree
from dy2stat.nn.functional.loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from dy2stat.nn.functional.norm import batch_norm, group_norm, instance_norm, layer_norm
from dy2stat.nn.functional.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)
from dy2stat.nn.functional.shaping import interpolate, one_hot, pad, sequence_mask

__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "avg_pool1d", "avg_pool2d", "batch_norm", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "conv1d", "conv2d", "conv2d_transpose",
    "cosine_similarity", "cross_entropy", "dropout", "elu", "embedding", "gather_tree", "gelu",
    "group_norm", "hardswish", "instance_norm", "kl_div", "l1_loss", "label_smooth",
    "layer_norm", "leaky_relu", "linear", "log_softmax", "margin_ranking_loss", "max_pool1d",
    "max_pool2d", "mish", "mse_loss", "nll_loss", "prelu", "relu", "relu6", "sigmoid", "silu",
    "smooth_l1_loss", "softmax", "softplus", "softsign", "tanh",
    "interpolate", "one_hot", "pad", "sequence_mask",
]
