"""``dy2stat.hapi``: the high-level ``Model`` API (``fit`` / ``evaluate`` / ``predict``)
and its callbacks."""

from dy2stat.hapi import callbacks
from dy2stat.hapi.callbacks import (
    Callback,
    EarlyStopping,
    LRScheduler,
    ModelCheckpoint,
    ProgBarLogger,
)
from dy2stat.hapi.model import Model

__all__ = [
    "Callback", "EarlyStopping", "LRScheduler", "Model", "ModelCheckpoint", "ProgBarLogger",
    "callbacks",
]
