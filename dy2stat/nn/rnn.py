"""Recurrent layers: LSTM and GRU (multi-layer, forward direction), and their cells.

The time loop is an ordinary Python ``for t in range(seq_len)`` over
``x[:, t]`` that stacks the step outputs, so converting a model that uses
these layers turns the loop into a ``while`` op when the sequence length is
only known at run time. Gate math and parameter names follow Paddle: LSTM
gates (i, f, g, o), GRU gates (r, z, c); ``weight_ih_l{k}`` is
[gates * hidden, input], ``weight_hh_l{k}`` [gates * hidden, hidden],
``bias_ih_l{k}`` and ``bias_hh_l{k}`` [gates * hidden].
"""

from __future__ import annotations

import math

from dy2stat import creation, ops
from dy2stat.nn import functional as F
from dy2stat.nn.initializer import Uniform
from dy2stat.nn.layer import Layer


def _hidden_projection(h, w_hh, b_hh):
    out = ops.matmul(h, w_hh, transpose_y=True)
    return out if b_hh is None else ops.add(out, b_hh)


def input_projection(x, w_ih, b_ih):
    """``x @ w_ih^T + b_ih`` for every step at once ([batch, time, gates * hidden])."""
    out = ops.matmul(x, w_ih, transpose_y=True)
    return out if b_ih is None else ops.add(out, b_ih)


def lstm_step(x_gates, h, c, w_hh, b_hh):
    """One LSTM step from the input's projection ``x_gates``; returns (h, c)."""
    gates = ops.add(x_gates, _hidden_projection(h, w_hh, b_hh))
    i, f, g, o = ops.split(gates, 4, axis=-1)
    c = ops.add(ops.multiply(ops.sigmoid(f), c), ops.multiply(ops.sigmoid(i), ops.tanh(g)))
    h = ops.multiply(ops.sigmoid(o), ops.tanh(c))
    return h, c


def gru_step(x_gates, h, w_hh, b_hh):
    """One GRU step: ``h' = z * h + (1 - z) * c`` with the reset gate applied to the
    hidden projection (bias included), as in Paddle and PyTorch."""
    x_r, x_z, x_c = ops.split(x_gates, 3, axis=-1)
    h_r, h_z, h_c = ops.split(_hidden_projection(h, w_hh, b_hh), 3, axis=-1)
    r = ops.sigmoid(ops.add(x_r, h_r))
    z = ops.sigmoid(ops.add(x_z, h_z))
    c = ops.tanh(ops.add(x_c, ops.multiply(r, h_c)))
    return ops.add(ops.multiply(ops.subtract(h, c), z), c)


def _keep(new, old, mask):
    """``new`` where ``mask`` (1.0 for steps inside the sequence) else ``old``."""
    return ops.add(ops.multiply(new, mask), ops.multiply(old, ops.subtract(1.0, mask)))


def _zero_state(x, hidden_size: int):
    """Zeros [batch, hidden] (the batch may be known only at run time)."""
    return ops.tile(creation.full_like(x[:, 0, 0:1], 0.0), [1, hidden_size])


class _RNNBase(Layer):
    _gates = 0

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 direction: str = "forward", time_major: bool = False, dropout: float = 0.0,
                 weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None,
                 bias_hh_attr=None, name: str | None = None):
        super().__init__(name)
        kind = type(self).__name__
        if direction != "forward":
            raise NotImplementedError(f"{kind}: only direction='forward' is supported, "
                                      f"got {direction!r}")
        if num_layers < 1:
            raise ValueError(f"{kind}: num_layers must be >= 1, got {num_layers}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"{kind}: dropout must be in [0, 1), got {dropout}")
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.direction = int(num_layers), direction
        self.time_major, self.dropout = bool(time_major), float(dropout)
        bound = 1.0 / math.sqrt(hidden_size)
        init = Uniform(-bound, bound)
        rows = self._gates * self.hidden_size
        for k in range(self.num_layers):
            cols = self.input_size if k == 0 else self.hidden_size
            self.add_parameter(f"weight_ih_l{k}", self.create_parameter(
                [rows, cols], weight_ih_attr, default_initializer=init))
            self.add_parameter(f"weight_hh_l{k}", self.create_parameter(
                [rows, self.hidden_size], weight_hh_attr, default_initializer=init))
            self.add_parameter(f"bias_ih_l{k}", self.create_parameter(
                [rows], bias_ih_attr, is_bias=True, default_initializer=init))
            self.add_parameter(f"bias_hh_l{k}", self.create_parameter(
                [rows], bias_hh_attr, is_bias=True, default_initializer=init))

    def _weights(self, k: int):
        p = self._parameters
        return p[f"weight_ih_l{k}"], p[f"weight_hh_l{k}"], p[f"bias_ih_l{k}"], p[f"bias_hh_l{k}"]

    def _batch_first(self, x):
        return ops.transpose(x, [1, 0, 2]) if self.time_major else x

    def _between_layers(self, x, k: int):
        if self.dropout > 0 and k < self.num_layers - 1:
            return F.dropout(x, self.dropout, training=self.training)
        return x

    @staticmethod
    def _step_mask(sequence_length, t, like):
        """[batch, 1]: 1.0 where step ``t`` is inside the sequence, else 0.0."""
        return ops.unsqueeze(ops.cast(ops.greater_than(sequence_length, t), like.dtype), -1)

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.time_major:
            text += ", time_major=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        return text


class LSTM(_RNNBase):
    """A multi-layer LSTM.

    ``forward(inputs, initial_states=None, sequence_length=None)`` takes
    inputs [batch, time, input] ([time, batch, input] when ``time_major``) and
    optional ``(h0, c0)``, each [num_layers, batch, hidden]; it returns
    ``(outputs, (h, c))`` with outputs [batch, time, hidden] from the last
    layer. With ``sequence_length`` ([batch] ints) steps past a sequence's
    end give zero outputs and leave its state unchanged.
    """

    _gates = 4

    def forward(self, inputs, initial_states=None, sequence_length=None):
        x = self._batch_first(inputs)
        if initial_states is None:
            zeros = _zero_state(x, self.hidden_size)
            h0 = [zeros] * self.num_layers
            c0 = [zeros] * self.num_layers
        else:
            h_init, c_init = initial_states
            h0 = [h_init[k] for k in range(self.num_layers)]
            c0 = [c_init[k] for k in range(self.num_layers)]
        final_h, final_c = [], []
        for k in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = self._weights(k)
            x_gates = input_projection(x, w_ih, b_ih)
            h, c = h0[k], c0[k]
            outputs = []
            for t in range(x.shape[1]):
                h_new, c_new = lstm_step(x_gates[:, t], h, c, w_hh, b_hh)
                if sequence_length is None:
                    h, c = h_new, c_new
                    outputs.append(h)
                else:
                    mask = self._step_mask(sequence_length, t, h_new)
                    h, c = _keep(h_new, h, mask), _keep(c_new, c, mask)
                    outputs.append(ops.multiply(h_new, mask))
            x = self._between_layers(ops.stack(outputs, axis=1), k)
            final_h.append(h)
            final_c.append(c)
        return self._batch_first(x), (ops.stack(final_h), ops.stack(final_c))


class GRU(_RNNBase):
    """A multi-layer GRU.

    ``forward(inputs, initial_states=None, sequence_length=None)`` takes
    inputs [batch, time, input] ([time, batch, input] when ``time_major``) and
    an optional h0 [num_layers, batch, hidden]; it returns ``(outputs, h)``.
    """

    _gates = 3

    def forward(self, inputs, initial_states=None, sequence_length=None):
        x = self._batch_first(inputs)
        if initial_states is None:
            h0 = [_zero_state(x, self.hidden_size)] * self.num_layers
        else:
            h0 = [initial_states[k] for k in range(self.num_layers)]
        final_h = []
        for k in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = self._weights(k)
            x_gates = input_projection(x, w_ih, b_ih)
            h = h0[k]
            outputs = []
            for t in range(x.shape[1]):
                h_new = gru_step(x_gates[:, t], h, w_hh, b_hh)
                if sequence_length is None:
                    h = h_new
                    outputs.append(h)
                else:
                    mask = self._step_mask(sequence_length, t, h_new)
                    h = _keep(h_new, h, mask)
                    outputs.append(ops.multiply(h_new, mask))
            x = self._between_layers(ops.stack(outputs, axis=1), k)
            final_h.append(h)
        return self._batch_first(x), ops.stack(final_h)


class _CellBase(Layer):
    _gates = 0

    def __init__(self, input_size: int, hidden_size: int, weight_ih_attr=None,
                 weight_hh_attr=None, bias_ih_attr=None, bias_hh_attr=None,
                 name: str | None = None):
        super().__init__(name)
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        bound = 1.0 / math.sqrt(hidden_size)
        init = Uniform(-bound, bound)
        rows = self._gates * self.hidden_size
        self.weight_ih = self.create_parameter([rows, self.input_size], weight_ih_attr,
                                               default_initializer=init)
        self.weight_hh = self.create_parameter([rows, self.hidden_size], weight_hh_attr,
                                               default_initializer=init)
        self.bias_ih = self.create_parameter([rows], bias_ih_attr, is_bias=True,
                                             default_initializer=init)
        self.bias_hh = self.create_parameter([rows], bias_hh_attr, is_bias=True,
                                             default_initializer=init)

    def _zeros(self, inputs):
        return ops.tile(creation.full_like(inputs[:, 0:1], 0.0), [1, self.hidden_size])

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class LSTMCell(_CellBase):
    """One LSTM step: ``forward(inputs, states=None) -> (h, (h, c))``."""

    _gates = 4

    def forward(self, inputs, states=None):
        if states is None:
            states = (self._zeros(inputs), self._zeros(inputs))
        h, c = states
        x_gates = input_projection(inputs, self.weight_ih, self.bias_ih)
        h, c = lstm_step(x_gates, h, c, self.weight_hh, self.bias_hh)
        return h, (h, c)


class GRUCell(_CellBase):
    """One GRU step: ``forward(inputs, states=None) -> (h, h)``."""

    _gates = 3

    def forward(self, inputs, states=None):
        h = self._zeros(inputs) if states is None else states
        x_gates = input_projection(inputs, self.weight_ih, self.bias_ih)
        h = gru_step(x_gates, h, self.weight_hh, self.bias_hh)
        return h, h
