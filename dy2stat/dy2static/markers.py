"""The attributes that tell conversion how to treat a function (this module imports nothing,
so that any part of the framework can mark its functions)."""

# Set by `d2s.jit.not_to_static`: calls of the function run it as written, unconverted.
NOT_TO_STATIC = "__dy2stat_not_to_static__"

# Set on a converted function (whose `__wrapped__` is the user's original).
CONVERTED = "__dy2static_converted__"

# Set on the wrapper a framework decorator returns (`d2s.no_grad()(f)`): the decorator.
# Conversion converts the wrapped function and applies the decorator again around it, so
# the decorator keeps its effect and what it wraps is converted. (A user's own decorator
# needs no mark: its wrapper is user code and is converted as it is.)
REAPPLY = "__dy2stat_reapply__"
