"""What a data-parallel job raises when it cannot go on together."""

from __future__ import annotations


class DistributedError(RuntimeError):
    """A collective could not complete: it timed out, or the ranks disagree."""


class PeerFailed(DistributedError):
    """Another rank failed; this one stops too (its own error was printed there)."""


def timed_out(what: str, timeout: float) -> DistributedError:
    return DistributedError(
        f"{what} timed out after {timeout:g} s: another rank failed, hangs or is at another "
        "step (the limit is init_parallel_env(timeout=...))")
