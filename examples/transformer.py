"""A Transformer encoder-decoder trained, then decoded greedily and by beam search, all
converted with `to_static`.

    python examples/transformer.py [--steps 200] [--quick] [--base]

The model is the "base" Transformer of "Attention Is All You Need" built on
`d2s.nn.Transformer` (pre-norm, as Paddle's machine-translation example):
word embeddings scaled by sqrt(d_model) plus a sinusoid position table, padding
masks, a causal mask, a label-smoothed loss that skips padding. The toy task:
reverse a sequence of tokens.

Decoding runs one token per step with the decoder's key/value caches, for at
most the source length plus 4 steps (a tensor: the source length is known only
when the program runs), and `break`s once every sequence has emitted EOS (a
tensor test). Greedy decoding loops `while step < max_len` and grows its tokens;
beam search loops `for step in range(...)`, collects each step's tokens and
parent beams in lists and follows them back with `F.gather_tree`. Both are
converted whole, as written: one `while` op each, with the same tokens and scores
as eager decoding.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.nn import functional as F
from dy2stat.static import InputSpec

PAD, BOS, EOS = 0, 1, 2

# "small" trains in seconds (tests); "base" is the paper's base model (benchmarks)
CONFIGS = {
    "small": dict(vocab_size=16, d_model=32, n_head=4, num_layers=2, d_inner_hid=64,
                  max_length=32),
    "base": dict(vocab_size=10000, d_model=512, n_head=8, num_layers=6, d_inner_hid=2048,
                 max_length=256),
}


def position_encoding(max_length: int, d_model: int) -> np.ndarray:
    """The sinusoid table [max_length, d_model]: sin on even channels, cos on odd."""
    position = np.arange(max_length, dtype="float64")[:, None]
    rate = np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = np.zeros((max_length, d_model))
    table[:, 0::2] = np.sin(position * rate)
    table[:, 1::2] = np.cos(position * rate)
    return table.astype("float32")


class TransformerModel(nn.Layer):
    """Source and target embeddings, ``nn.Transformer``, and a projection to the target
    vocabulary. ``forward(src, trg)`` gives the logits of teacher-forced decoding."""

    def __init__(self, vocab_size: int, d_model: int, n_head: int, num_layers: int,
                 d_inner_hid: int, max_length: int, dropout: float = 0.1):
        super().__init__()
        self.d_model = d_model
        self.src_embedding = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.trg_embedding = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.register_buffer("position_table",
                             d2s.to_tensor(position_encoding(max_length, d_model)))
        self.dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(d_model, n_head, num_layers, num_layers,
                                          d_inner_hid, dropout, normalize_before=True)
        self.project = nn.Linear(d_model, vocab_size)

    def embed(self, words, embedding, start=0):
        """Scaled word embeddings plus the position table's rows from ``start`` on."""
        positions = self.position_table[start:start + words.shape[1]]
        return self.dropout(embedding(words) * self.d_model ** 0.5 + positions)

    def encode(self, src):
        """The encoder's memory and the mask of the source's real tokens [batch, 1, 1, s]."""
        src_mask = (src != PAD).unsqueeze([1, 2])
        memory = self.transformer.encoder(self.embed(src, self.src_embedding),
                                          src_mask=src_mask)
        return memory, src_mask

    def forward(self, src, trg):
        memory, src_mask = self.encode(src)
        length = trg.shape[1]
        positions = d2s.arange(length)
        causal = positions.unsqueeze(0) <= positions.unsqueeze(1)  # [t, t]: keep the past
        out = self.transformer.decoder(self.embed(trg, self.trg_embedding), memory,
                                       tgt_mask=causal, memory_mask=src_mask)
        return self.project(out)

    def step(self, token, position, memory, src_mask, cache):
        """One decoding step for the last tokens [n, 1] at ``position``: log-probabilities
        [n, vocab] and the updated caches."""
        x = self.embed(token, self.trg_embedding, start=position)
        out, cache = self.transformer.decoder(x, memory, memory_mask=src_mask, cache=cache)
        return F.log_softmax(self.project(out[:, -1])), cache

    def greedy_search(self, src, max_extra: int = 4):
        """The most likely next token at each step until every sequence has emitted EOS
        (or ``src length + max_extra`` steps). Tokens [batch, steps] and their summed
        log-probabilities [batch]."""
        memory, src_mask = self.encode(src)
        cache = self.transformer.decoder.gen_cache(memory)
        batch = src.shape[0]
        token = d2s.full([batch, 1], BOS, "int64")
        tokens = d2s.zeros([batch, 0], "int64")
        scores = d2s.zeros([batch])
        finished = d2s.zeros([batch], "bool")
        max_len = src.shape[1] + max_extra
        step = d2s.zeros([], "int64")
        while step < max_len:
            logp, cache = self.step(token, step, memory, src_mask, cache)
            best, token = logp.topk(1)
            # a finished sequence keeps emitting EOS, for free
            token = d2s.where(finished.unsqueeze(1), d2s.full_like(token, EOS), token)
            scores = scores + d2s.where(finished, d2s.zeros_like(scores), best.squeeze(1))
            tokens = d2s.concat([tokens, token], axis=1)
            finished = finished | (token.squeeze(1) == EOS)
            step = step + 1
            if finished.all():
                break
        return tokens, scores

    def beam_search(self, src, beam_size: int = 3, max_extra: int = 4):
        """Beam search: keeps the ``beam_size`` best sequences of each source (summed
        log-probabilities) until every beam has emitted EOS (or ``src length +
        max_extra`` steps). Tokens [batch, beam, steps] and scores [batch, beam], best
        first."""
        memory, src_mask = self.encode(src)
        batch = src.shape[0]
        memory = d2s.repeat_interleave(memory, beam_size, axis=0)
        src_mask = d2s.repeat_interleave(src_mask, beam_size, axis=0)
        cache = self.transformer.decoder.gen_cache(memory)
        vocab = self.project.weight.shape[1]
        token = d2s.full([batch * beam_size, 1], BOS, "int64")
        # only the first beam is alive at the start, so the first step picks distinct tokens
        scores = d2s.zeros([batch, beam_size]) + d2s.to_tensor([0.0] + [-1e9] * (beam_size - 1))
        finished = d2s.zeros([batch, beam_size], "bool")
        eos_only = d2s.to_tensor([0.0 if v == EOS else -1e9 for v in range(vocab)])
        rows = (d2s.arange(batch) * beam_size).unsqueeze(1)  # first row of each source
        step_tokens, step_parents = [], []
        for step in range(src.shape[1] + max_extra):
            logp, cache = self.step(token, step, memory, src_mask, cache)
            logp = logp.reshape([batch, beam_size, vocab])
            logp = d2s.where(finished.unsqueeze(2), eos_only, logp)  # finished: EOS, for free
            total = (scores.unsqueeze(2) + logp).reshape([batch, beam_size * vocab])
            scores, choice = total.topk(beam_size)
            parent, token = choice // vocab, choice % vocab  # [batch, beam]
            step_tokens.append(token)
            step_parents.append(parent)
            extended = (rows + parent).flatten()  # the rows that the new beams extend
            finished = d2s.gather(finished.flatten(), extended).reshape([batch, beam_size])
            finished = finished | (token == EOS)
            cache = [(type(incremental)(d2s.gather(incremental.k, extended),
                                        d2s.gather(incremental.v, extended)), static)
                     for incremental, static in cache]
            token = token.reshape([-1, 1])
            if finished.all():
                break
        # each final beam's tokens, followed back through the parents it extended
        beams = F.gather_tree(d2s.stack(step_tokens), d2s.stack(step_parents))
        return beams.transpose([1, 2, 0]), scores


def label_smoothed_loss(logits, label, epsilon: float = 0.1):
    """Cross entropy against label-smoothed targets, averaged over the real tokens."""
    soft = F.label_smooth(F.one_hot(label, logits.shape[-1]), epsilon=epsilon)
    cost = F.cross_entropy(logits, soft, soft_label=True, reduction="none")  # [b, t, 1]
    weights = (label != PAD).astype("float32").unsqueeze(-1)
    return (cost * weights).sum() / weights.sum()


def reversal_batch(rng, batch: int, length: int, vocab: int):
    """Sources of random tokens (some padded shorter), targets that reverse them and end
    in EOS; the decoder's input is the target shifted right behind BOS."""
    src = rng.integers(EOS + 1, vocab, (batch, length))
    lengths = rng.integers(length // 2, length + 1, batch)
    trg = np.zeros((batch, length + 1), "int64")
    for i, n in enumerate(lengths):
        src[i, n:] = PAD
        trg[i, :n] = src[i, :n][::-1]
        trg[i, n] = EOS
    trg_in = np.concatenate([np.full((batch, 1), BOS), trg[:, :-1]], axis=1)
    return src.astype("int64"), trg_in.astype("int64"), trg


def converted(model: TransformerModel) -> TransformerModel:
    """The model with its training forward and both decoders converted: source and
    target lengths (and the batch) known only when the program runs."""
    tokens = InputSpec([None, None], "int64")
    d2s.jit.to_static(model, input_spec=[tokens, tokens])
    model.greedy_search = d2s.jit.to_static(model.greedy_search, input_spec=[tokens])
    model.beam_search = d2s.jit.to_static(model.beam_search, input_spec=[tokens])
    return model


def train(model, steps: int, batch: int, length: int, vocab: int, seed: int = 0):
    optimizer = d2s.optimizer.Adam(learning_rate=3e-3, parameters=model.parameters())
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        src, trg_in, trg = (d2s.to_tensor(a) for a in reversal_batch(rng, batch, length, vocab))
        loss = label_smoothed_loss(model(src, trg_in), trg)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        losses.append(float(loss))
    return losses


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps")
    parser.add_argument("--quick", action="store_true", help="a few steps, for the tests")
    parser.add_argument("--base", action="store_true", help="the base model (slow on a CPU)")
    args = parser.parse_args(argv)
    config = CONFIGS["base" if args.base else "small"]
    steps = 10 if args.quick else args.steps

    d2s.seed(0)
    model = converted(TransformerModel(**config))
    losses = train(model, steps, batch=32, length=6, vocab=config["vocab_size"])
    print(f"trained {steps} steps: loss {losses[0]:.3f} -> {losses[-1]:.3f}")

    model.eval()
    src, _, trg = reversal_batch(np.random.default_rng(1), 4, 6, config["vocab_size"])
    src = d2s.to_tensor(src)
    with d2s.no_grad():
        greedy = model.greedy_search(src)
        beams = model.beam_search(src)
        d2s.jit.enable_to_static(False)  # the same decoders, run eagerly
        try:
            eager = [model.greedy_search(src), model.beam_search(src)]
        finally:
            d2s.jit.enable_to_static(True)
    print("greedy:", greedy[0].numpy()[0].tolist(), "target:", trg[0].tolist())
    print("best beam:", beams[0].numpy()[0, 0].tolist(), "score", round(float(beams[1][0, 0]), 3))
    print(f"decoding stopped after {greedy[0].shape[1]} (greedy) and {beams[0].shape[2]} "
          f"(beam) of {src.shape[1] + 4} steps")
    same = all(np.array_equal(c.numpy(), e.numpy())
               for c, e in zip([*greedy, *beams], [*eager[0], *eager[1]]))
    whiles = [[op.type for op in decoder.main_program.global_block().ops].count("while")
              for decoder in (model.greedy_search, model.beam_search)]
    print(f"converted decoding gives the eager tokens and scores: {same}; while ops: "
          f"{whiles[0]} (greedy), {whiles[1]} (beam search: the loop and gather_tree's)")
    return 0 if same and whiles == [1, 2] else 1


if __name__ == "__main__":
    raise SystemExit(main())
