"""Random draws over numpy or cupy, from one global generator per array module and device.

``seed(n)`` reseeds every module's global generator (the CuPy one is built
lazily, on the first draw on the GPU, so seeding never touches a device).
A draw with ``seed != 0`` uses a fresh generator seeded with that value
instead, so it gives the same values every time (a deterministic op).
"""

import numpy

_seed = None  # the last global seed; None: fresh entropy
_generators = {}  # (array module name, device) -> its global Generator


def seed(n) -> None:
    """Reseed the global generators of NumPy and (when used) CuPy."""
    global _seed
    _seed = int(n)
    _generators.clear()


def _generator(xp, seed=0):
    if seed:
        return xp.random.default_rng(seed)
    key = (xp.__name__, xp.cuda.runtime.getDevice() if xp is not numpy else None)
    gen = _generators.get(key)
    if gen is None:  # each GPU draws with its own (a generator's state lives on one)
        gen = _generators[key] = xp.random.default_rng(_seed)
    return gen


def _float_kind(dtype) -> str:
    """Generators draw float32 or float64; other dtypes are cast afterwards."""
    return "float64" if numpy.dtype(dtype) == numpy.float64 else "float32"


def uniform(xp, shape, low, high, dtype, seed=0):
    """Uniform on [low, high)."""
    u = _generator(xp, seed).random(tuple(shape), dtype=_float_kind(dtype))
    return (u * (high - low) + low).astype(dtype, copy=False)


def normal(xp, shape, mean, std, dtype, seed=0):
    z = _generator(xp, seed).standard_normal(tuple(shape), dtype=_float_kind(dtype))
    return (z * std + mean).astype(dtype, copy=False)


def randint(xp, shape, low, high, dtype, seed=0):
    """Integers on [low, high)."""
    ints = _generator(xp, seed).integers(low, high, size=tuple(shape), dtype=numpy.int64)
    return ints.astype(dtype, copy=False)


def bernoulli(xp, shape, p, dtype, seed=0):
    """1 with probability ``p``, else 0."""
    u = _generator(xp, seed).random(tuple(shape), dtype="float32")
    return (u < p).astype(dtype)
