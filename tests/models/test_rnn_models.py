"""examples/seq2seq_attention.py and examples/bilstm_classifier.py: recurrent models over
sequences of different lengths train converted as eager (dropout on), decode and
evaluate as eager, and run saved in a fresh process; one program serves every length."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from dy2stat.nn import functional as F
from tests.models.helpers import (
    assert_trains_as_eager,
    example,
    outputs_after_load_elsewhere,
    train,
)

S = example("seq2seq_attention")
B = example("bilstm_classifier")
S_CONFIG, B_CONFIG = S.CONFIGS["small"], B.CONFIGS["small"]


def reversal(step, batch=8, length=6):
    return S.reversal_batch(np.random.default_rng(step), batch, length, 16)


def seq2seq_loss(model, step):
    src, src_len, trg_in, trg_out, trg_len = map(d2s.to_tensor, reversal(step, length=4 + step))
    return S.masked_loss(model(src, src_len, trg_in), trg_out, trg_len)


def test_seq2seq_trains_as_eager_for_every_length():
    _, converted = assert_trains_as_eager(lambda: S.Seq2SeqAttention(**S_CONFIG),
                                          seq2seq_loss, S.converted)
    assert len(converted.forward.program_cache) == 1
    whiles = [op.type for op in converted.forward.main_program.global_block().ops]
    assert whiles.count("while") == 3  # two encoder layers and the decoder's steps


def eagerly(function, *args):
    jit.enable_to_static(False)
    try:
        return function(*args)
    finally:
        jit.enable_to_static(True)


@pytest.fixture(scope="module")
def seq2seq():
    *_, model = train(lambda: S.Seq2SeqAttention(**S_CONFIG), seq2seq_loss, S.converted,
                      steps=30, lr=5e-3)
    model.eval()
    return model


def test_seq2seq_greedy_decoding_converted_gives_eager_tokens(seq2seq):
    for step, length in ((50, 6), (51, 3)):
        src, src_len, *_ = map(d2s.to_tensor, reversal(step, batch=5, length=length))
        with d2s.no_grad():
            tokens = seq2seq.greedy_search(src, src_len).numpy()
            np.testing.assert_array_equal(tokens, eagerly(seq2seq.greedy_search, src,
                                                          src_len).numpy())
        assert tokens.shape[1] <= length + 4
    assert len(seq2seq.greedy_search.program_cache) == 1


def test_seq2seq_runs_saved_elsewhere(seq2seq, tmp_path):
    src, src_len, trg_in, *_ = reversal(52, batch=3)
    expected = seq2seq(*map(d2s.to_tensor, (src, src_len, trg_in))).numpy()
    (loaded,) = outputs_after_load_elsewhere(seq2seq, None, [src, src_len, trg_in], tmp_path)
    np.testing.assert_array_equal(loaded, expected)


def text(step, batch=16):
    return B.text_batch(np.random.default_rng(step), batch, 12, B_CONFIG["vocab_size"])


def classification_loss(model, step):
    words, lengths, labels = map(d2s.to_tensor, text(step))
    return F.cross_entropy(model(words, lengths), labels)


@pytest.mark.parametrize("pooling", [None, "mean", "max"])
def test_bilstm_trains_evaluates_and_loads_as_eager(pooling, tmp_path):
    eager, converted = assert_trains_as_eager(
        lambda: B.BiLSTMClassifier(**B_CONFIG, lstm_layers=2, dropout_rate=0.2,
                                   pooling_type=pooling),
        classification_loss, B.converted, steps=4)
    assert len(converted.forward.program_cache) == 1  # the padded lengths differ
    eager.eval()
    converted.eval()
    words, lengths, _ = text(99, batch=5)
    expected = eager(d2s.to_tensor(words), d2s.to_tensor(lengths)).numpy()
    np.testing.assert_array_equal(
        converted(d2s.to_tensor(words), d2s.to_tensor(lengths)).numpy(), expected)
    (loaded,) = outputs_after_load_elsewhere(converted, None, [words, lengths], tmp_path)
    np.testing.assert_array_equal(loaded, expected)


def test_bilstm_ignores_what_lies_past_each_length():
    d2s.seed(0)
    model = B.BiLSTMClassifier(**B_CONFIG, pooling_type="mean")
    model.eval()
    words, lengths, _ = text(7, batch=4)
    noisy = words.copy()
    for i, n in enumerate(lengths):
        noisy[i, n:] = 5  # words where padding was, past each sequence's end
    net = B.converted(model)
    clean = net(d2s.to_tensor(words), d2s.to_tensor(lengths)).numpy()
    np.testing.assert_array_equal(net(d2s.to_tensor(noisy), d2s.to_tensor(lengths)).numpy(),
                                  clean)
