"""``dy2stat.io``: datasets, samplers and the DataLoader."""

from dy2stat.io.collate import default_collate_fn, default_convert_fn
from dy2stat.io.dataloader import DataLoader, WorkerInfo, get_worker_info
from dy2stat.io.dataset import (
    ComposeDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from dy2stat.io.sampler import BatchSampler, RandomSampler, Sampler, SequenceSampler

__all__ = [
    "BatchSampler", "ComposeDataset", "DataLoader", "Dataset", "IterableDataset",
    "RandomSampler", "Sampler", "SequenceSampler", "Subset", "TensorDataset", "WorkerInfo",
    "default_collate_fn", "default_convert_fn", "get_worker_info", "random_split",
]
