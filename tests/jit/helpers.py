"""Small models and helpers shared by the jit tests."""

from __future__ import annotations

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.nn import functional as F


def tensor(shape, seed=0, dtype="float32", stop_gradient=True):
    rng = np.random.default_rng(seed)
    return d2s.to_tensor(rng.standard_normal(shape).astype(dtype), stop_gradient=stop_gradient)


def op_types(program) -> list[str]:
    return [op.type for op in program.all_ops()]


class MLP(nn.Layer):
    """Linear -> ReLU -> (tensor-dependent scaling) -> Linear."""

    def __init__(self, d_in=4, d_hidden=8, d_out=3):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        if h.mean() > 0.5:
            h = h * 0.5
        return self.fc2(h)


class LanguageModel(nn.Layer):
    """An LSTM language model whose time loop runs to a TENSOR ``length``.

    ``forward(ids, length)`` embeds ``ids`` [batch, T+1], steps an LSTM cell over
    the first ``length`` positions with a ``while`` loop on the 0-D int64 tensor
    ``length``, and returns the mean next-token cross entropy.
    """

    def __init__(self, vocab=20, emb=8, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.embedding = nn.Embedding(vocab, emb)
        self.cell = nn.LSTMCell(emb, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, ids, length):
        x = self.embedding(ids)
        h = d2s.zeros([ids.shape[0], self.hidden])
        c = d2s.zeros([ids.shape[0], self.hidden])
        loss = d2s.zeros([])
        t = 0
        while t < length:
            h, (h, c) = self.cell(x[:, t], (h, c))
            logits = self.out(h)
            loss = loss + F.cross_entropy(logits, ids[:, t + 1])
            t += 1
        return loss / length.astype("float32")


def copy_weights(src: nn.Layer, dst: nn.Layer) -> None:
    dst.set_state_dict({k: v.numpy() for k, v in src.state_dict().items()})
