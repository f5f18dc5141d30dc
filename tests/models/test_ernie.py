"""examples/ernie.py: the ERNIE encoder with its masked-LM and sentence heads, and with
a classification head, trains converted as eager (dropout on), evaluates as eager, and
runs saved in a fresh process."""

import numpy as np

import dy2stat as d2s
from dy2stat.nn import functional as F
from tests.models.helpers import (
    assert_equal_outputs,
    assert_trains_as_eager,
    example,
    outputs_after_load_elsewhere,
)

E = example("ernie")
CONFIG = E.CONFIGS["small"]
VOCAB = CONFIG["vocab_size"]


def batch(step, size=16):
    return E.pair_batch(np.random.default_rng(step), size, 16, VOCAB)


def pretraining_loss(model, step):
    ids, types, positions, masked, labels = map(d2s.to_tensor, batch(step))
    mlm_logits, nsp_logits = model(ids, types, positions)
    return E.pretraining_loss(mlm_logits, masked, nsp_logits, labels)


def test_pretraining_trains_as_eager_and_evaluates_as_eager(tmp_path):
    eager, converted = assert_trains_as_eager(
        lambda: E.ErnieForPretraining(E.ErnieModel(**CONFIG)), pretraining_loss, E.converted)
    assert len(converted.forward.program_cache) == 1  # every count of masked tokens
    eager.eval()
    converted.eval()
    ids, types, positions, _, _ = batch(100, size=5)
    expected = eager(*map(d2s.to_tensor, (ids, types, positions)))
    assert_equal_outputs(converted(*map(d2s.to_tensor, (ids, types, positions))), expected)
    loaded = outputs_after_load_elsewhere(converted, None, [ids, types, positions], tmp_path)
    assert_equal_outputs(loaded, expected)


def classification_loss(model, step):
    ids, types, _, _, labels = map(d2s.to_tensor, batch(step))
    return F.cross_entropy(model(ids, types), labels)


def test_classifier_trains_as_eager_and_runs_saved_elsewhere(tmp_path):
    eager, converted = assert_trains_as_eager(
        lambda: E.ErnieForSequenceClassification(E.ErnieModel(**CONFIG), num_classes=2),
        classification_loss, E.converted)
    eager.eval()
    converted.eval()
    ids, types, *_ = batch(101, size=7)
    expected = eager(d2s.to_tensor(ids), d2s.to_tensor(types)).numpy()
    np.testing.assert_array_equal(converted(d2s.to_tensor(ids), d2s.to_tensor(types)).numpy(),
                                  expected)
    (loaded,) = outputs_after_load_elsewhere(converted, None, [ids, types], tmp_path)
    np.testing.assert_array_equal(loaded, expected)


def test_padding_is_masked_and_the_lm_head_shares_the_embeddings():
    d2s.seed(0)
    model = E.ErnieForPretraining(E.ErnieModel(**CONFIG))
    model.eval()
    assert model.predictions.decoder_weight is model.ernie.embeddings.word_embeddings.weight
    ids, types, *_ = batch(5, size=2)
    ids[:, -1] = E.PAD  # make room for a token after the last real one
    padded = ids.copy()
    padded[:, -1] = 7  # a token where padding was: visible only if padding is not masked
    sequence, _ = model.ernie(d2s.to_tensor(ids), d2s.to_tensor(types))
    visible, _ = model.ernie(d2s.to_tensor(padded), d2s.to_tensor(types))
    real = ids != E.PAD
    assert not np.allclose(sequence.numpy()[real], visible.numpy()[real])
    attention_mask = d2s.to_tensor(((ids == E.PAD) * -1e4).astype("float32")[:, None, None])
    masked, _ = model.ernie(d2s.to_tensor(padded), d2s.to_tensor(types),
                            attention_mask=attention_mask)
    np.testing.assert_array_equal(masked.numpy()[real], sequence.numpy()[real])
