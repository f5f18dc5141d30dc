"""Numba functions the CPU target's generated code calls, as source text.

A region's module includes the ones it uses (``Emitter.helper``), so the
module is all its code and its hash names all of it (the disk cache's key).
``pairwise_sum`` is NumPy's summation order (``pairwise_sum`` in NumPy's
``loops_utils.h.src``); the others reduce a 1-D contiguous array in order.
"""

__all__ = ["PAIRWISE", "REDUCERS"]

PAIRWISE = '''@nb.njit(cache=True, error_model="numpy")
def pairwise_block(v, lo, n, zero):
    """NumPy's sum of at most 128 elements v[lo:lo + n]: 8 partial sums, then the rest."""
    if n < 8:
        res = zero
        for i in range(n):
            res += v[lo + i]
        return res
    r0, r1, r2, r3 = v[lo], v[lo + 1], v[lo + 2], v[lo + 3]
    r4, r5, r6, r7 = v[lo + 4], v[lo + 5], v[lo + 6], v[lo + 7]
    i = 8
    m = n - n % 8
    while i < m:
        r0 += v[lo + i]
        r1 += v[lo + i + 1]
        r2 += v[lo + i + 2]
        r3 += v[lo + i + 3]
        r4 += v[lo + i + 4]
        r5 += v[lo + i + 5]
        r6 += v[lo + i + 6]
        r7 += v[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += v[lo + i]
        i += 1
    return res


@nb.njit(cache=True, error_model="numpy")
def pairwise_sum(v, lo, n, zero):
    """NumPy's pairwise summation of v[lo:lo + n]: halves (cut at a multiple of 8)
    until at most 128 elements, summed by pairwise_block, added back up the tree.
    The tree is walked with a stack (Numba's cache cannot hold recursive code)."""
    if n <= 128:
        return pairwise_block(v, lo, n, zero)
    starts = np.empty(64, np.int64)
    sizes = np.empty(64, np.int64)
    phases = np.zeros(64, np.int64)
    sums = np.empty(64, v.dtype)
    top, done = 1, 0
    starts[0], sizes[0], phases[0] = lo, n, 0
    while top:
        start, size = starts[top - 1], sizes[top - 1]
        if size <= 128:
            top -= 1
            sums[done] = pairwise_block(v, start, size, zero)
            done += 1
            continue
        half = size // 2
        half -= half % 8
        phase = phases[top - 1]
        phases[top - 1] = phase + 1
        if phase == 2:
            top -= 1
            done -= 1
            sums[done - 1] = sums[done - 1] + sums[done]
        else:
            starts[top] = start if phase == 0 else start + half
            sizes[top] = half if phase == 0 else size - half
            phases[top] = 0
            top += 1
    return sums[0]'''

REDUCERS = {
    "int_sum": '''@nb.njit(cache=True)
def int_sum(v):
    res = np.int64(0)
    for i in range(v.shape[0]):
        res += np.int64(v[i])
    return res''',
    "max_of": '''@nb.njit(cache=True)
def max_of(v):
    if v.shape[0] == 0:
        raise ValueError("zero-size array to reduction operation maximum which has no identity")
    res = v[0]
    for i in range(1, v.shape[0]):
        x = v[i]
        res = res if (res > x or res != res) else x
    return res''',
    "min_of": '''@nb.njit(cache=True)
def min_of(v):
    if v.shape[0] == 0:
        raise ValueError("zero-size array to reduction operation minimum which has no identity")
    res = v[0]
    for i in range(1, v.shape[0]):
        x = v[i]
        res = res if (res < x or res != res) else x
    return res''',
    "any_of": '''@nb.njit(cache=True)
def any_of(v):
    for i in range(v.shape[0]):
        if v[i]:
            return True
    return False''',
    "all_of": '''@nb.njit(cache=True)
def all_of(v):
    for i in range(v.shape[0]):
        if not v[i]:
            return False
    return True''',
}
