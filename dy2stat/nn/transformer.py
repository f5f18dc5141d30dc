"""Multi-head attention and the Transformer layers (Paddle 2.x's API and math).

Shapes: queries [batch, target_len, embed_dim], keys and values [batch, source_len,
kdim / vdim]. An attention mask broadcasts to [batch, num_heads, target_len,
source_len]: a float mask is added to the attention scores (-inf or a large negative
value hides a position); a bool or int mask keeps the positions where it is True / 1
(the others get -1e9 added, as in Paddle).

Decoding reuses work through caches: ``MultiHeadAttention.Cache`` holds the keys and
values of the steps so far (self-attention; each call appends the new step's),
``StaticCache`` the projected keys and values of a fixed memory (cross-attention).
"""

from __future__ import annotations

import collections

import numpy as np

from dy2stat import creation, ops
from dy2stat.nn import functional as F
from dy2stat.nn.common import Dropout, Linear
from dy2stat.nn.container import LayerList
from dy2stat.nn.functional.common import batch_zeros
from dy2stat.nn.layer import Layer
from dy2stat.nn.norm import LayerNorm
from dy2stat.runtime import dtypes


def convert_attention_mask(mask, dtype):
    """An additive float mask from a float, bool or int ``mask`` (None stays None)."""
    if mask is None:
        return None
    if mask.dtype == dtypes.bool_ or mask.dtype in dtypes.INTS:
        return ops.scale(ops.cast(mask, dtype), 1e9, -1e9)
    return mask if mask.dtype == dtype else ops.cast(mask, dtype)


def _attr_list(attr, n: int, where: str) -> list:
    """One ParamAttr per sublayer: a list of 1 or ``n`` attrs, or one attr for all."""
    if isinstance(attr, (list, tuple)):
        if len(attr) == 1:
            return list(attr) * n
        if len(attr) != n:
            raise ValueError(f"{where}: expected 1 or {n} parameter attributes, got {len(attr)}")
        return list(attr)
    return [attr] * n


def _split_attrs(attr):
    """(encoder layer attrs, decoder layer attrs) from a Transformer's attr: a list of 1,
    2 (attention, feed-forward) or 3 (self-, cross-attention, feed-forward) attrs, or one
    attr for all (Paddle's rule)."""
    if not isinstance(attr, (list, tuple)):
        return attr, attr
    if len(attr) == 1:
        return [attr[0]] * 2, [attr[0]] * 3
    if len(attr) == 2:
        return list(attr), [attr[0], attr[0], attr[1]]
    if len(attr) == 3:
        return [attr[0], attr[2]], list(attr)
    raise ValueError(f"Transformer: expected 1, 2 or 3 parameter attributes, got {len(attr)}")


class MultiHeadAttention(Layer):
    """Scaled dot-product attention over ``num_heads`` heads of ``embed_dim / num_heads``.

    ``forward(query, key=None, value=None, attn_mask=None, cache=None)``: key and value
    default to the query. Returns the output [batch, target_len, embed_dim]; with
    ``need_weights`` also the attention weights, and with a ``cache`` also the new cache
    (a tuple in that order).
    """

    Cache = collections.namedtuple("Cache", ["k", "v"])
    StaticCache = collections.namedtuple("StaticCache", ["k", "v"])

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, kdim=None,
                 vdim=None, need_weights: bool = False, weight_attr=None, bias_attr=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiHeadAttention: embed_dim {embed_dim} must be a positive "
                             f"multiple of num_heads {num_heads}")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.kdim = int(kdim) if kdim is not None else self.embed_dim
        self.vdim = int(vdim) if vdim is not None else self.embed_dim
        self.head_dim = self.embed_dim // self.num_heads
        self.dropout, self.need_weights = float(dropout), bool(need_weights)
        self.q_proj = Linear(self.embed_dim, self.embed_dim, weight_attr, bias_attr)
        self.k_proj = Linear(self.kdim, self.embed_dim, weight_attr, bias_attr)
        self.v_proj = Linear(self.vdim, self.embed_dim, weight_attr, bias_attr)
        self.out_proj = Linear(self.embed_dim, self.embed_dim, weight_attr, bias_attr)

    def _heads(self, x):
        """[batch, len, embed] -> [batch, heads, len, head_dim]."""
        return ops.transpose(ops.reshape(x, [0, 0, self.num_heads, self.head_dim]),
                             [0, 2, 1, 3])

    def compute_kv(self, key, value):
        """The projected keys and values, split into heads."""
        return self._heads(self.k_proj(key)), self._heads(self.v_proj(value))

    def gen_cache(self, key, value=None, type=Cache):  # noqa: A002  (Paddle's name)
        """A cache for decoding: ``StaticCache`` of the projected ``key``/``value`` (a fixed
        memory); a ``Cache`` holding ``key`` and ``value`` as given; or, with no value, an
        empty ``Cache`` for the batch of ``key``."""
        if type is MultiHeadAttention.StaticCache:
            return self.StaticCache(*self.compute_kv(key, key if value is None else value))
        if value is None:
            empty = batch_zeros(key, [self.num_heads, 0, self.head_dim])
            return self.Cache(empty, empty)
        return self.Cache(key, value)

    def forward(self, query, key=None, value=None, attn_mask=None, cache=None):
        key = query if key is None else key
        value = query if value is None else value
        q = self._heads(self.q_proj(query))
        if isinstance(cache, self.StaticCache):
            k, v = cache.k, cache.v
        else:
            k, v = self.compute_kv(key, value)
            if isinstance(cache, self.Cache):
                k = ops.concat([cache.k, k], axis=2)
                v = ops.concat([cache.v, v], axis=2)
                cache = self.Cache(k, v)
        scores = ops.matmul(ops.scale(q, self.head_dim ** -0.5), k, transpose_y=True)
        mask = convert_attention_mask(attn_mask, scores.dtype)
        if mask is not None:
            scores = ops.add(scores, mask)
        weights = F.softmax(scores)
        if self.dropout:
            weights = F.dropout(weights, self.dropout, training=self.training)
        out = ops.transpose(ops.matmul(weights, v), [0, 2, 1, 3])
        out = self.out_proj(ops.reshape(out, [0, 0, self.embed_dim]))
        outs = [out]
        if self.need_weights:
            outs.append(weights)
        if cache is not None:
            outs.append(cache)
        return out if len(outs) == 1 else tuple(outs)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _activation(name: str):
    fn = getattr(F, name, None)
    if not callable(fn):
        raise ValueError(f"unknown activation {name!r} (use e.g. 'relu' or 'gelu')")
    return fn


class _Block(Layer):
    """What encoder and decoder layers share: their arguments (so a stack can build
    more of the same), the feed-forward part and its dropouts."""

    def _setup(self, config: dict, n_attrs: int):
        self._config = config
        d_model, dropout = config["d_model"], config["dropout"]
        attn_dropout = dropout if config["attn_dropout"] is None else config["attn_dropout"]
        act_dropout = dropout if config["act_dropout"] is None else config["act_dropout"]
        where = type(self).__name__
        weights = _attr_list(config["weight_attr"], n_attrs, where)
        biases = _attr_list(config["bias_attr"], n_attrs, where)
        self.normalize_before = bool(config["normalize_before"])
        self.linear1 = Linear(d_model, config["dim_feedforward"], weights[-1], biases[-1])
        self.dropout = Dropout(act_dropout)
        self.linear2 = Linear(config["dim_feedforward"], d_model, weights[-1], biases[-1])
        self.activation = _activation(config["activation"])
        return attn_dropout, weights, biases

    def _feed_forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))

    def _residual(self, x, sublayer, norm, dropout):
        """``x + dropout(sublayer(x'))``: x' is ``norm(x)`` before (pre-norm) and the sum is
        normalized after (post-norm). ``sublayer`` returns (value, extra)."""
        inner = norm(x) if self.normalize_before else x
        out, extra = sublayer(inner)
        out = ops.add(x, dropout(out))
        return (out if self.normalize_before else norm(out)), extra


class TransformerEncoderLayer(_Block):
    """Self-attention then a feed-forward network, each with a residual connection,
    dropout and layer norm (after each, or before with ``normalize_before``).

    ``forward(src, src_mask=None, cache=None)``; with a cache (from ``gen_cache``)
    returns ``(output, new_cache)``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float = 0.1,
                 activation: str = "relu", attn_dropout=None, act_dropout=None,
                 normalize_before: bool = False, weight_attr=None, bias_attr=None,
                 layer_norm_eps: float = 1e-5):
        super().__init__()
        config = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                      dropout=dropout, activation=activation, attn_dropout=attn_dropout,
                      act_dropout=act_dropout, normalize_before=normalize_before,
                      weight_attr=weight_attr, bias_attr=bias_attr,
                      layer_norm_eps=layer_norm_eps)
        attn_dropout, weights, biases = self._setup(config, 2)
        self.self_attn = MultiHeadAttention(d_model, nhead, attn_dropout,
                                            weight_attr=weights[0], bias_attr=biases[0])
        self.norm1 = LayerNorm(d_model, layer_norm_eps)
        self.norm2 = LayerNorm(d_model, layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)

    def forward(self, src, src_mask=None, cache=None):
        src_mask = convert_attention_mask(src_mask, src.dtype)

        def attend(x):
            if cache is None:
                return self.self_attn(x, x, x, src_mask), None
            return self.self_attn(x, x, x, src_mask, cache)

        src, new_cache = self._residual(src, attend, self.norm1, self.dropout1)
        src, _ = self._residual(src, lambda x: (self._feed_forward(x), None), self.norm2,
                                self.dropout2)
        return src if cache is None else (src, new_cache)

    def gen_cache(self, src):
        """An empty self-attention cache for the batch of ``src``."""
        return self.self_attn.gen_cache(src, type=MultiHeadAttention.Cache)


class TransformerDecoderLayer(_Block):
    """Self-attention, attention over the encoder's memory, then a feed-forward
    network, each with a residual connection, dropout and layer norm.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, cache=None)``; ``cache`` is
    ``(Cache, StaticCache)`` (``gen_cache``) and then ``(output, new_cache)`` returns.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float = 0.1,
                 activation: str = "relu", attn_dropout=None, act_dropout=None,
                 normalize_before: bool = False, weight_attr=None, bias_attr=None,
                 layer_norm_eps: float = 1e-5):
        super().__init__()
        config = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                      dropout=dropout, activation=activation, attn_dropout=attn_dropout,
                      act_dropout=act_dropout, normalize_before=normalize_before,
                      weight_attr=weight_attr, bias_attr=bias_attr,
                      layer_norm_eps=layer_norm_eps)
        attn_dropout, weights, biases = self._setup(config, 3)
        self.self_attn = MultiHeadAttention(d_model, nhead, attn_dropout,
                                            weight_attr=weights[0], bias_attr=biases[0])
        self.cross_attn = MultiHeadAttention(d_model, nhead, attn_dropout,
                                             weight_attr=weights[1], bias_attr=biases[1])
        self.norm1 = LayerNorm(d_model, layer_norm_eps)
        self.norm2 = LayerNorm(d_model, layer_norm_eps)
        self.norm3 = LayerNorm(d_model, layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        tgt_mask = convert_attention_mask(tgt_mask, tgt.dtype)
        memory_mask = convert_attention_mask(memory_mask, tgt.dtype)

        def attend_self(x):
            if cache is None:
                return self.self_attn(x, x, x, tgt_mask), None
            return self.self_attn(x, x, x, tgt_mask, cache[0])

        def attend_memory(x):
            if cache is None:
                return self.cross_attn(x, memory, memory, memory_mask), None
            return self.cross_attn(x, memory, memory, memory_mask, cache[1])

        tgt, incremental = self._residual(tgt, attend_self, self.norm1, self.dropout1)
        tgt, static = self._residual(tgt, attend_memory, self.norm2, self.dropout2)
        tgt, _ = self._residual(tgt, lambda x: (self._feed_forward(x), None), self.norm3,
                                self.dropout3)
        return tgt if cache is None else (tgt, (incremental, static))

    def gen_cache(self, memory):
        """(an empty self-attention cache, the memory's projected keys and values)."""
        incremental = self.self_attn.gen_cache(memory, type=MultiHeadAttention.Cache)
        static = self.cross_attn.gen_cache(memory, memory, type=MultiHeadAttention.StaticCache)
        return incremental, static


def _stack(layer: Layer, num_layers: int) -> LayerList:
    """``layer`` and ``num_layers - 1`` new layers made with its arguments (each with its
    own freshly initialized parameters)."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    return LayerList([layer] + [type(layer)(**layer._config) for _ in range(num_layers - 1)])


class TransformerEncoder(Layer):
    """``num_layers`` encoder layers (the first is ``encoder_layer``, the others are made
    like it), then ``norm`` when given."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm=None):
        super().__init__()
        self.layers = _stack(encoder_layer, int(num_layers))
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, src, src_mask=None, cache=None):
        src_mask = convert_attention_mask(src_mask, src.dtype)
        output, new_caches = src, []
        for i, layer in enumerate(self.layers):
            if cache is None:
                output = layer(output, src_mask=src_mask)
            else:
                output, new_cache = layer(output, src_mask=src_mask, cache=cache[i])
                new_caches.append(new_cache)
        if self.norm is not None:
            output = self.norm(output)
        return output if cache is None else (output, new_caches)

    def gen_cache(self, src):
        """One empty self-attention cache per layer, for the batch of ``src``."""
        return [layer.gen_cache(src) for layer in self.layers]


class TransformerDecoder(Layer):
    """``num_layers`` decoder layers (the first is ``decoder_layer``, the others are made
    like it), then ``norm`` when given."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm=None):
        super().__init__()
        self.layers = _stack(decoder_layer, int(num_layers))
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        tgt_mask = convert_attention_mask(tgt_mask, tgt.dtype)
        memory_mask = convert_attention_mask(memory_mask, tgt.dtype)
        output, new_caches = tgt, []
        for i, layer in enumerate(self.layers):
            if cache is None:
                output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
            else:
                output, new_cache = layer(output, memory, tgt_mask=tgt_mask,
                                          memory_mask=memory_mask, cache=cache[i])
                new_caches.append(new_cache)
        if self.norm is not None:
            output = self.norm(output)
        return output if cache is None else (output, new_caches)

    def gen_cache(self, memory, do_zip: bool = False):
        """One cache per layer; ``do_zip`` regroups them as (all Caches, all StaticCaches)."""
        cache = [layer.gen_cache(memory) for layer in self.layers]
        return list(zip(*cache)) if do_zip else cache


class Transformer(Layer):
    """The encoder-decoder Transformer ("Attention Is All You Need"): an encoder and a
    decoder stack, each followed by a layer norm.

    ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None)`` returns the
    decoder's output; ``custom_encoder``/``custom_decoder`` replace the stacks.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str = "relu", attn_dropout=None,
                 act_dropout=None, normalize_before: bool = False, weight_attr=None,
                 bias_attr=None, custom_encoder=None, custom_decoder=None):
        super().__init__()
        self.d_model, self.nhead = int(d_model), int(nhead)
        common = dict(dropout=dropout, activation=activation, attn_dropout=attn_dropout,
                      act_dropout=act_dropout, normalize_before=normalize_before)
        enc_weights, dec_weights = _split_attrs(weight_attr)
        enc_biases, dec_biases = _split_attrs(bias_attr)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward,
                                            weight_attr=enc_weights, bias_attr=enc_biases,
                                            **common)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, LayerNorm(d_model))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward,
                                            weight_attr=dec_weights, bias_attr=dec_biases,
                                            **common)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, LayerNorm(d_model))

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None):
        memory = self.encoder(src, src_mask=src_mask)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)

    @staticmethod
    def generate_square_subsequent_mask(length: int):
        """A [length, length] float mask: 0 on and below the diagonal, -inf above (each
        position attends to itself and the positions before it)."""
        if getattr(length, "is_static", False):
            raise ValueError("generate_square_subsequent_mask: length must be a Python int "
                             "(a length known only when the program runs needs d2s.triu)")
        length = int(length)
        mask = np.triu(np.full((length, length), -np.inf, dtype=np.float32), 1)
        return creation.to_tensor(mask)
