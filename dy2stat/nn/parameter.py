"""``Parameter``: a trainable leaf tensor owned by a Layer, and ``ParamAttr``."""

from __future__ import annotations

from dy2stat.tensor import Tensor


class Parameter(Tensor):
    """A Tensor that a Layer trains: ``stop_gradient`` is False unless ``trainable=False``.

    ``name`` is unique and readable (``linear_0.weight``); it is the variable
    name a converted program gives the parameter.
    """

    __slots__ = ("optimize_attr", "regularizer", "need_clip", "_auto_name")

    def __init__(self, data, name: str | None = None, trainable: bool = True,
                 learning_rate: float = 1.0, regularizer=None, need_clip: bool = True):
        super().__init__(data, stop_gradient=not trainable, name=name)
        self.optimize_attr = {"learning_rate": float(learning_rate)}
        # Its own weight decay (an L1Decay or L2Decay), used instead of the optimizer's.
        self.regularizer = regularizer
        self.need_clip = bool(need_clip)
        # True while the name is a placeholder the owning Layer may replace.
        self._auto_name = name is None

    @property
    def trainable(self) -> bool:
        """Whether the optimizer updates it (``not stop_gradient``; settable)."""
        return not self.stop_gradient

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self.stop_gradient = not value

    @property
    def persistable(self) -> bool:
        """Always True: a parameter is saved with the model."""
        return True

    def __repr__(self) -> str:
        return f"Parameter {self.name}:\n{super().__repr__()}"


class ParamAttr:
    """How ``Layer.create_parameter`` makes a parameter (Paddle's ``ParamAttr``).

    Layers accept a ``ParamAttr``, an initializer, a name, ``None`` (the
    layer's default) or ``False`` (no parameter, e.g. no bias).
    """

    def __init__(self, name: str | None = None, initializer=None, learning_rate: float = 1.0,
                 regularizer=None, trainable: bool = True, do_model_average: bool = False,
                 need_clip: bool = True):
        self.name = name
        self.initializer = initializer
        self.learning_rate = float(learning_rate)
        self.regularizer = regularizer  # the parameter's weight decay, over the optimizer's
        self.trainable = bool(trainable)
        self.need_clip = bool(need_clip)  # whether gradient clipping applies to it

    @staticmethod
    def of(attr) -> ParamAttr | None:
        """A ParamAttr from what a layer was given (None when ``attr`` is False)."""
        if attr is False:
            return None
        if attr is None or attr is True:
            return ParamAttr()
        if isinstance(attr, ParamAttr):
            return attr
        if isinstance(attr, str):
            return ParamAttr(name=attr)
        if callable(attr):  # an initializer
            return ParamAttr(initializer=attr)
        raise TypeError(
            f"a parameter attribute must be a ParamAttr, an initializer, a name, None or False; "
            f"got {type(attr).__name__}"
        )

    def __repr__(self) -> str:
        return (f"ParamAttr(name={self.name!r}, initializer={self.initializer!r}, "
                f"learning_rate={self.learning_rate}, regularizer={self.regularizer!r}, "
                f"trainable={self.trainable})")
