"""A sequence-to-sequence LSTM with attention, trained and decoded greedily, converted
with `to_static`.

    python examples/seq2seq_attention.py [--steps 300] [--quick] [--full]

The model is the attention model of Paddle's seq2seq example (Luong et al.): an
LSTM encoder over the source (variable lengths, `sequence_length`), a decoder of
stacked `LSTMCell`s fed with the previous step's attention output ("input
feeding"), and an attention layer over the encoder's outputs that hides the
padding. The decoder loops over the target's steps (`for t in range(length)`, a
tensor in the converted program) and collects each step's output in a list. Greedy
decoding loops `while step < max_len` and `break`s once every sequence has emitted
EOS. The toy task: reverse a sequence of tokens.
"""

from __future__ import annotations

import argparse

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.nn import functional as F
from dy2stat.static import InputSpec

PAD, BOS, EOS = 0, 1, 2

# "small" trains in seconds (tests); "full" is the IWSLT'15 model of Paddle's example
CONFIGS = {
    "small": dict(src_vocab_size=16, trg_vocab_size=16, embed_dim=16, hidden_size=32,
                  num_layers=2),
    "full": dict(src_vocab_size=17191, trg_vocab_size=7709, embed_dim=512, hidden_size=512,
                 num_layers=2),
}


class Encoder(nn.Layer):
    """Embeddings and a multi-layer LSTM over the real steps of each source."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.embedder = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers,
                            dropout=0.2 if num_layers > 1 else 0.0)

    def forward(self, sequence, sequence_length):
        return self.lstm(self.embedder(sequence), sequence_length=sequence_length)


class Attention(nn.Layer):
    """Luong's "general" attention: scores of the decoder state against projected
    encoder outputs (padding masked), then Linear([context, state])."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.input_proj = nn.Linear(hidden_size, hidden_size)
        self.output_proj = nn.Linear(2 * hidden_size, hidden_size)

    def forward(self, hidden, encoder_output, padding_mask):
        keys = self.input_proj(encoder_output)  # [batch, src_len, hidden]
        scores = d2s.matmul(hidden.unsqueeze(1), keys, transpose_y=True) + padding_mask
        context = d2s.matmul(F.softmax(scores), keys).squeeze(1)
        return self.output_proj(d2s.concat([context, hidden], axis=1))


class DecoderCell(nn.Layer):
    """One decoder step: stacked LSTMCells on [input, previous attention output], then
    attention over the encoder's outputs."""

    def __init__(self, num_layers: int, input_size: int, hidden_size: int):
        super().__init__()
        self.dropout = nn.Dropout(0.2)
        self.lstm_cells = nn.LayerList([
            nn.LSTMCell(input_size + hidden_size if i == 0 else hidden_size, hidden_size)
            for i in range(num_layers)])
        self.attention = Attention(hidden_size)

    def forward(self, step_input, states, input_feed, encoder_output, padding_mask):
        """``states``: one (h, c) per layer. Returns the attention output (the next input
        feed) and the new states."""
        x = d2s.concat([step_input, input_feed], axis=1)
        new_states = []
        for cell, state in zip(self.lstm_cells, states):
            x, new_state = cell(x, state)
            x = self.dropout(x)
            new_states.append(new_state)
        return self.attention(x, encoder_output, padding_mask), new_states


class Seq2SeqAttention(nn.Layer):
    """``forward(src, src_length, trg)`` gives the logits of teacher-forced decoding
    [batch, trg_len, trg_vocab]; ``greedy_search(src, src_length)`` decodes."""

    def __init__(self, src_vocab_size: int, trg_vocab_size: int, embed_dim: int,
                 hidden_size: int, num_layers: int):
        super().__init__()
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.encoder = Encoder(src_vocab_size, embed_dim, hidden_size, num_layers)
        self.trg_embedder = nn.Embedding(trg_vocab_size, embed_dim)
        self.cell = DecoderCell(num_layers, embed_dim, hidden_size)
        self.output_layer = nn.Linear(hidden_size, trg_vocab_size)

    def encode(self, src, src_length):
        """Encoder outputs, the decoder's first states (the encoder's final ones), the first
        input feed (zeros) and the additive padding mask [batch, 1, src_len]."""
        encoder_output, (h, c) = self.encoder(src, src_length)
        states = [(h[i], c[i]) for i in range(self.num_layers)]
        input_feed = d2s.zeros_like(h[0])
        mask = F.sequence_mask(src_length, maxlen=src.shape[1], dtype="float32")
        padding_mask = ((mask - 1.0) * 1e9).unsqueeze(1)
        return encoder_output, states, input_feed, padding_mask

    def forward(self, src, src_length, trg):
        encoder_output, states, input_feed, padding_mask = self.encode(src, src_length)
        inputs = self.trg_embedder(trg)
        outputs = []
        for t in range(trg.shape[1]):
            input_feed, states = self.cell(inputs[:, t], states, input_feed, encoder_output,
                                           padding_mask)
            outputs.append(input_feed)
        return self.output_layer(d2s.stack(outputs, axis=1))

    def greedy_search(self, src, src_length, max_extra: int = 4):
        """The most likely token at each step until every sequence has emitted EOS (or
        ``src length + max_extra`` steps): tokens [batch, steps]."""
        encoder_output, states, input_feed, padding_mask = self.encode(src, src_length)
        batch = src.shape[0]
        token = d2s.full([batch], BOS, "int64")
        tokens = d2s.zeros([batch, 0], "int64")
        finished = d2s.zeros([batch], "bool")
        max_len = src.shape[1] + max_extra
        step = 0
        while step < max_len:
            input_feed, states = self.cell(self.trg_embedder(token), states, input_feed,
                                           encoder_output, padding_mask)
            token = self.output_layer(input_feed).argmax(-1)
            token = d2s.where(finished, d2s.full_like(token, EOS), token)
            tokens = d2s.concat([tokens, token.unsqueeze(1)], axis=1)
            finished = finished | (token == EOS)
            if finished.all():
                break
            step += 1
        return tokens


def masked_loss(logits, label, length):
    """Cross entropy summed over each target's real steps, averaged over the batch."""
    cost = F.cross_entropy(logits, label, reduction="none").squeeze(-1)  # [batch, steps]
    mask = F.sequence_mask(length, maxlen=label.shape[1], dtype="float32")
    return (cost * mask).sum(axis=1).mean()


def reversal_batch(rng, batch: int, length: int, vocab: int):
    """Sources of random tokens padded after their length; targets reverse them and end
    in EOS. Returns src, src_length, trg_in (BOS then target), trg_out [b, t, 1],
    trg_length."""
    lengths = rng.integers(2, length + 1, batch)
    src = np.zeros((batch, length), "int64")
    trg = np.zeros((batch, length + 1), "int64")
    for i, n in enumerate(lengths):
        src[i, :n] = rng.integers(EOS + 1, vocab, n)
        trg[i, :n] = src[i, :n][::-1]
        trg[i, n] = EOS
    trg_in = np.concatenate([np.full((batch, 1), BOS), trg[:, :-1]], axis=1)
    return (src, lengths.astype("int64"), trg_in.astype("int64"), trg[:, :, None],
            (lengths + 1).astype("int64"))


def converted(model: Seq2SeqAttention) -> Seq2SeqAttention:
    """Training forward and greedy decoding converted for any batch and lengths."""
    tokens, lengths = InputSpec([None, None], "int64"), InputSpec([None], "int64")
    d2s.jit.to_static(model, input_spec=[tokens, lengths, tokens])
    model.greedy_search = d2s.jit.to_static(model.greedy_search, input_spec=[tokens, lengths])
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps")
    parser.add_argument("--quick", action="store_true", help="a few steps, for the tests")
    parser.add_argument("--full", action="store_true", help="the IWSLT'15 model (slow)")
    args = parser.parse_args(argv)
    config = CONFIGS["full" if args.full else "small"]
    steps = 8 if args.quick else args.steps
    vocab = min(config["src_vocab_size"], config["trg_vocab_size"])

    d2s.seed(0)
    model = converted(Seq2SeqAttention(**config))
    optimizer = d2s.optimizer.Adam(learning_rate=5e-3, parameters=model.parameters(),
                                   grad_clip=d2s.optimizer.ClipGradByGlobalNorm(5.0))
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        src, src_len, trg_in, trg_out, trg_len = (
            d2s.to_tensor(a) for a in reversal_batch(rng, 32, 6, vocab))
        loss = masked_loss(model(src, src_len, trg_in), trg_out, trg_len)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        losses.append(float(loss))
    print(f"trained {steps} steps: loss {losses[0]:.3f} -> {losses[-1]:.3f}")

    model.eval()
    src, src_len, _, trg_out, _ = reversal_batch(np.random.default_rng(1), 8, 6, vocab)
    with d2s.no_grad():
        tokens = model.greedy_search(d2s.to_tensor(src), d2s.to_tensor(src_len)).numpy()
        d2s.jit.enable_to_static(False)  # the same decoder, run eagerly
        try:
            eager = model.greedy_search(d2s.to_tensor(src), d2s.to_tensor(src_len)).numpy()
        finally:
            d2s.jit.enable_to_static(True)
    print("greedy:", tokens[0].tolist(), "target:", trg_out[0, :, 0].tolist())
    same = np.array_equal(tokens, eager)
    print(f"converted decoding gives the eager tokens: {same}")
    return 0 if same and (args.quick or losses[-1] < losses[0]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
