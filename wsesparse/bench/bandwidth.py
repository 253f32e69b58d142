"""Memory bandwidth: the STREAM-like triad ``a = b + s*c`` (float64) that ``wsesparse bench``
prints at the top, and the bytes an SpMV must move, to compare its N = 1 rows with.

The triad runs three ways, which share the arrays, the timing loop, the check and the byte
count (3 arrays of 8 bytes per element and pass, as STREAM counts): numpy in L1-sized chunks
on a thread pool, wsesparse's own OpenMP loop, and torch's fused ``add``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from wsesparse._checks import check_int
from wsesparse._timing import best_time

_SCALAR = 3.0        # s of a = b + s*c, with b = 1 and c = 2: every a[i] ends as 7
_BYTES_PER_ELEM = 3 * 8


def _triad_arrays(n_elems: int, xp=None):
    """``a, b, c`` of the triad (``a`` zeros, ``b`` ones, ``c`` twos), numpy or ``xp``
    (torch)."""
    if xp is None:
        import numpy as np
        return np.zeros(n_elems), np.ones(n_elems), np.full(n_elems, 2.0)
    return (xp.zeros(n_elems, dtype=xp.float64), xp.ones(n_elems, dtype=xp.float64),
            xp.full((n_elems,), 2.0, dtype=xp.float64))


def _triad_gbs(step, a, calls: int, warmup: bool = False) -> float:
    """GB/s of ``step`` (one pass of the triad into ``a``) from its best of ``calls`` timed
    calls (the first included; after a separate warm-up with ``warmup``)."""
    _, best = best_time(step, calls, warmup=warmup)
    assert float(a[0]) == 7.0 and float(a[-1]) == 7.0
    return _BYTES_PER_ELEM * len(a) / best / 1e9


def _kernel(name: str):
    """``_tlrmvm``'s OpenMP loop ``name`` (the triad, the read), or None where the kernels
    are built without it."""
    try:
        from wsesparse._kernels import _tlrmvm
        return getattr(_tlrmvm, name)
    except (ImportError, AttributeError):
        return None


def triad_bandwidth(n_threads: int, n_elems: int = 20_000_000, repeats: int = 5) -> float:
    """STREAM-like triad a = b + s*c (float64) in GB/s, counting 3 arrays per pass.

    numpy has no fused triad, so each thread works through its part of the arrays in
    L1-sized chunks (multiply then add in cache): DRAM sees one read of b and c and one
    write of a, as in STREAM.

    Parameters
    ----------
    n_threads : int
        Threads of the pool, each with its contiguous part of the arrays.
    n_elems : int
        Array length (the default 160 MB per array is far beyond any cache).
    repeats : int
        Timed passes (the first included); the best counts.

    Returns
    -------
    float
        GB/s.
    """
    import numpy as np

    a, b, c = _triad_arrays(n_elems)
    chunk = 1 << 15  # 3 x 256 KB per step: stays in L2 between the two passes
    bounds = np.linspace(0, n_elems, n_threads + 1).astype(int)

    def part(i):
        for j in range(bounds[i], bounds[i + 1], chunk):
            e = min(j + chunk, bounds[i + 1])
            np.multiply(c[j:e], _SCALAR, out=a[j:e])
            np.add(a[j:e], b[j:e], out=a[j:e])

    with ThreadPoolExecutor(n_threads) as pool:
        return _triad_gbs(lambda: list(pool.map(part, range(n_threads))), a, repeats)


def triad_bandwidth_kernel(n_threads: int, n_elems: int = 20_000_000, repeats: int = 5, *,
                           warmup: bool = False) -> float | None:
    """The triad as wsesparse's own OpenMP loop (``_tlrmvm.stream_triad``) in GB/s.

    Parameters
    ----------
    n_threads : int
        OpenMP threads.
    n_elems : int
        Array length.
    repeats : int
        ``repeats + 1`` timed passes (the first included), or with ``warmup`` a warm-up
        pass and ``repeats`` timed ones; the best counts.
    warmup : bool
        Leave the first pass out of the timing (``benchmarks/bench_tlr.py``).

    Returns
    -------
    float or None
        GB/s; None where the kernels are built without the triad.
    """
    triad = _kernel("stream_triad")
    if triad is None:
        return None
    a, b, c = _triad_arrays(n_elems)
    return _triad_gbs(lambda: triad(a, b, c, _SCALAR, n_threads), a,
                      repeats if warmup else repeats + 1, warmup=warmup)


def triad_kernel_pass(n_threads: int, n_elems: int = 20_000_000):
    """One pass of the OpenMP triad as a call, to time it beside other work in rounds
    (``wsesparse bench --tlr``).

    Parameters
    ----------
    n_threads : int
        OpenMP threads.
    n_elems : int
        Array length.

    Returns
    -------
    (step, check, nbytes) or None
        ``step()`` runs one pass, ``check()`` raises AssertionError unless the last pass
        wrote ``b + s*c``, ``nbytes`` is what one pass moves; None where the kernels are
        built without the triad.

    Examples
    --------
    >>> step, check, nbytes = triad_kernel_pass(1, n_elems=1000)
    >>> step(); check(); nbytes
    24000
    """
    triad = _kernel("stream_triad")
    if triad is None:
        return None
    a, b, c = _triad_arrays(n_elems)

    def check():
        assert float(a[0]) == 7.0 and float(a[-1]) == 7.0

    return (lambda: triad(a, b, c, _SCALAR, n_threads)), check, _BYTES_PER_ELEM * n_elems


def read_kernel_pass(n_threads: int, nbytes: int):
    """One OpenMP read of a buffer of ``nbytes`` as a call, to time it in rounds beside a
    product that reads as many bytes from cache (``wsesparse bench --tlr``, the
    cache-resident operator): the rate the caches deliver to ``n_threads`` threads.

    Parameters
    ----------
    n_threads : int
        OpenMP threads, each reading its contiguous part.
    nbytes : int
        Bytes to read per pass (positive; rounded down to whole 8-byte words, at least
        one).

    Returns
    -------
    (step, check, nbytes) or None
        ``step()`` reads the buffer once, ``check()`` raises AssertionError unless the last
        pass summed it right, ``nbytes`` is what one pass reads; None where the kernels
        are built without the read.

    Raises
    ------
    ValueError, TypeError
        For a non-positive or non-integer ``n_threads`` or ``nbytes``.

    Examples
    --------
    >>> step, check, nbytes = read_kernel_pass(2, 1000)
    >>> step(); check(); nbytes
    1000
    """
    import numpy as np

    n_threads = check_int(n_threads, "n_threads", minimum=1)
    nbytes = check_int(nbytes, "nbytes", minimum=1)
    read = _kernel("stream_read")
    if read is None:
        return None
    a = np.arange(max(nbytes // 8, 1), dtype=np.uint64)
    total = int(a.sum(dtype=np.uint64))
    last = []

    def step():
        last[:] = [read(a, n_threads)]

    def check():
        assert last == [total], (last, total)

    return step, check, a.nbytes


def triad_bandwidth_torch(torch, n_elems: int = 20_000_000, repeats: int = 5) -> float:
    """The same triad as one fused multi-threaded pass, ``torch.add(b, c, alpha=s, out=a)``,
    in GB/s.

    Parameters
    ----------
    torch : module
        The torch module (with its thread count set).
    n_elems : int
        Array length.
    repeats : int
        Timed passes (the first included); the best counts.

    Returns
    -------
    float
        GB/s.
    """
    a, b, c = _triad_arrays(n_elems, torch)
    return _triad_gbs(lambda: torch.add(b, c, alpha=_SCALAR, out=a), a, repeats)


def spmv_bytes(A, x_itemsize: int) -> int:
    """Bytes an SpMV must move: values + indices + indptr once, plus x and y.

    Parameters
    ----------
    A : scipy.sparse CSR matrix
    x_itemsize : int
        Bytes per element of x and y.

    Returns
    -------
    int

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> spmv_bytes(sp.identity(100, format="csr", dtype="float32"), 4)
    2004
    """
    m, k = A.shape
    return (A.data.nbytes + A.indices.nbytes + A.indptr.nbytes
            + k * x_itemsize + m * x_itemsize)
