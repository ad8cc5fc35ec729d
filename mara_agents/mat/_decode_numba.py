"""The greedy autoregressive decoding loop of :class:`~mara_agents.mat.numpy_infer.NumpyMAT`,
compiled (used when numba, the ``fast`` extra, is installed).

:meth:`NumpyMAT._decode_one` runs one Python iteration per node, each a dozen numpy calls
on arrays of K + 1 by m (m = 8 for the shipped MARA): at 64 nodes the interpreter, not the
arithmetic, is the cost. This kernel runs the same loop in one call with the same float32
operations: the pointer score's sum over m in numpy's order (numpy's pairwise sum,
:func:`_np_sum`), the bookkeeping in float64 as the Python
numbers are, float32 divisions where numpy divides float32 values. The conditioning
embedding ``tanh(c W + b)`` is a 4-term dot product here, summed left to right, with
libm's ``tanhf``; numpy's ``c @ W`` (BLAS) and SIMD ``tanh`` may round that last bit
differently on some CPUs, so the two paths agree to float32 rounding, like the numpy and
torch paths, and pick the same actions except at exact near-ties
(``tests/mara_agents/mat/test_model.py`` compares them). Compiled on first use and cached on
disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core_env._jit_options import JitOptions

_JIT: JitOptions = {"cache": True, "error_model": "numpy", "boundscheck": False}


@njit(**_JIT)
def _np_sum(v):  # pragma: no cover - compiled
    """``v.sum()`` of a contiguous float32 vector in numpy's order (its pairwise sum)."""
    return _pairwise(v, 0, v.shape[0])


@njit(**_JIT)
def _block(v, start, n):  # pragma: no cover - compiled
    """numpy's ``pairwise_sum`` of ``v[start:start + n]`` for n <= 128 (float32)."""
    if n < 8:
        acc = np.float32(0.0)
        for i in range(start, start + n):
            acc += v[i]
        return acc
    r0, r1, r2, r3 = v[start], v[start + 1], v[start + 2], v[start + 3]
    r4, r5, r6, r7 = v[start + 4], v[start + 5], v[start + 6], v[start + 7]
    i = 8
    while i < n - (n % 8):
        b = start + i
        r0 += v[b]
        r1 += v[b + 1]
        r2 += v[b + 2]
        r3 += v[b + 3]
        r4 += v[b + 4]
        r5 += v[b + 5]
        r6 += v[b + 6]
        r7 += v[b + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += v[start + i]
        i += 1
    return res


@njit(**_JIT)
def _pairwise(v, start, n):  # pragma: no cover - compiled
    """numpy's ``pairwise_sum`` of ``v[start:start + n]``: blocks of at most 128 summed by
    :func:`_block`, halves (the first a multiple of 8) added pairwise. numpy recurses; this
    walks the same tree with an explicit stack (numba's disk cache cannot hold recursion)."""
    if n <= 128:
        return _block(v, start, n)
    starts = np.empty(64, np.int64)
    sizes = np.empty(64, np.int64)
    phase = np.zeros(64, np.int64)
    vals = np.empty(64, np.float32)
    sp, vp = 1, 0
    starts[0], sizes[0] = start, n
    while sp > 0:
        t = sp - 1
        if sizes[t] <= 128:
            vals[vp] = _block(v, starts[t], sizes[t])
            vp += 1
            sp -= 1
            continue
        n2 = sizes[t] // 2
        n2 -= n2 % 8
        if phase[t] == 0:  # the first half
            phase[t] = 1
            starts[sp], sizes[sp], phase[sp] = starts[t], n2, 0
            sp += 1
        elif phase[t] == 1:  # the second half
            phase[t] = 2
            starts[sp], sizes[sp], phase[sp] = starts[t] + n2, sizes[t] - n2, 0
            sp += 1
        else:  # both halves summed: add them
            vals[vp - 2] = vals[vp - 2] + vals[vp - 1]
            vp -= 1
            sp -= 1
    return vals[0]


@njit(**_JIT)
def _phi_row(out, c0, c1, c2, c3, w, b):  # pragma: no cover - compiled
    """``out = tanh(c @ w + b)`` for one conditioning vector ``c`` (float32)."""
    for t in range(out.shape[0]):
        z = c0 * w[0, t] + c1 * w[1, t] + c2 * w[2, t] + c3 * w[3, t]
        out[t] = np.tanh(z + b[t])


@njit(**_JIT)
def decode_one(qk, a_node, a_tok, mask, speed, cap, phi_w, phi_b, n_nodes
               ):  # pragma: no cover - compiled
    """Greedy actions int64[N] of one environment (:meth:`NumpyMAT._decode_one`).

    Args: qk float32[N, K+1]; a_node float32[N, m]; a_tok float32[K+1, m]; mask bool[N, K+1];
    speed float32[N]; cap float32[K]; phi_w float32[4, m]; phi_b float32[m]; n_nodes: the
    layout's node count (conditioning counts are divided by it).
    """
    n, k1 = mask.shape
    m = a_tok.shape[1]
    nn = float(n_nodes)
    nn32 = np.float32(nn)
    count = np.zeros(k1)
    speed_sum = np.zeros(k1, np.float32)
    left = np.empty(k1)
    left[0] = nn
    for j in range(1, k1):
        left[j] = float(cap[j - 1])
    prev = np.zeros(k1)
    phi = np.empty((k1, m), np.float32)
    for j in range(k1):  # the first node's conditioning: capacity left only
        _phi_row(phi[j], np.float32(0.0), np.float32(0.0), np.float32(left[j]) / nn32,
                 np.float32(0.0), phi_w, phi_b)
    legal = mask.copy()
    for j in range(1, k1):
        if not left[j] > 0.5:
            legal[:, j] = False
    actions = np.zeros(n, np.int64)
    prod = np.empty(m, np.float32)
    neg = np.float32(-1e9)
    last = 0
    for i in range(n):
        a = 0
        best = np.float32(0.0)
        for j in range(k1):
            for t in range(m):
                prod[t] = (a_node[i, t] + a_tok[j, t]) * phi[j, t]
            s = qk[i, j] + _np_sum(prod) if legal[i, j] else neg
            if s != s:  # numpy's argmax stops at the first NaN
                a = j
                break
            if j == 0 or s > best:
                best, a = s, j
        actions[i] = a
        count[a] += 1.0
        speed_sum[a] = speed_sum[a] + speed[i]
        left[a] -= 1.0
        if a != 0 and left[a] <= 0.5:
            for r in range(i + 1, n):
                legal[r, a] = False
        prev[last] = 0.0
        prev[a] = 1.0
        for j in (last, a):
            _phi_row(phi[j], np.float32(count[j] / nn), speed_sum[j] / nn32,
                     np.float32(left[j] / nn), np.float32(prev[j]), phi_w, phi_b)
        last = a
    return actions
