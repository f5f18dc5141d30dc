"""Array kernels: ``f(xp, *arrays, **attrs) -> array(s)`` over numpy or cupy.

Kernels know nothing of ops, programs or tensors.
"""

from dy2stat.kernels.backend import array_module, cupy, has_cupy, to_host

__all__ = ["array_module", "cupy", "has_cupy", "to_host"]
