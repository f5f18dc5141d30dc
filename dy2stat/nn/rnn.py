"""Recurrent layers: SimpleRNN, LSTM and GRU (multi-layer, one or two directions), and
their cells.

Gate math and parameter names follow Paddle: LSTM gates (i, f, g, o), GRU gates
(r, z, c); ``weight_ih_l{k}`` is [gates * hidden, input], ``weight_hh_l{k}``
[gates * hidden, hidden], ``bias_ih_l{k}`` and ``bias_hh_l{k}`` [gates * hidden]; the
backward direction's have the suffix ``_reverse``. Outputs of the two directions are
concatenated on the last axis; final states are [num_layers * num_directions, batch,
hidden] (layer-major: layer 0 forward, layer 0 backward, layer 1 forward, ...).

The time loop runs in Python when the number of steps is known (eagerly always); in a
static program whose sequence length is only known at run time it is a ``while`` op,
so the same layer serves padded batches of any length.
"""

from __future__ import annotations

import math

from dy2stat import creation, ops
from dy2stat.nn import functional as F
from dy2stat.nn.functional.common import batch_zeros
from dy2stat.nn.initializer import Uniform
from dy2stat.nn.layer import Layer
from dy2stat.static.control_flow import while_loop

_DIRECTIONS = {"forward": 1, "bidirect": 2, "bidirectional": 2}


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


def simple_rnn_step(x_gates, h, w_hh, b_hh, activation: str = "tanh"):
    """One Elman step: ``act(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    pre = ops.add(x_gates, _hidden_projection(h, w_hh, b_hh))
    return ops.tanh(pre) if activation == "tanh" else ops.relu(pre)


def _keep(new, old, mask):
    """``new`` where ``mask`` (1.0 for steps inside the sequence) else ``old``."""
    return ops.add(ops.multiply(new, mask), ops.multiply(old, ops.subtract(1.0, mask)))


def _zeros(x, hidden_size: int):
    """Zeros [batch, hidden] for ``x`` [batch, ...]."""
    return batch_zeros(x, [hidden_size])


def _step_mask(sequence_length, t, like):
    """[batch, 1]: 1.0 where step ``t`` is inside the sequence, else 0.0."""
    return ops.unsqueeze(ops.cast(ops.greater_than(sequence_length, t), like.dtype), -1)


def scan(step, x_gates, state: tuple, sequence_length=None, reverse: bool = False):
    """Run ``step(x_gates[:, t], *state) -> (output, *state)`` over time.

    ``x_gates`` is [batch, time, features]; returns (outputs [batch, time, hidden],
    final state). With ``sequence_length``, steps at or past a sequence's end give zero
    outputs and leave its state as it was, so the reverse direction starts at each
    sequence's own last step. The loop is a ``while`` op when the number of steps is
    known only at run time.
    """

    def advance(t, state):
        out, *new = step(x_gates[:, t], *state)
        if sequence_length is None:
            return out, tuple(new)
        mask = _step_mask(sequence_length, t, out)
        return ops.multiply(out, mask), tuple(_keep(n, s, mask) for n, s in zip(new, state))

    steps = x_gates.shape[1]
    if steps >= 0:
        outputs = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            outputs[t], state = advance(t, state)
        return ops.stack(outputs, axis=1), state
    total = ops.shape(x_gates)[1]
    hidden = state[0].shape[-1]
    buffer = ops.transpose(creation.zeros_like(x_gates[:, :, :hidden]), [1, 0, 2])

    def more(i, buffer, *state):
        return ops.less_than(i, total)

    def body(i, buffer, *state):
        t = ops.subtract(ops.subtract(total, 1), i) if reverse else i
        out, state = advance(t, state)
        buffer[t] = out
        return [ops.add(i, 1), buffer, *state]

    start = creation.zeros([], dtype="int64")
    _, buffer, *state = while_loop(more, body, [start, buffer, *state])
    return ops.transpose(buffer, [1, 0, 2]), tuple(state)


class _RNNBase(Layer):
    """Parameters, directions, layers and states; subclasses define one step."""

    _gates = 0
    _states = 1  # tensors in one direction's state: (h,), or (h, c) for LSTM

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 direction: str = "forward", time_major: bool = False, dropout: float = 0.0,
                 weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None,
                 bias_hh_attr=None, name: str | None = None):
        super().__init__(name)
        kind = type(self).__name__
        if direction not in _DIRECTIONS:
            raise ValueError(f"{kind}: direction must be 'forward', 'bidirect' or "
                             f"'bidirectional', got {direction!r}")
        if num_layers < 1:
            raise ValueError(f"{kind}: num_layers must be >= 1, got {num_layers}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"{kind}: dropout must be in [0, 1), got {dropout}")
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.direction = int(num_layers), direction
        self.num_directions = _DIRECTIONS[direction]
        self.time_major, self.dropout = bool(time_major), float(dropout)
        bound = 1.0 / math.sqrt(hidden_size)
        init = Uniform(-bound, bound)
        rows = self._gates * self.hidden_size
        for k in range(self.num_layers):
            cols = self.input_size if k == 0 else self.hidden_size * self.num_directions
            for suffix in self._suffixes():
                self.add_parameter(f"weight_ih_l{k}{suffix}", self.create_parameter(
                    [rows, cols], weight_ih_attr, default_initializer=init))
                self.add_parameter(f"weight_hh_l{k}{suffix}", self.create_parameter(
                    [rows, self.hidden_size], weight_hh_attr, default_initializer=init))
                self.add_parameter(f"bias_ih_l{k}{suffix}", self.create_parameter(
                    [rows], bias_ih_attr, is_bias=True, default_initializer=init))
                self.add_parameter(f"bias_hh_l{k}{suffix}", self.create_parameter(
                    [rows], bias_hh_attr, is_bias=True, default_initializer=init))

    def _suffixes(self):
        return ("", "_reverse")[:self.num_directions]

    def _weights(self, k: int, suffix: str):
        p = self._parameters
        return (p[f"weight_ih_l{k}{suffix}"], p[f"weight_hh_l{k}{suffix}"],
                p[f"bias_ih_l{k}{suffix}"], p[f"bias_hh_l{k}{suffix}"])

    def _step(self, w_hh, b_hh):
        """``step(x_gates_t, *state) -> (output, *state)`` with these weights."""
        raise NotImplementedError

    def _initial(self, x, initial_states) -> list[list]:
        """Per (layer, direction) index: the list of its state tensors."""
        count = self.num_layers * self.num_directions
        if initial_states is None:
            zeros = _zeros(x, self.hidden_size)
            return [[zeros] * self._states for _ in range(count)]
        parts = [initial_states] if self._states == 1 else list(initial_states)
        return [[part[i] for part in parts] for i in range(count)]

    def forward(self, inputs, initial_states=None, sequence_length=None):
        x = ops.transpose(inputs, [1, 0, 2]) if self.time_major else inputs
        initial = self._initial(x, initial_states)
        finals = []
        for k in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(self._suffixes()):
                w_ih, w_hh, b_ih, b_hh = self._weights(k, suffix)
                out, state = scan(self._step(w_hh, b_hh), input_projection(x, w_ih, b_ih),
                                  tuple(initial[k * self.num_directions + d]),
                                  sequence_length, reverse=d == 1)
                outputs.append(out)
                finals.append(state)
            x = outputs[0] if len(outputs) == 1 else ops.concat(outputs, axis=-1)
            if self.dropout > 0 and k < self.num_layers - 1:
                x = F.dropout(x, self.dropout, training=self.training)
        states = tuple(ops.stack([s[i] for s in finals]) for i in range(self._states))
        outputs = ops.transpose(x, [1, 0, 2]) if self.time_major else x
        return outputs, states[0] if self._states == 1 else states

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.num_directions == 2:
            text += f", direction={self.direction!r}"
        if self.time_major:
            text += ", time_major=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        return text


class SimpleRNN(_RNNBase):
    """A multi-layer Elman RNN (``activation`` 'tanh' or 'relu').

    ``forward(inputs, initial_states=None, sequence_length=None)`` takes inputs
    [batch, time, input] ([time, batch, input] when ``time_major``) and an optional h0
    [num_layers * num_directions, batch, hidden]; it returns ``(outputs, h)``.
    """

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 direction: str = "forward", time_major: bool = False, dropout: float = 0.0,
                 activation: str = "tanh", weight_ih_attr=None, weight_hh_attr=None,
                 bias_ih_attr=None, bias_hh_attr=None, name: str | None = None):
        if activation not in ("tanh", "relu"):
            raise ValueError(f"SimpleRNN: activation must be 'tanh' or 'relu', got "
                             f"{activation!r}")
        self.activation = activation
        super().__init__(input_size, hidden_size, num_layers, direction, time_major, dropout,
                         weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr, name)

    def _step(self, w_hh, b_hh):
        def step(x_gates, h):
            h = simple_rnn_step(x_gates, h, w_hh, b_hh, self.activation)
            return h, h
        return step


class LSTM(_RNNBase):
    """A multi-layer LSTM.

    ``forward(inputs, initial_states=None, sequence_length=None)`` takes inputs
    [batch, time, input] ([time, batch, input] when ``time_major``) and optional
    ``(h0, c0)``, each [num_layers * num_directions, batch, hidden]; it returns
    ``(outputs, (h, c))`` with outputs [batch, time, num_directions * hidden] from the
    last layer. With ``sequence_length`` ([batch] ints) steps past a sequence's end give
    zero outputs and leave its state unchanged.
    """

    _gates = 4
    _states = 2

    def _step(self, w_hh, b_hh):
        def step(x_gates, h, c):
            h, c = lstm_step(x_gates, h, c, w_hh, b_hh)
            return h, h, c
        return step


class GRU(_RNNBase):
    """A multi-layer GRU.

    ``forward(inputs, initial_states=None, sequence_length=None)`` takes inputs
    [batch, time, input] ([time, batch, input] when ``time_major``) and an optional h0
    [num_layers * num_directions, batch, hidden]; it returns ``(outputs, h)``.
    """

    _gates = 3

    def _step(self, w_hh, b_hh):
        def step(x_gates, h):
            h = gru_step(x_gates, h, w_hh, b_hh)
            return h, h
        return step


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
        return _zeros(inputs, self.hidden_size)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class SimpleRNNCell(_CellBase):
    """One Elman step: ``forward(inputs, states=None) -> (h, h)``."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, activation: str = "tanh",
                 weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None,
                 bias_hh_attr=None, name: str | None = None):
        if activation not in ("tanh", "relu"):
            raise ValueError(f"SimpleRNNCell: activation must be 'tanh' or 'relu', got "
                             f"{activation!r}")
        self.activation = activation
        super().__init__(input_size, hidden_size, weight_ih_attr, weight_hh_attr,
                         bias_ih_attr, bias_hh_attr, name)

    def forward(self, inputs, states=None):
        h = self._zeros(inputs) if states is None else states
        x_gates = input_projection(inputs, self.weight_ih, self.bias_ih)
        h = simple_rnn_step(x_gates, h, self.weight_hh, self.bias_hh, self.activation)
        return h, h


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
