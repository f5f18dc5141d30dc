"""Containers: Sequential, LayerList, LayerDict and ParameterList."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dy2stat.nn.layer import Layer, changes


def _position(index: int, length: int, where: str) -> int:
    if not -length <= index < length:
        raise IndexError(f"{where}: index {index} is out of range for {length} layers")
    return index % length


class Sequential(Layer):
    """Runs its layers in order, each on the previous one's output.

    ``Sequential(l1, l2)``, ``Sequential(("name", l1), ("other", l2))`` or
    ``Sequential(OrderedDict(name=l1, other=l2))``; names are the
    ``state_dict`` key prefixes ("0", "1", ... for positional layers).
    """

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], Mapping):
            items = list(layers[0].items())
        elif layers and all(isinstance(item, (list, tuple)) for item in layers):
            items = list(layers)
        else:
            items = [(str(i), layer) for i, layer in enumerate(layers)]
        for name, layer in items:
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential: {name!r} is a {type(layer).__name__}, not a Layer")
            self.add_sublayer(str(name), layer)

    def forward(self, x):
        """The layers applied in order, each to the previous one's output."""
        for layer in self._sub_layers.values():
            x = layer(x)
        return x

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(*list(self._sub_layers.items())[index])
        if isinstance(index, str):
            return self._sub_layers[index]
        keys = list(self._sub_layers)
        return self._sub_layers[keys[_position(index, len(keys), "Sequential")]]

    def __setitem__(self, index, layer: Layer) -> None:
        keys = list(self._sub_layers)
        key = index if isinstance(index, str) else keys[_position(index, len(keys), "Sequential")]
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential: cannot set a {type(layer).__name__} as a layer")
        self._sub_layers[key] = layer

    def __delitem__(self, index) -> None:
        keys = list(self._sub_layers)
        if isinstance(index, slice):
            for key in keys[index]:
                del self._sub_layers[key]
            return
        key = index if isinstance(index, str) else keys[_position(index, len(keys), "Sequential")]
        del self._sub_layers[key]

    def __len__(self) -> int:
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers.values())

    def append(self, layer: Layer) -> Sequential:
        """Add a layer at the end (named by its position); returns self."""
        self.add_sublayer(str(len(self._sub_layers)), layer)
        return self


class LayerList(Layer):
    """A list of layers whose parameters the owner sees (names "0", "1", ...)."""

    def __init__(self, sublayers: Iterable[Layer] | None = None):
        super().__init__()
        if sublayers is not None:
            self.extend(sublayers)

    def _reset(self, layers: list) -> None:
        self._sub_layers.clear()
        for i, layer in enumerate(layers):
            self.add_sublayer(str(i), layer)

    def _check(self, layer) -> Layer:
        if not isinstance(layer, Layer):
            raise TypeError(f"LayerList holds Layers, not a {type(layer).__name__}")
        return layer

    def __getitem__(self, index):
        layers = list(self._sub_layers.values())
        if isinstance(index, slice):
            return LayerList(layers[index])
        return layers[_position(index, len(layers), "LayerList")]

    def __setitem__(self, index: int, layer: Layer) -> None:
        position = _position(index, len(self._sub_layers), "LayerList")
        self._sub_layers[str(position)] = self._check(layer)

    def __delitem__(self, index) -> None:
        layers = list(self._sub_layers.values())
        if isinstance(index, slice):
            del layers[index]
        else:
            del layers[_position(index, len(layers), "LayerList")]
        self._reset(layers)

    def __len__(self) -> int:
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers.values())

    def append(self, sublayer: Layer) -> LayerList:
        """Add a layer at the end; returns self."""
        self.add_sublayer(str(len(self._sub_layers)), self._check(sublayer))
        return self

    def extend(self, sublayers: Iterable[Layer]) -> LayerList:
        """Add layers at the end; returns self."""
        for layer in sublayers:
            self.append(layer)
        return self

    def insert(self, index: int, sublayer: Layer) -> None:
        """Insert a layer before position ``index``."""
        layers = list(self._sub_layers.values())
        layers.insert(index, self._check(sublayer))
        self._reset(layers)


class LayerDict(Layer):
    """An ordered dict of layers whose parameters the owner sees (keys are the
    ``state_dict`` prefixes)."""

    def __init__(self, sublayers=None):
        super().__init__()
        if sublayers is not None:
            self.update(sublayers)

    def __getitem__(self, key: str) -> Layer:
        return self._sub_layers[key]

    def __setitem__(self, key: str, sublayer: Layer) -> None:
        if not isinstance(sublayer, Layer):
            raise TypeError(f"LayerDict holds Layers, not a {type(sublayer).__name__}")
        if key in self._sub_layers:  # replaced in place: the order stays
            changes.count += 1
            self._sub_layers[key] = sublayer
        else:
            self.add_sublayer(key, sublayer)

    def __delitem__(self, key: str) -> None:
        changes.count += 1
        del self._sub_layers[key]

    def __len__(self) -> int:
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers)

    def __contains__(self, key) -> bool:
        return key in self._sub_layers

    def clear(self) -> None:
        """Remove every layer."""
        changes.count += 1
        self._sub_layers.clear()

    def pop(self, key: str) -> Layer:
        """Remove the layer of ``key`` and return it."""
        changes.count += 1
        return self._sub_layers.pop(key)

    def keys(self):
        """The keys, in order."""
        return self._sub_layers.keys()

    def items(self):
        """(key, layer) pairs, in order."""
        return self._sub_layers.items()

    def values(self):
        """The layers, in order."""
        return self._sub_layers.values()

    def update(self, sublayers) -> None:
        """Add (or replace) layers from a mapping or from (key, layer) pairs."""
        items = sublayers.items() if isinstance(sublayers, Mapping) else sublayers
        for item in items:
            if not isinstance(item, (list, tuple)) or len(item) != 2:
                raise TypeError("LayerDict.update: expected a mapping or (key, layer) pairs")
            self[item[0]] = item[1]


class ParameterList(Layer):
    """A list of parameters whose owner trains them (names "0", "1", ...)."""

    def __init__(self, parameters: Iterable | None = None):
        super().__init__()
        for p in parameters or ():
            self.append(p)

    def __getitem__(self, index: int):
        params = list(self._parameters.values())
        return params[_position(index, len(params), "ParameterList")]

    def __setitem__(self, index: int, parameter) -> None:
        params = list(self._parameters.values())
        params[_position(index, len(params), "ParameterList")] = parameter
        self._parameters.clear()
        for p in params:
            self.append(p)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def append(self, parameter) -> ParameterList:
        """Add a parameter at the end; returns self."""
        self.add_parameter(str(len(self._parameters)), parameter)
        return self
