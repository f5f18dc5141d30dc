"""``dy2stat.metric``: Metric, Accuracy, Precision, Recall, Auc and ``accuracy``."""

from dy2stat.metric.metrics import Accuracy, Auc, Metric, Precision, Recall, accuracy

__all__ = ["Accuracy", "Auc", "Metric", "Precision", "Recall", "accuracy"]
