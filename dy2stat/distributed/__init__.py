"""``dy2stat.distributed``: data-parallel training over MPI (CPU) or NCCL (GPUs).

Start N processes with ``dy2stat launch -n N train.py``; in each, call
``init_parallel_env()``, wrap the model in ``DataParallel`` and read the data
through ``DistributedBatchSampler``. See docs/distributed.md.
"""

from dy2stat.distributed.data_parallel import DataParallel
from dy2stat.distributed.env import ParallelEnv, get_rank, get_world_size, init_parallel_env
from dy2stat.distributed.errors import DistributedError, PeerFailed
from dy2stat.distributed.sampler import DistributedBatchSampler

__all__ = ["DataParallel", "DistributedBatchSampler", "DistributedError", "ParallelEnv",
           "PeerFailed", "get_rank", "get_world_size", "init_parallel_env"]
