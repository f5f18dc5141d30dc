"""MultiHeadAttention and the Transformer layers against a NumPy reference (Paddle's
math), with masks, caches and both norm placements; gradients against finite
differences; converted code (unknown batch and length) against eager."""

import numpy as np
import pytest

import dy2stat as d2s
from dy2stat import nn
from dy2stat.static import InputSpec
from tests.nn.helpers import (
    check_converted,
    check_param_grads,
    double,
    params_np,
    randn,
    softmax,
    tensor,
)

D, HEADS, FF = 4, 2, 6


def layer_norm_ref(x, w, b, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


def mha_ref(p, prefix, q, k, v, mask=None, heads=HEADS):
    def proj(x, name):
        return x @ p[f"{prefix}{name}.weight"] + p[f"{prefix}{name}.bias"]

    def split(x):
        b, n, e = x.shape
        return x.reshape(b, n, heads, e // heads).transpose(0, 2, 1, 3)

    qh, kh, vh = split(proj(q, "q_proj")), split(proj(k, "k_proj")), split(proj(v, "v_proj"))
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(qh.shape[-1])
    if mask is not None:
        scores = scores + mask
    out = (softmax(scores) @ vh).transpose(0, 2, 1, 3)
    return proj(out.reshape(out.shape[0], out.shape[1], -1), "out_proj"), softmax(scores)


def ffn_ref(p, prefix, x):
    hidden = np.maximum(x @ p[f"{prefix}linear1.weight"] + p[f"{prefix}linear1.bias"], 0)
    return hidden @ p[f"{prefix}linear2.weight"] + p[f"{prefix}linear2.bias"]


def _norm(p, prefix, name, x):
    return layer_norm_ref(x, p[f"{prefix}{name}.weight"], p[f"{prefix}{name}.bias"])


def encoder_layer_ref(p, x, mask=None, pre=False, prefix=""):
    def block(x, name, fn):
        inner = _norm(p, prefix, name, x) if pre else x
        out = x + fn(inner)
        return out if pre else _norm(p, prefix, name, out)

    x = block(x, "norm1", lambda y: mha_ref(p, prefix + "self_attn.", y, y, y, mask)[0])
    return block(x, "norm2", lambda y: ffn_ref(p, prefix, y))


def decoder_layer_ref(p, x, memory, tgt_mask=None, memory_mask=None, pre=False, prefix=""):
    def block(x, name, fn):
        inner = _norm(p, prefix, name, x) if pre else x
        out = x + fn(inner)
        return out if pre else _norm(p, prefix, name, out)

    x = block(x, "norm1", lambda y: mha_ref(p, prefix + "self_attn.", y, y, y, tgt_mask)[0])
    x = block(x, "norm2", lambda y: mha_ref(p, prefix + "cross_attn.", y, memory, memory,
                                           memory_mask)[0])
    return block(x, "norm3", lambda y: ffn_ref(p, prefix, y))


def _randomize(layer):
    """Non-trivial norms and biases (they start at ones and zeros)."""
    for _, param in layer.named_parameters():
        param.set_value(randn(*param.shape) * 0.5)
    return layer


def causal(n):
    return np.triu(np.full((n, n), -np.inf), 1)


# -------------------------------------------------------- MultiHeadAttention
def test_attention_matches_numpy_with_masks_and_weights():
    mha = _randomize(double(nn.MultiHeadAttention(D, HEADS, kdim=3, vdim=5, need_weights=True)))
    q, k, v = randn(2, 3, D), randn(2, 4, 3), randn(2, 4, 5)
    p = params_np(mha)
    out, weights = mha(tensor(q), tensor(k), tensor(v))
    ref_out, ref_w = mha_ref(p, "", q, k, v)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.numpy(), ref_w, rtol=1e-10, atol=1e-12)
    keep = np.array([[True, True, False, True], [True, False, False, True]])[:, None, None, :]
    out_bool, _ = mha(tensor(q), tensor(k), tensor(v), attn_mask=tensor(keep))
    additive = (keep.astype("float64") - 1) * 1e9
    np.testing.assert_allclose(out_bool.numpy(), mha_ref(p, "", q, k, v, additive)[0],
                               rtol=1e-10, atol=1e-12)
    out_int, _ = mha(tensor(q), tensor(k), tensor(v), attn_mask=tensor(keep.astype("int64")))
    np.testing.assert_allclose(out_int.numpy(), out_bool.numpy(), rtol=1e-12)
    float_mask = randn(3, 4)
    out_float, _ = mha(tensor(q), tensor(k), tensor(v), attn_mask=tensor(float_mask))
    np.testing.assert_allclose(out_float.numpy(), mha_ref(p, "", q, k, v, float_mask)[0],
                               rtol=1e-10, atol=1e-12)


def test_self_attention_defaults_and_gradients():
    mha = double(nn.MultiHeadAttention(D, HEADS))
    x = randn(2, 3, D)
    np.testing.assert_allclose(mha(tensor(x)).numpy(),
                               mha_ref(params_np(mha), "", x, x, x)[0], rtol=1e-10, atol=1e-12)
    check_param_grads(mha, tensor(x))
    with pytest.raises(ValueError, match="multiple"):
        nn.MultiHeadAttention(5, 2)


def test_attention_caches_decode_as_the_full_causal_pass():
    mha = _randomize(double(nn.MultiHeadAttention(D, HEADS)))
    x = randn(2, 4, D)
    full = mha(tensor(x), attn_mask=tensor(causal(4))).numpy()
    cache = mha.gen_cache(tensor(x))
    assert cache.k.shape == [2, HEADS, 0, D // HEADS]
    steps = []
    for t in range(4):
        step = tensor(x[:, t:t + 1])
        out, cache = mha(step, step, step, cache=cache)
        steps.append(out.numpy())
    assert cache.k.shape == [2, HEADS, 4, D // HEADS]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-10, atol=1e-12)
    memory = randn(2, 5, D)
    static = mha.gen_cache(tensor(memory), type=nn.MultiHeadAttention.StaticCache)
    out, same = mha(tensor(x), cache=static)
    assert same is static
    np.testing.assert_allclose(out.numpy(), mha(tensor(x), tensor(memory), tensor(memory))
                               .numpy(), rtol=1e-12)


# --------------------------------------------------------- encoder / decoder
@pytest.mark.parametrize("pre", [False, True])
def test_encoder_layer(pre):
    layer = _randomize(double(nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0,
                                                         normalize_before=pre)))
    x = randn(2, 3, D)
    mask = causal(3)
    np.testing.assert_allclose(layer(tensor(x), tensor(mask)).numpy(),
                               encoder_layer_ref(params_np(layer), x, mask, pre), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("pre", [False, True])
def test_decoder_layer(pre):
    layer = _randomize(double(nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0,
                                                         normalize_before=pre)))
    x, memory = randn(2, 3, D), randn(2, 4, D)
    keep = np.array([[1, 1, 1, 0], [1, 1, 0, 0]])[:, None, None, :]
    out = layer(tensor(x), tensor(memory), tensor(causal(3)), tensor(keep))
    ref = decoder_layer_ref(params_np(layer), x, memory, causal(3), (keep - 1.0) * 1e9, pre)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)


def test_layer_gradients():
    enc = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, normalize_before=True)
    check_param_grads(enc, tensor(randn(2, 3, D)), rtol=1e-5, atol=1e-7)
    dec = nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0)
    check_param_grads(dec, tensor(randn(1, 2, D)), tensor(randn(1, 3, D)), rtol=1e-5,
                      atol=1e-7)


def test_stacks_build_fresh_layers_and_apply_the_norm():
    first = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, activation="gelu")
    encoder = double(nn.TransformerEncoder(first, 3, nn.LayerNorm(D)))
    assert encoder.layers[0] is first and len(encoder.layers) == 3
    assert encoder.layers[1] is not first
    assert not np.array_equal(encoder.layers[1].linear1.weight.numpy(),
                              first.linear1.weight.numpy())
    assert encoder.layers[2].activation is nn.functional.gelu
    names = [n for n, _ in encoder.named_parameters()]
    assert "layers.2.self_attn.q_proj.weight" in names and "norm.weight" in names
    x = tensor(randn(2, 3, D))
    y = x
    for layer in encoder.layers:
        y = layer(y)
    np.testing.assert_allclose(encoder(x).numpy(), encoder.norm(y).numpy(), rtol=1e-12)


def test_decoder_stack_caches_decode_as_the_full_pass():
    layer = nn.TransformerDecoderLayer(D, HEADS, FF, dropout=0.0)
    decoder = double(nn.TransformerDecoder(layer, 2, nn.LayerNorm(D)))
    tgt, memory = randn(2, 3, D), randn(2, 4, D)
    full = decoder(tensor(tgt), tensor(memory), tgt_mask=tensor(causal(3))).numpy()
    cache = decoder.gen_cache(tensor(memory))
    steps = []
    for t in range(3):
        out, cache = decoder(tensor(tgt[:, t:t + 1]), tensor(memory), cache=cache)
        steps.append(out.numpy())
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-10, atol=1e-12)
    zipped = decoder.gen_cache(tensor(memory), do_zip=True)
    assert len(zipped) == 2 and len(zipped[0]) == 2


def test_transformer():
    model = double(nn.Transformer(D, HEADS, 2, 1, FF, dropout=0.0))
    src, tgt = randn(2, 5, D), randn(2, 3, D)
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    np.testing.assert_allclose(mask.numpy(), causal(3))
    out = model(tensor(src), tensor(tgt), tgt_mask=mask)
    memory = model.encoder(tensor(src))
    np.testing.assert_allclose(out.numpy(), model.decoder(tensor(tgt), memory, mask).numpy(),
                               rtol=1e-12)
    assert out.shape == [2, 3, D]
    assert len(model.encoder.layers) == 2 and len(model.decoder.layers) == 1


def test_parameter_attrs_per_sublayer():
    no_bias = nn.TransformerEncoderLayer(D, HEADS, FF, bias_attr=[False, None])
    assert no_bias.self_attn.q_proj.bias is None and no_bias.linear1.bias is not None
    model = nn.Transformer(D, HEADS, 1, 1, FF, bias_attr=[None, False, None])
    assert model.decoder.layers[0].cross_attn.k_proj.bias is None
    assert model.decoder.layers[0].self_attn.k_proj.bias is not None
    assert model.encoder.layers[0].linear1.bias is not None
    with pytest.raises(ValueError, match="parameter attributes"):
        nn.TransformerEncoderLayer(D, HEADS, FF, bias_attr=[None, None, None])


def test_dropout_only_while_training():
    d2s.seed(0)
    layer = double(nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.5))
    x = tensor(randn(2, 3, D))
    layer.eval()
    np.testing.assert_allclose(layer(x).numpy(), encoder_layer_ref(params_np(layer),
                                                                   x.numpy()), rtol=1e-10)
    layer.train()
    assert not np.allclose(layer(x).numpy(), layer.eval()(x).numpy())


def test_converted_layers_match_eager_with_unknown_batch_and_length():
    enc = _randomize(double(nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0)))
    check_converted(lambda x, m: enc(x, m), randn(2, 3, D), causal(3),
                    params=enc.parameters(),
                    input_spec=[InputSpec([None, None, D], "float64"),
                                InputSpec([None, None], "float64")])
    model = _randomize(double(nn.Transformer(D, HEADS, 1, 1, FF, dropout=0.0,
                                             normalize_before=True)))
    keep = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])[:, None, None, :].astype(bool)
    check_converted(lambda s, t, k: model(s, t, src_mask=k, memory_mask=k), randn(2, 5, D),
                    randn(2, 3, D), keep, params=model.parameters(),
                    input_spec=[InputSpec([None, None, D], "float64"),
                                InputSpec([None, None, D], "float64"),
                                InputSpec([None, 1, 1, None], "bool")])


def test_converted_incremental_decoding_step():
    mha = _randomize(double(nn.MultiHeadAttention(D, HEADS)))
    past = randn(2, HEADS, 3, D // HEADS)

    def step(x, k, v):
        out, cache = mha(x, cache=nn.MultiHeadAttention.Cache(k, v))
        return out, cache.k

    check_converted(step, randn(2, 1, D), past, past * 0.5, params=mha.parameters(),
                    input_spec=[InputSpec([None, 1, D], "float64"),
                                InputSpec([None, HEADS, None, D // HEADS], "float64"),
                                InputSpec([None, HEADS, None, D // HEADS], "float64")])
