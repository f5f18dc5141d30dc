"""An ERNIE/BERT-style encoder with a masked-language-model head and a classification
head, trained converted with `to_static`.

    python examples/ernie.py [--steps 150] [--quick] [--base]

The encoder is ERNIE 1.0's (as in PaddleNLP): word, position and token-type
embeddings summed and layer-normalized, an attention mask hiding the padding,
`nn.TransformerEncoder` layers, and a pooler (Linear + tanh on the first token).
The pretraining model predicts the tokens at the masked positions (the output
layer shares the word embeddings) and a sentence-level label from the pooled
output; the classification model puts a dropout and a Linear on the pooler.
The toy data: two segments that count up from random words; the model fills in
masked words and says whether most words lie in the upper half of the vocabulary.
"""

from __future__ import annotations

import argparse

import numpy as np

import dy2stat as d2s
from dy2stat import nn
from dy2stat.nn import functional as F
from dy2stat.nn.initializer import TruncatedNormal
from dy2stat.static import InputSpec

PAD, CLS, SEP, MASK = 0, 1, 2, 3

# "small" trains in seconds (tests); "base" is ERNIE 1.0 base (benchmarks)
CONFIGS = {
    "small": dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64),
    "base": dict(vocab_size=18000, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, max_position_embeddings=513),
}


class ErnieEmbeddings(nn.Layer):
    """Word + position + token-type embeddings, layer norm, dropout."""

    def __init__(self, vocab_size: int, hidden_size: int, hidden_dropout_prob: float,
                 max_position_embeddings: int, type_vocab_size: int, initializer):
        super().__init__()
        attr = d2s.ParamAttr(initializer=initializer)
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD,
                                            weight_attr=attr)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size,
                                                weight_attr=attr)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size,
                                                  weight_attr=attr)
        self.layer_norm = nn.LayerNorm(hidden_size)
        self.dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        if position_ids is None:
            ones = d2s.ones_like(input_ids)
            position_ids = d2s.cumsum(ones, axis=-1) - ones  # 0, 1, 2, ... in each row
        if token_type_ids is None:
            token_type_ids = d2s.zeros_like(input_ids)
        embeddings = (self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
                      + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.layer_norm(embeddings))


class ErniePooler(nn.Layer):
    """tanh(Linear) of the first token's hidden state."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class ErnieModel(nn.Layer):
    """The encoder: ``forward(input_ids, token_type_ids=None, position_ids=None,
    attention_mask=None)`` returns the hidden states [batch, seq, hidden] and the pooled
    output [batch, hidden]. Without a mask, padding tokens are hidden."""

    def __init__(self, vocab_size: int, hidden_size: int = 768, num_hidden_layers: int = 12,
                 num_attention_heads: int = 12, intermediate_size: int = 3072,
                 hidden_act: str = "relu", hidden_dropout_prob: float = 0.1,
                 attention_probs_dropout_prob: float = 0.1,
                 max_position_embeddings: int = 513, type_vocab_size: int = 2,
                 initializer_range: float = 0.02):
        super().__init__()
        initializer = TruncatedNormal(std=initializer_range)
        self.embeddings = ErnieEmbeddings(vocab_size, hidden_size, hidden_dropout_prob,
                                          max_position_embeddings, type_vocab_size, initializer)
        layer = nn.TransformerEncoderLayer(
            hidden_size, num_attention_heads, intermediate_size, dropout=hidden_dropout_prob,
            activation=hidden_act, attn_dropout=attention_probs_dropout_prob, act_dropout=0,
            weight_attr=d2s.ParamAttr(initializer=initializer))
        self.encoder = nn.TransformerEncoder(layer, num_hidden_layers)
        self.pooler = ErniePooler(hidden_size)

    def forward(self, input_ids, token_type_ids=None, position_ids=None, attention_mask=None):
        if attention_mask is None:
            # [batch, 1, 1, seq]: -1e4 on padding, added to every head's scores
            padding = (input_ids == PAD).astype(self.pooler.dense.weight.dtype)
            attention_mask = (padding * -1e4).unsqueeze([1, 2])
        embedded = self.embeddings(input_ids, token_type_ids, position_ids)
        sequence_output = self.encoder(embedded, attention_mask)
        return sequence_output, self.pooler(sequence_output)


class ErnieLMPredictionHead(nn.Layer):
    """Linear + activation + layer norm, then logits over the vocabulary from the word
    embeddings (shared weights) and a bias; only at ``masked_positions`` (indices into
    the flattened [batch * seq] tokens) when given."""

    def __init__(self, hidden_size: int, vocab_size: int, activation: str, embedding_weights):
        super().__init__()
        self.transform = nn.Linear(hidden_size, hidden_size)
        self.activation = getattr(F, activation)
        self.layer_norm = nn.LayerNorm(hidden_size)
        self.decoder_weight = embedding_weights  # [vocab, hidden], shared
        self.decoder_bias = self.create_parameter([vocab_size], is_bias=True)

    def forward(self, hidden_states, masked_positions=None):
        if masked_positions is not None:
            hidden_states = hidden_states.reshape([-1, hidden_states.shape[-1]])
            hidden_states = d2s.gather(hidden_states, masked_positions)
        hidden_states = self.layer_norm(self.activation(self.transform(hidden_states)))
        return d2s.matmul(hidden_states, self.decoder_weight, transpose_y=True) + \
            self.decoder_bias


class ErnieForPretraining(nn.Layer):
    """The encoder with a masked-LM head and a sentence-level head (two classes from
    the pooled output). ``forward(input_ids, token_type_ids, masked_positions)`` returns
    (masked-token logits [masked, vocab], sentence logits [batch, 2])."""

    def __init__(self, ernie: ErnieModel, hidden_act: str = "relu"):
        super().__init__()
        self.ernie = ernie
        hidden = ernie.pooler.dense.weight.shape[0]
        weights = ernie.embeddings.word_embeddings.weight
        self.predictions = ErnieLMPredictionHead(hidden, weights.shape[0], hidden_act, weights)
        self.seq_relationship = nn.Linear(hidden, 2)

    def forward(self, input_ids, token_type_ids=None, masked_positions=None):
        sequence_output, pooled_output = self.ernie(input_ids, token_type_ids)
        return (self.predictions(sequence_output, masked_positions),
                self.seq_relationship(pooled_output))


class ErnieForSequenceClassification(nn.Layer):
    """The encoder, dropout and a Linear on the pooled output: ``forward(input_ids,
    token_type_ids=None)`` returns logits [batch, num_classes]."""

    def __init__(self, ernie: ErnieModel, num_classes: int = 2, dropout: float = 0.1):
        super().__init__()
        self.ernie = ernie
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(ernie.pooler.dense.weight.shape[0], num_classes)

    def forward(self, input_ids, token_type_ids=None):
        _, pooled_output = self.ernie(input_ids, token_type_ids)
        return self.classifier(self.dropout(pooled_output))


def pretraining_loss(mlm_logits, masked_labels, nsp_logits, nsp_labels):
    """Mean cross entropy of the masked tokens plus that of the sentence labels."""
    return F.cross_entropy(mlm_logits, masked_labels) + F.cross_entropy(nsp_logits, nsp_labels)


def pair_batch(rng, batch: int, length: int, vocab: int, mask_rate: float = 0.15):
    """[CLS] a [SEP] b [SEP] with padding, where a and b count up (cyclically) from random
    words; the label says whether most words lie in the upper half of the vocabulary.
    Some words are replaced by [MASK]. Returns input_ids, token_type_ids,
    masked_positions (into the flattened tokens), masked_labels [m, 1], labels [batch, 1]."""
    words = vocab - MASK - 1  # the words are MASK + 1 ... vocab - 1
    half = (length - 3) // 2
    ids = np.full((batch, length), PAD, "int64")
    types = np.zeros((batch, length), "int64")
    for i in range(batch):
        n = int(rng.integers(2, half + 1))
        a, b = ((rng.integers(words) + np.arange(n)) % words + MASK + 1 for _ in range(2))
        row = np.concatenate([[CLS], a, [SEP], b, [SEP]])
        ids[i, :len(row)] = row
        types[i, n + 2:len(row)] = 1
    is_word = ids > MASK
    upper = (ids > MASK + words // 2).sum(1, keepdims=True)
    labels = (2 * upper > is_word.sum(1, keepdims=True)).astype("int64")
    chosen = is_word & (rng.random(ids.shape) < mask_rate)
    chosen[0, 1] = True  # at least one masked word
    positions = np.flatnonzero(chosen)
    masked_labels = ids.reshape(-1)[positions].reshape(-1, 1)
    ids[chosen] = MASK
    return ids, types, positions.astype("int64"), masked_labels, labels


def converted(model):
    """``model`` converted, tokens of any batch and length (the masked positions of any
    count for pretraining)."""
    tokens = InputSpec([None, None], "int64")
    spec = [tokens, tokens]
    if isinstance(model, ErnieForPretraining):
        spec.append(InputSpec([None], "int64"))
    return d2s.jit.to_static(model, input_spec=spec)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150, help="training steps")
    parser.add_argument("--quick", action="store_true", help="a few steps, for the tests")
    parser.add_argument("--base", action="store_true", help="ERNIE base (slow on a CPU)")
    args = parser.parse_args(argv)
    config = CONFIGS["base" if args.base else "small"]
    steps = 8 if args.quick else args.steps
    vocab = config["vocab_size"]

    d2s.seed(0)
    model = converted(ErnieForPretraining(ErnieModel(**config)))
    optimizer = d2s.optimizer.AdamW(learning_rate=5e-3, parameters=model.parameters())
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        ids, types, positions, masked, labels = (
            d2s.to_tensor(a) for a in pair_batch(rng, 32, 16, vocab))
        mlm_logits, nsp_logits = model(ids, types, positions)
        loss = pretraining_loss(mlm_logits, masked, nsp_logits, labels)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        losses.append(float(loss))
    print(f"pretraining, {steps} steps: loss {losses[0]:.3f} -> {losses[-1]:.3f}")

    classifier = converted(ErnieForSequenceClassification(model.ernie))
    optimizer = d2s.optimizer.AdamW(learning_rate=1e-3, parameters=classifier.parameters())
    for _ in range(steps // 2):
        ids, types, _, _, labels = (d2s.to_tensor(a) for a in pair_batch(rng, 32, 16, vocab))
        loss = F.cross_entropy(classifier(ids, types), labels)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
    classifier.eval()
    ids, types, _, _, labels = pair_batch(rng, 256, 16, vocab)
    predicted = classifier(d2s.to_tensor(ids), d2s.to_tensor(types)).argmax(-1).numpy()
    accuracy = float((predicted == labels[:, 0]).mean())
    ops = {op.type for op in classifier.forward.main_program.all_ops()}
    print(f"fine-tuned classifier accuracy {accuracy:.2f}; converted program has "
          f"{len(ops)} op types, layer_norm: {'layer_norm' in ops}")
    return 0 if args.quick or losses[-1] < losses[0] else 1


if __name__ == "__main__":
    raise SystemExit(main())
