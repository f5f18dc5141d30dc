"""examples/transformer.py: the Transformer trains converted as eager, its greedy and
beam-search decoders (a tensor ``while`` with a tensor ``break``, converted whole)
give eager's tokens and scores, and the saved model and decoder run elsewhere."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import jit
from dy2stat.static import InputSpec
from tests.models.helpers import (
    assert_equal_outputs,
    assert_trains_as_eager,
    example,
    outputs_after_load_elsewhere,
    train,
)

T = example("transformer")
CONFIG = T.CONFIGS["small"]
VOCAB = CONFIG["vocab_size"]
TOKENS = InputSpec([None, None], "int64")


def make():
    return T.TransformerModel(**CONFIG)


def reversal_loss(model, step):
    src, trg_in, trg = (d2s.to_tensor(a) for a in T.reversal_batch(
        np.random.default_rng(step), 16, 6, VOCAB))
    return T.label_smoothed_loss(model(src, trg_in), trg)


def test_trains_as_eager_with_dropout():
    assert_trains_as_eager(make, reversal_loss, T.converted)


def eagerly(function, *args):
    jit.enable_to_static(False)
    try:
        return function(*args)
    finally:
        jit.enable_to_static(True)


@pytest.fixture(scope="module")
def trained():
    """40 steps: the greedy decoder then ends its sequences at different steps, and one
    of the test batch never emits EOS (decoding runs to the limit for it)."""
    *_, model = train(make, reversal_loss, T.converted, steps=40, lr=3e-3)
    model.eval()
    return model


def first_eos(tokens):
    """The step at which each sequence first emits EOS (the last step if never)."""
    ended = tokens == T.EOS
    return np.where(ended.any(-1), ended.argmax(-1), tokens.shape[-1] - 1)


SOURCES = [T.reversal_batch(np.random.default_rng(1), 6, 6, VOCAB)[0],
           T.reversal_batch(np.random.default_rng(2), 3, 4, VOCAB)[0]]


# steps (greedy, beam): with EOS always likeliest, greedy decoding stops after one
# step; the beams other than the best take the next tokens first, so two.
@pytest.mark.parametrize("eos_bias, steps", [(0.0, None), (100.0, (1, 2)),
                                             (-100.0, "limit")],
                         ids=["trained", "EOS at once", "never EOS"])
def test_decoders_converted_whole_give_eager_tokens_and_scores(trained, eos_bias, steps):
    bias = trained.project.bias
    saved = bias.numpy().copy()
    shifted = saved.copy()
    shifted[T.EOS] += eos_bias
    bias.set_value(shifted)
    try:
        with d2s.no_grad():
            for src in map(d2s.to_tensor, SOURCES):
                greedy, beams = trained.greedy_search(src), trained.beam_search(src)
                assert_equal_outputs(greedy, eagerly(trained.greedy_search, src))
                assert_equal_outputs(beams, eagerly(trained.beam_search, src))
                limit = src.shape[1] + 4
                done = first_eos(greedy[0].numpy())
                if steps is None:  # the loop breaks when the last sequence ends
                    assert greedy[0].shape[1] == done.max() + 1
                    assert len(set(done.tolist())) > 1
                else:
                    expected = (limit, limit) if steps == "limit" else steps
                    assert (greedy[0].shape[1], beams[0].shape[2]) == expected
    finally:
        bias.set_value(saved)
    # one program for every batch and source length: the decoding loop is a while op
    # (and beam search's gather_tree walks back in another)
    for decoder, whiles in ((trained.greedy_search, 1), (trained.beam_search, 2)):
        assert len(decoder.program_cache) == 1
        ops = [op.type for op in decoder.main_program.global_block().ops]
        assert ops.count("while") == whiles


def test_beam_search_keeps_the_best_beams_first(trained):
    with d2s.no_grad():
        tokens, scores = trained.beam_search(d2s.to_tensor(SOURCES[0]), beam_size=4)
    scores = scores.numpy()
    assert tokens.shape[:2] == [6, 4] and np.all(np.diff(scores, axis=1) <= 0)
    # each beam's score is the sum of its tokens' log-probabilities up to its EOS
    assert np.all(scores < 0) and np.all(scores > -1e8)
    # the back-traced beams: a beam that has emitted EOS emits only EOS after it
    tokens = tokens.numpy()
    ended = np.maximum.accumulate(tokens == T.EOS, axis=-1)
    assert np.all(tokens[ended] == T.EOS) and ended[..., -1].any()


def test_saved_model_and_beam_search_run_in_a_fresh_process(trained, tmp_path):
    src, trg_in, _ = T.reversal_batch(np.random.default_rng(3), 5, 6, VOCAB)
    expected = trained(d2s.to_tensor(src), d2s.to_tensor(trg_in)).numpy()
    (logits,) = outputs_after_load_elsewhere(trained, [TOKENS, TOKENS], [src, trg_in],
                                             tmp_path / "forward")
    np.testing.assert_array_equal(logits, expected)
    with d2s.no_grad():
        tokens, scores = trained.beam_search(d2s.to_tensor(src))
    loaded = outputs_after_load_elsewhere(trained.beam_search, [TOKENS], [src],
                                          tmp_path / "beam")
    assert_equal_outputs(loaded, [tokens.numpy(), scores.numpy()])
