"""``dy2stat.metric``: Metric, Accuracy, Precision, Recall and ``accuracy``."""

from dy2stat.metric.metrics import Accuracy, Metric, Precision, Recall, accuracy

__all__ = ["Accuracy", "Metric", "Precision", "Recall", "accuracy"]
