"""The native tier: regions of a plan lowered to machine code.

- ``rules``: the lowering table, one rule per (op, target);
- ``cpu``: the CPU target's rules (loop code for Numba);
- ``loops``: the CPU target's code generator (a region -> one function's source);
- ``regions``: which runs of ops lower (``Lowering``: target, rounding);
- ``native``: compiling with Numba, and the disk cache keyed by content;
- ``tier``: when a plan goes native (called often; background thread; swap);
- ``cuda``: the CUDA target's rules, and ``CudaLowering`` (a GPU plan's loops);
- ``cuda_loops``: its code generator (a ``while`` -> one kernel of one block).

The two targets share the table and ``regions``; the tier is the CPU's (a GPU
plan lowers its loops when it compiles).
"""

from __future__ import annotations

import warnings

from dy2stat.runtime.lower import cpu, cuda, loops, native, regions, rules, tier  # noqa: F401
from dy2stat.runtime.lower.native import NativeTierWarning
from dy2stat.runtime.lower.regions import Lowering
from dy2stat.runtime.lower.rules import LOWERINGS, register_lowering, rule_for
from dy2stat.runtime.lower.tier import Tier, settings

__all__ = ["LOWERINGS", "Lowering", "NativeLowering", "NativeTierWarning", "Tier",
           "register_lowering", "rule_for", "settings"]


class NativeLowering:
    """What the code generator asks while it writes a plan's native form: the
    regions of a block, and each region compiled (``compile``)."""

    def __init__(self, lowering: Lowering, cache_root=None):
        self.lowering = lowering
        self.cache_root = cache_root
        self.sources: list[str] = []  # the compiled regions' modules, for reading
        self.compiled = 0
        self.loaded = 0  # of which loaded from the disk cache (compiled by an earlier process)

    def spans(self, program, ops, var_of) -> list[tuple]:
        return regions.spans(program, ops, var_of, self.lowering)

    def compile(self, program, ops, var_of, params, outs, constant_of):
        """``(dispatcher, array constants it takes after the free values)`` of a
        region, or None when it does not compile (warned: it stays interpreted)."""
        try:
            source = loops.region_source(program, ops, var_of, params, outs, constant_of,
                                         self.lowering.rounding)
            dispatcher = native.compile_region(source.text, self.cache_root)
        except Exception as exc:  # noqa: BLE001 - the region stays interpreted
            warnings.warn(f"dy2stat: a region of {len(ops)} ops ({ops[0].type} ... "
                          f"{ops[-1].type}) stays interpreted: {type(exc).__name__}: {exc}",
                          NativeTierWarning, stacklevel=2)
            return None
        self.sources.append(source.text)
        self.compiled += 1
        self.loaded += sum(dispatcher.stats.cache_hits.values()) > 0
        return dispatcher, source.const_args
