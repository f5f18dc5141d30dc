"""A bidirectional LSTM text classifier over sequences of different lengths, trained
converted with `to_static`.

    python examples/bilstm_classifier.py [--steps 200] [--quick] [--full]

The model is the BiLSTM of Paddle's sentiment-classification example: embeddings
(padding id 0), an `nn.LSTM(direction="bidirect")` told each sequence's length
(`sequence_length`: steps past it give zeros and keep the state, and the backward
direction starts at each sequence's own last token), a pooling of the outputs
over the real steps (the final states of both directions, or a masked mean or
max), then tanh(Linear) and Linear. Batches are padded to their longest
sequence, so the converted program runs the time loops as `while` ops for every
length. The toy task: is a "positive" word more frequent than a "negative" one.
"""

from __future__ import annotations

import argparse

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.nn import functional as F
from dy2stat.static import InputSpec

PAD = 0
POSITIVE, NEGATIVE = 1, 2  # the words that decide the label

# "small" trains in seconds (tests); "full" is the example's model (benchmarks)
CONFIGS = {
    "small": dict(vocab_size=30, emb_dim=16, lstm_hidden_size=24, fc_hidden_size=16),
    "full": dict(vocab_size=30000, emb_dim=128, lstm_hidden_size=198, fc_hidden_size=96),
}


class BiLSTMClassifier(nn.Layer):
    """``forward(text, seq_len)``: logits [batch, num_classes] of token ids [batch, time]
    padded after each sequence's ``seq_len``. ``pooling_type`` None (the final states of
    both directions), "mean" or "max" (over the real steps of the outputs)."""

    def __init__(self, vocab_size: int, num_classes: int = 2, emb_dim: int = 128,
                 lstm_hidden_size: int = 198, fc_hidden_size: int = 96, lstm_layers: int = 1,
                 dropout_rate: float = 0.0, pooling_type: str | None = None):
        super().__init__()
        if pooling_type not in (None, "mean", "max"):
            raise ValueError(f"pooling_type must be None, 'mean' or 'max', got {pooling_type!r}")
        self.pooling_type = pooling_type
        self.embedder = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.lstm_encoder = nn.LSTM(emb_dim, lstm_hidden_size, num_layers=lstm_layers,
                                    direction="bidirect", dropout=dropout_rate)
        self.fc = nn.Linear(2 * lstm_hidden_size, fc_hidden_size)
        self.output_layer = nn.Linear(fc_hidden_size, num_classes)

    def forward(self, text, seq_len):
        encoded, (last_hidden, _) = self.lstm_encoder(self.embedder(text),
                                                      sequence_length=seq_len)
        if self.pooling_type is None:
            # the last layer's forward and backward final states
            pooled = d2s.concat([last_hidden[-2], last_hidden[-1]], axis=1)
        else:
            mask = F.sequence_mask(seq_len, maxlen=text.shape[1], dtype="float32").unsqueeze(-1)
            if self.pooling_type == "mean":
                pooled = (encoded * mask).sum(axis=1) / mask.sum(axis=1)
            else:
                pooled = (encoded + (mask - 1.0) * 1e9).max(axis=1)
        return self.output_layer(d2s.tanh(self.fc(pooled)))


def text_batch(rng, batch: int, max_len: int, vocab: int):
    """Token ids padded to the batch's longest sequence, the lengths, and labels [b, 1]:
    1 when POSITIVE occurs more often than NEGATIVE."""
    longest = int(rng.integers(2, max_len + 1))
    lengths = rng.integers(1, longest + 1, batch)
    lengths[0] = longest
    text = np.zeros((batch, longest), "int64")
    for i, n in enumerate(lengths):
        text[i, :n] = rng.integers(1, vocab, n)
    label = ((text == POSITIVE).sum(1) > (text == NEGATIVE).sum(1)).astype("int64")
    return text, lengths.astype("int64"), label.reshape(-1, 1)


def converted(model: BiLSTMClassifier) -> BiLSTMClassifier:
    """Converted for any batch size and padded length."""
    return d2s.jit.to_static(model, input_spec=[InputSpec([None, None], "int64", "text"),
                                                InputSpec([None], "int64", "seq_len")])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="training steps")
    parser.add_argument("--quick", action="store_true", help="a few steps, for the tests")
    parser.add_argument("--full", action="store_true", help="the example's model (slow)")
    parser.add_argument("--pooling", choices=["final", "mean", "max"], default="final")
    args = parser.parse_args(argv)
    config = CONFIGS["full" if args.full else "small"]
    steps = 8 if args.quick else args.steps

    d2s.seed(0)
    model = converted(BiLSTMClassifier(
        **config, pooling_type=None if args.pooling == "final" else args.pooling))
    optimizer = d2s.optimizer.Adam(learning_rate=5e-3, parameters=model.parameters())
    rng = np.random.default_rng(0)
    losses, lengths = [], set()
    for _ in range(steps):
        text, seq_len, label = text_batch(rng, 32, 12, config["vocab_size"])
        lengths.add(text.shape[1])
        loss = F.cross_entropy(model(d2s.to_tensor(text), d2s.to_tensor(seq_len)),
                               d2s.to_tensor(label))
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        losses.append(float(loss))
    traces = len(model.forward.program_cache)
    print(f"trained {steps} steps: loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
          f"{len(lengths)} padded lengths, {traces} trace")

    model.eval()
    text, seq_len, label = text_batch(np.random.default_rng(1), 512, 12, config["vocab_size"])
    logits = model(d2s.to_tensor(text), d2s.to_tensor(seq_len))
    accuracy = float((logits.argmax(-1).numpy() == label[:, 0]).mean())
    print(f"accuracy {accuracy:.2f}")
    return 0 if args.quick or losses[-1] < losses[0] else 1


if __name__ == "__main__":
    raise SystemExit(main())
