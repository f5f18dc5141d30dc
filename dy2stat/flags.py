"""Global switches, as Paddle's ``FLAGS_*``: ``set_flags`` and ``get_flags``.

    d2s.set_flags({"cudnn_exhaustive_search": True})
    d2s.get_flags("cudnn_exhaustive_search")  # {"cudnn_exhaustive_search": True}

Names may carry Paddle's ``FLAGS_`` prefix. An unknown name, or a value of
the wrong type, is an error naming it.
"""

from __future__ import annotations

from dy2stat.kernels import cudnn
from dy2stat.runtime import batch_split, codegen, lower
from dy2stat.runtime.codegen import cuda_graphs
from dy2stat.runtime.passes import layout

__all__ = ["get_flags", "set_flags"]

# name -> (default, what it does, how it is applied)
_FLAGS = {
    "batch_parallelism": (
        batch_split.settings.enabled,
        "opt-in: let converted Layers run a program whose ops treat the batch rows "
        "independently on two halves of a large enough batch at once (NumPy, two or more "
        "cores); weight gradients are then two partial sums, rounded unlike eager mode's",
        lambda v: setattr(batch_split.settings, "enabled", v),
    ),
    "batch_minor_layout": (
        layout.settings.enabled,
        "opt-in: let converted Layers run convolution and pooling chains on [C, H, W, N] "
        "arrays (NumPy; plans compiled from then on): faster on small maps, sums rounded "
        "in another order than eager mode's",
        lambda v: setattr(layout.settings, "enabled", v),
    ),
    "cudnn_exhaustive_search": (
        False,
        "time every cuDNN convolution algorithm once per shape and keep the fastest",
        lambda v: setattr(cudnn.settings, "exhaustive_search", v),
    ),
    "cudnn_deterministic": (
        False,
        "use only deterministic cuDNN algorithms for convolution gradients",
        lambda v: setattr(cudnn.settings, "deterministic", v),
    ),
    "inter_op_parallelism": (
        codegen.overlap.enabled,
        "let compiled plans run a convolution or pooling op on a second thread while the "
        "ops after it run (NumPy, two or more cores; plans compiled from then on), when "
        "BLAS runs on one thread: eager mode's numbers either way",
        lambda v: setattr(codegen.overlap, "enabled", v),
    ),
    "native_tier": (
        lower.settings.enabled,
        "compile a plan called often to machine code through Numba, in the background, "
        "swapping it in when ready (on where Numba imports; plans compiled from then on): "
        "the interpreted plan's numbers, but for small matmuls and sums along leading axes, "
        "which add in another order (within its rounding)",
        lambda v: setattr(lower.settings, "enabled", v),
    ),
    "native_exact": (
        lower.settings.exact,
        "keep the native tier to the interpreted plan's bits: matmuls and sums along "
        "leading axes stay NumPy calls (plans compiled from then on)",
        lambda v: setattr(lower.settings, "exact", v),
    ),
    "native_after_calls": (
        lower.settings.after_calls,
        "how many calls of a plan run interpreted before its native build starts",
        lambda v: setattr(lower.settings, "after_calls", v),
    ),
    "native_relaxed": (
        lower.settings.relaxed,
        "opt-in: let the native tier also compile exp, log, tanh, sigmoid, pow, and max "
        "and min along leading axes, which it rounds unlike NumPy (within a few units in "
        "the last place; a max of equal signed zeros may pick the other); plans compiled "
        "from then on",
        lambda v: setattr(lower.settings, "relaxed", v),
    ),
    "native_cache_dir": (
        lower.settings.cache_dir,
        "where the native tier caches compiled code ('': $DY2STAT_CACHE_DIR, else "
        "~/.cache/dy2stat or $XDG_CACHE_HOME/dy2stat)",
        lambda v: setattr(lower.settings, "cache_dir", v),
    ),
    "use_cudnn": (
        True,
        "run convolutions on the GPU through cuDNN when its frontend is installed",
        lambda v: setattr(cudnn.settings, "enabled", v),
    ),
    "cuda_graphs": (
        cuda_graphs.settings.enabled,
        "capture a GPU plan that runs straight through as a CUDA graph on its second call "
        "and replay it, and a loop left on the host as one graph per iteration (plans "
        "compiled from then on)",
        lambda v: setattr(cuda_graphs.settings, "enabled", v),
    ),
    "gpu_loop_kernels": (
        lower.cuda.settings.enabled,
        "run a GPU plan's while loop whose ops lower as one CUDA kernel (plans compiled "
        "from then on): its float sums add in the kernel's order, not CuPy's",
        lambda v: setattr(lower.cuda.settings, "enabled", v),
    ),
}
_values = {name: default for name, (default, _, _) in _FLAGS.items()}


def _name(flag) -> str:
    if not isinstance(flag, str):
        raise TypeError(f"flag names are strings, got {type(flag).__name__} {flag!r}")
    name = flag[len("FLAGS_"):] if flag.startswith("FLAGS_") else flag
    if name not in _FLAGS:
        known = ", ".join(sorted(_FLAGS))
        raise ValueError(f"unknown flag {flag!r} (known flags: {known})")
    return name


def set_flags(flags: dict) -> None:
    """Set flags from ``{name: value}``; nothing changes unless every entry is valid."""
    if not isinstance(flags, dict):
        raise TypeError(f"set_flags takes a dict of flag names to values, "
                        f"not {type(flags).__name__}")
    checked = {}
    for flag, value in flags.items():
        name = _name(flag)
        default = _FLAGS[name][0]
        if isinstance(default, bool):
            if not (isinstance(value, bool) or (type(value) is int and value in (0, 1))):
                raise TypeError(f"flag {flag!r} takes True or False, got {value!r}")
            value = bool(value)
        elif isinstance(default, int):
            if type(value) is not int or value < 1:
                raise TypeError(f"flag {flag!r} takes a whole number >= 1, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise TypeError(f"flag {flag!r} takes a string, got {value!r}")
        checked[name] = value
    for name, value in checked.items():
        _values[name] = value
        _FLAGS[name][2](value)


def get_flags(flags=None) -> dict:
    """``{name: value}`` for a name, a list of names, or (None) every flag."""
    if flags is None:
        return dict(_values)
    names = [flags] if isinstance(flags, str) else list(flags)
    return {flag: _values[_name(flag)] for flag in names}


def describe() -> dict:
    """``{name: (default, what it does)}`` for every flag."""
    return {name: (default, doc) for name, (default, doc, _) in _FLAGS.items()}
