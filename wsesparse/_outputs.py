"""Result arrays of the products, with reuse of large freed ones.

glibc maps every allocation of 32 MiB or more afresh, and the kernel then
faults in and zeroes its pages while the product writes them: at M = K = 4096,
N = 1024, float64, density 0.001 a product into a new 32 MiB result took 9.6
ms, into an existing one 5.3 ms. Results of at least
``_runtime.OUTPUT_POOL_MIN_BYTES`` are therefore allocated through a numpy memory
handler (NEP 49, ``_kernels/_out_pool.h``) that keeps the last two such
buffers once their arrays are freed, for the next result of exactly the same
size: the common loop ``Y = W @ X`` then writes warm pages (the dense copies
that dense dispatch makes of a sparse operand come from here too). The arrays are
ordinary numpy arrays that own their data. ``WSESPARSE_OUTPUT_POOL=0`` (read
at import) turns this off; ``release_cached_outputs()`` frees what waits.
"""

from __future__ import annotations

import os

import numpy as np

from wsesparse._kernels import _runtime

_POOLED = os.environ.get("WSESPARSE_OUTPUT_POOL", "1").strip() != "0"
_POOL_MIN_BYTES = _runtime.OUTPUT_POOL_MIN_BYTES if _POOLED else float("inf")


def empty_output(shape: tuple[int, ...], dtype: np.dtype, nbytes: int,
                 aligned: bool = False, view_ok: bool = True) -> np.ndarray:
    """``np.empty(shape, dtype)`` for a product's result of ``nbytes`` bytes; on a
    64-byte line if ``aligned`` (the pool's allocator aligns every buffer; 0.5 us more
    than ``np.empty`` a call, so only where asked or pooled). Without the pool
    (``WSESPARSE_OUTPUT_POOL=0``) an aligned array is a view of a larger buffer, unless
    ``view_ok`` is False (a result the caller gets: an array that owns its data, as
    scipy's, off the line maybe)."""
    if nbytes >= _POOL_MIN_BYTES or (aligned and _POOLED):
        return _runtime.empty_pooled(shape, dtype)
    if aligned and view_ok:      # (no handler at all) a view on a line
        buf = np.empty(nbytes + 64, dtype=np.uint8)
        off = -buf.__array_interface__["data"][0] % 64
        return buf[off:off + nbytes].view(dtype).reshape(shape)
    return np.empty(shape, dtype=dtype)


def release_cached_outputs() -> int:
    """Free the buffers of large results kept for reuse; returns their bytes.

    ``sparse_matmul`` keeps the buffers of up to two freed results (or dense
    copies of a sparse operand, made for dense dispatch) of at least 32 MiB
    (each at most 1 GiB) to give the next such array of the same size, so
    that a loop of equal products does not fault in fresh pages every time.
    Call this to hand that memory back to the system (for example before a
    memory-hungry step that follows the loop).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from wsesparse import sparse_matmul, release_cached_outputs
    >>> A = sp.random(4096, 64, density=0.01, format="csr", random_state=0)
    >>> Y = sparse_matmul(A, np.ones((64, 1024)))  # a 32 MiB result
    >>> Y_bytes = Y.nbytes
    >>> del Y                                        # its buffer is kept
    >>> release_cached_outputs() >= Y_bytes
    True
    """
    return int(_runtime.release_pooled())
