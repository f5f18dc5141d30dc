"""``dy2stat.optimizer``: SGD, Momentum, Adam, AdamW, RMSProp, Adagrad, Adamax, Lamb,
gradient clipping and ``lr`` schedulers."""

from dy2stat.optimizer import lr
from dy2stat.optimizer.adam import Adam, AdamW
from dy2stat.optimizer.adaptive import Adagrad, Adamax, Lamb, RMSProp
from dy2stat.optimizer.clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue
from dy2stat.optimizer.momentum import Momentum
from dy2stat.optimizer.optimizer import Optimizer
from dy2stat.optimizer.sgd import SGD

__all__ = [
    "SGD", "Adagrad", "Adam", "Adamax", "AdamW", "ClipGradByGlobalNorm", "ClipGradByNorm",
    "ClipGradByValue", "Lamb", "Momentum", "Optimizer", "RMSProp", "lr",
]
