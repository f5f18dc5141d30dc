"""Keep freed host memory in the process, as a framework's caching allocator does.

A training step allocates and frees the same large arrays every time. glibc
gives freed memory at the top of its heap back to the system, and serves
large arrays with fresh ``mmap`` calls; either way the next step touches new
pages, and the page faults (~2 us each on a virtual machine, 4 KiB apiece)
can cost more than the kernels that fill the arrays. Raising glibc's trim and
mmap thresholds keeps that memory for reuse. dy2stat does it once, when it is
imported; ``DY2STAT_KEEP_HOST_MEMORY=0`` leaves malloc as it is.
"""

import ctypes
import os

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
TRIM_THRESHOLD = 256 << 20  # free memory kept at the top of the heap
MMAP_THRESHOLD = 32 << 20  # arrays below this come from the heap (glibc's maximum)


def keep_freed_memory() -> bool:
    """Raise glibc's thresholds; False where this is not glibc or it is turned off."""
    if os.environ.get("DY2STAT_KEEP_HOST_MEMORY", "1") == "0":
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (ValueError, OSError, AttributeError):  # not glibc, or not a POSIX system
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
